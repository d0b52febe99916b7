"""The MLX engine's own loop, in-process (no HTTP): tokens/s, host time per decode step, and how
long running rows stall while a long prompt arrives.

On an accelerator a small model's step is cheap, so what the engine does on the host per step
(scheduling, building the step's graph in Python, turning tokens into outputs) and how it treats
arriving prompts decide throughput. This bench measures exactly those, the same way for any
version of ``smgpy.mlx``, so a change can be compared with the code before it in one run:

- **tokens/s** at 1, 8 and 32 clients, each client sending greedy requests of ``--max-tokens``
  tokens back to back (prompts of 24-40 random token ids; end-of-sequence ignored);
- **host time per decode step**: the CPU time of the engine's MLX thread (``pthread`` CPU clock)
  divided by the decode steps (tokens / clients). MLX evaluates on its own stream threads and
  the MLX thread sleeps while it waits for results, so this is the Python and graph-building
  work that a GPU cannot hide, measured on this CPU. (Where the engine keeps ``StepTimes`` its own
  split is printed too.);
- **stall per arriving long prompt**: with 8 clients decoding, a ``--long-prompt`` token prompt
  (1,000 by default) arrives; the longest gap between two tokens of the running streams until the
  long prompt's first token, minus their median gap before it, against the time one prefill chunk
  (``--chunk`` tokens, 512) of the bare model takes. Twice: the first long prompt (the step's new
  shapes, such as a compiled step's wider span, are made then) and the next (they exist);
- **the bare step**: the model's own batched decode step, pipelined (``benches/mlx_tiny.py``),
  the bound for any engine's tokens/s, and its own host time per step (building the model's graph
  and queueing it), the part of an engine's host time that only compiling the model could cut.

``--base SRC`` runs the same measurements on another checkout's ``python/`` directory (e.g. a
``git worktree`` of the previous commit, with the built ``_native`` extension copied in), in
alternating order, and prints the ratios. ``--shape tiny|135m|1.7b`` and ``--dtype`` pick the
random-weight model (the demo model's llama config cut down, or at the size of SmolLM2-135M /
SmolLM2-1.7B); ``--tokenizer DIR`` gives the tokenizer files where the demo model cannot be
fetched (a device machine). ``--kv-bits 8`` runs the engines with a quantized KV cache (the bare step
stays unquantized).

``--cpu-blas auto`` (or a library) runs everything on OpenBLAS (or BLIS, MKL) instead of the
reference BLAS the Linux ``mlx[cpu]`` wheel links: preloaded in this process for the bare step
and the prefill chunk, and into the engine's worker processes through ``LD_PRELOAD`` (``benches/_blas.py``),
so on a CPU the model's step costs little and the engine's own work shows, as on an accelerator.

Run: ``python benches/mlx_loop.py [--base DIR] [--rounds 2] [--shape tiny] [--out results.json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _blas import add_cpu_blas_argument, child_env, find_blas, preload_here
from mlx_tiny import SHAPES, build_model, forward_step_rates

CONCURRENCY = (1, 8, 32)


# ----- the worker: one engine version, in its own process -----


def _thread_cpu(name: str) -> float:
    """CPU seconds used so far by the thread called ``name``."""
    for t in threading.enumerate():
        if t.name == name and t.ident is not None:
            return time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    raise RuntimeError(f"no thread named {name}")


async def _request(engine: Any, ids: list[int], max_tokens: int, stamps: list[float] | None = None) -> int:
    from smgpy.engine import GenerateReqInput

    obj = GenerateReqInput(
        input_ids=ids, sampling_params={"temperature": 0.0, "max_new_tokens": max_tokens, "ignore_eos": True}
    )
    n = 0
    async for out in engine.generate_request(obj):
        got = len(out["output_ids"])
        n += got
        if stamps is not None and got:
            stamps.append(time.perf_counter())
    return n


def _prompt(rng: random.Random, length: int) -> list[int]:
    return [rng.randrange(100, 49000) for _ in range(length)]


async def _load_point(engine: Any, clients: int, per_client: int, max_tokens: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    prompts = [[_prompt(rng, rng.randrange(24, 41)) for _ in range(per_client)] for _ in range(clients)]

    async def client(mine: list[list[int]]) -> int:
        return sum([await _request(engine, p, max_tokens) for p in mine])

    sched = engine._sched
    times0 = _times(sched)
    cpu0 = _thread_cpu("smgpy-mlx")
    t0 = time.perf_counter()
    tokens = sum(await asyncio.gather(*(client(p) for p in prompts)))
    wall = time.perf_counter() - t0
    cpu = _thread_cpu("smgpy-mlx") - cpu0
    steps = tokens / clients
    point = {
        "clients": clients,
        "tokens": tokens,
        "tok_s": tokens / wall,
        "host_us_per_step": cpu / steps * 1e6,
    }
    times1 = _times(sched)
    if times0 is not None and times1 is not None and times1[0] > times0[0]:
        n = times1[0] - times0[0]
        point["own_steps"] = n
        point["own_host_us"] = (times1[1] - times0[1]) / n * 1e6
        point["own_wait_us"] = (times1[2] - times0[2]) / n * 1e6
    return point


def _times(sched: Any) -> tuple[int, float, float] | None:
    t = getattr(sched, "times", None)
    return None if t is None else (t.steps, t.host, t.wait)


async def _stall_point(engine: Any, long_prompt: int, seed: int) -> dict[str, Any]:
    """8 streams decode; a long prompt arrives; how long do their tokens stop?"""
    rng = random.Random(seed)
    stamps: list[list[float]] = [[] for _ in range(8)]
    runners = [asyncio.ensure_future(_request(engine, _prompt(rng, 32), 400, stamps[i])) for i in range(8)]
    while min(len(s) for s in stamps) < 40:
        await asyncio.sleep(0.005)
    before = [b - a for s in stamps for a, b in zip(s[-30:-1], s[-29:], strict=True)]
    arrive = time.perf_counter()
    first: list[float] = []
    await _request(engine, _prompt(rng, long_prompt), 1, first)
    gaps = [b - a for s in stamps for a, b in zip(s[:-1], s[1:], strict=True) if b > arrive and a < first[0]]
    for r in runners:
        r.cancel()
    await asyncio.gather(*runners, return_exceptions=True)
    median = statistics.median(before)
    return {
        "median_gap_ms": median * 1e3,
        "max_gap_ms": max(gaps, default=0.0) * 1e3,
        "stall_ms": (max(gaps, default=median) - median) * 1e3,
        "long_prompt_ttft_ms": (first[0] - arrive) * 1e3,
    }


def _chunk_ms(model_dir: str, chunk: int) -> float:
    """One prefill chunk of the bare model (batch 1), median of 5."""
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.models.cache import make_prompt_cache

    model, _ = load(model_dir)
    runs = []
    for _ in range(6):
        cache = make_prompt_cache(model)
        x = mx.full((1, chunk), 7, dtype=mx.int32)
        t0 = time.perf_counter()
        model(x, cache=cache)
        mx.eval([c.state for c in cache])
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs[1:]) * 1e3


def worker(args: argparse.Namespace) -> None:
    from smgpy.mlx import MLXEngine

    # Speculation off: this measures the plain decode step (a verification step is another shape).
    options: dict[str, Any] = {"max_running": 32, "max_waiting": 256, "prefix_cache_bytes": 0}
    if "prompt_lookup_tokens" in inspect.signature(MLXEngine).parameters:  # older engines have none
        options["prompt_lookup_tokens"] = 0
    if args.kv_bits is not None:
        options.update(kv_bits=args.kv_bits, kv_group_size=args.kv_group_size)
    engine = MLXEngine(args.model, **options)
    result: dict[str, Any] = {"points": []}

    async def main() -> None:
        await _load_point(engine, 4, 1, 16, seed=99)  # warm-up: shapes and kernels
        for c in CONCURRENCY:
            result["points"].append(await _load_point(engine, c, args.per_client, args.max_tokens, seed=c))
        # The first long prompt makes the step's new shapes (a compiled step traces each once);
        # the second finds them made, as a server that has run a while does.
        result["stall"] = await _stall_point(engine, args.long_prompt, seed=7)
        result["stall_warm"] = await _stall_point(engine, args.long_prompt, seed=8)

    asyncio.run(main())
    engine.shutdown()
    print("RESULT " + json.dumps(result), flush=True)


# ----- the driver -----


def run_worker(src: Path | None, args: argparse.Namespace, model_dir: Path, blas: str | None) -> dict[str, Any]:
    env = child_env(blas)  # the engine's process runs on the BLAS of the bare step
    if src is not None:
        env["PYTHONPATH"] = str(src)
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        "--model",
        str(model_dir),
        "--per-client",
        str(args.per_client),
        "--max-tokens",
        str(args.max_tokens),
        "--long-prompt",
        str(args.long_prompt),
    ]
    if args.kv_bits is not None:
        cmd += ["--kv-bits", str(args.kv_bits), "--kv-group-size", str(args.kv_group_size)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"worker failed ({src or 'this tree'}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return dict(json.loads(line[len("RESULT ") :]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--base", type=Path, help="another checkout's python/ directory to compare with")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--per-client", type=int, default=4, help="requests per client at each point")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--long-prompt", type=int, default=1000)
    ap.add_argument("--chunk", type=int, default=512, help="the engine's prefill chunk (prefill_step_size)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    ap.add_argument("--tokenizer", type=Path, default=os.environ.get("SMGPY_GPU_TOKENIZER"))
    ap.add_argument("--kv-bits", type=int, help="the engine's running batch keeps keys and values quantized")
    ap.add_argument("--kv-group-size", type=int, default=32, help="with --kv-bits (the tiny shape's heads are 32 wide)")
    add_cpu_blas_argument(ap, default="off", used_by="every measurement")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    blas = find_blas(args.cpu_blas)
    preload_here(blas)  # before mlx.core loads: the bare step and the prefill chunk run here

    tmp = Path(tempfile.mkdtemp(prefix="smgpy-loop-"))
    try:
        model_dir = build_model(tmp / "model", args.shape, args.dtype, args.tokenizer)
        bare_host: dict[int, float] = {}
        bare = {b: r[1] for b, r in forward_step_rates(model_dir, CONCURRENCY, host_us=bare_host).items()}
        chunk = _chunk_ms(str(model_dir), args.chunk)
        variants: dict[str, Path | None] = {"smgpy": None}
        if args.base is not None:
            variants["base"] = args.base.resolve()
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
        for i in range(args.rounds):
            order = list(variants) if i % 2 == 0 else list(reversed(variants))
            for name in order:
                runs[name].append(run_worker(variants[name], args, model_dir, blas))
                print(f"round {i + 1}: {name} done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(name: str, c: int, key: str) -> float:
        vals = [p[key] for r in runs[name] for p in r["points"] if p["clients"] == c and key in p]
        return statistics.median(vals) if vals else float("nan")

    kv = f"; KV cache {args.kv_bits} bits, groups of {args.kv_group_size}" if args.kv_bits else ""
    print(f"\nshape {args.shape}, {args.dtype}{kv}; BLAS: {blas or 'MLX bundled'}; median of {args.rounds} rounds")
    cols = " | ".join(f"{n} tok/s | {n} / bare | {n} host us/step" for n in variants)
    head = "| clients | bare step tok/s | bare host us/step | " + cols
    print(head + (" | host base / smgpy |" if "base" in variants else " |"))
    for c in CONCURRENCY:
        cells = [f"{c}", f"{bare[c]:,.0f}", f"{bare_host[c]:,.0f}"]
        for n in variants:
            tok = med(n, c, "tok_s")
            cells += [f"{tok:,.0f}", f"{tok / bare[c]:.0%}", f"{med(n, c, 'host_us_per_step'):,.0f}"]
        if "base" in variants:
            cells.append(f"{med('base', c, 'host_us_per_step') / med('smgpy', c, 'host_us_per_step'):.2f}x")
        print("| " + " | ".join(cells) + " |")
    for n in variants:
        for key, which in (("stall", "the first"), ("stall_warm", "the next")):
            stalls = [r[key] for r in runs[n] if key in r]
            if not stalls:
                continue
            print(
                f"{n}: stall per arriving {args.long_prompt}-token prompt ({which}) "
                f"{statistics.median(s['stall_ms'] for s in stalls):.1f} ms (median gap "
                f"{statistics.median(s['median_gap_ms'] for s in stalls):.1f} ms, its TTFT "
                f"{statistics.median(s['long_prompt_ttft_ms'] for s in stalls):.0f} ms)"
            )
        print(f"  one {args.chunk}-token chunk of the bare model: {chunk:.1f} ms")
        own = [p for r in runs[n] for p in r["points"] if "own_host_us" in p]
        for p in own:
            split = f"host {p['own_host_us']:.0f} us, wait {p['own_wait_us']:.0f} us"
            print(f"  {n} c={p['clients']}: the engine's own split: {split}")
    if args.out:
        args.out.write_text(
            json.dumps(
                {"bare": bare, "bare_host_us": bare_host, "chunk_ms": chunk, "runs": runs, "args": vars(args)},
                default=str,
            )
        )


if __name__ == "__main__":
    main()
