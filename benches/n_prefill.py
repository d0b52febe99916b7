"""`n` choices from one prefill vs one request per choice: time to first token, same engine, one run.

The demo model (SmolLM2-135M-Instruct) in one MLXEngine, served twice in this process: once as it
is (``accepts_n``: the server sends one request with ``n`` and the engine prefills the prompt once,
then gives each choice its own copy of the cache and its own sampler), once with ``accepts_n``
switched off, so the server sends ``n`` requests as it did before (they are prefilled as one batch,
each its own prompt). Each request is a streaming chat completion with a new ~1,000-token prompt
(a fresh session id, so no prefix-cache hit) and ``max_tokens=4``; TTFT is the time until every
choice has produced its first content token. Rounds alternate between the two modes and n=1/n=4.

Run: ``python benches/n_prefill.py [--rounds 3] [--words 60]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def prompt(words: int) -> list[dict[str, str]]:
    body = " ".join(f"fact {i}: the value of item {i} is {i * 7 % 13}." for i in range(words))
    return [
        {"role": "system", "content": f"Session {uuid.uuid4().hex}. Reference data: {body}"},
        {"role": "user", "content": "What is item 3?"},
    ]


def ttft(url: str, n: int, words: int) -> float:
    """Seconds until every one of the ``n`` choices has streamed its first content token."""
    body = {"messages": prompt(words), "n": n, "max_tokens": 4, "temperature": 0.7, "seed": 1, "stream": True}
    start = time.perf_counter()
    first: dict[int, float] = {}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        import json

        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            for c in json.loads(line[6:])["choices"]:
                if c["delta"].get("content") and c["index"] not in first:
                    first[c["index"]] = time.perf_counter() - start
    if len(first) != n:
        raise RuntimeError(f"only {len(first)} of {n} choices produced content")
    return max(first.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--words", type=int, default=60, help="facts in the system prompt (~16 tokens each)")
    args = ap.parse_args()
    from conftest import demo_gguf, serve_in_thread  # the demo model (fetched once), a server thread
    from smgpy.mlx import MLXEngine

    engine = MLXEngine.from_pretrained(str(demo_gguf()), max_running=8)
    n_tokens = len(engine.tokenizer.encode(str(prompt(args.words))))
    results: dict[str, list[float]] = {}
    try:
        for r in range(args.rounds):
            for mode in (
                (("one prefill", True), ("n requests", False))
                if r % 2 == 0
                else (("n requests", False), ("one prefill", True))
            ):
                engine.accepts_n = mode[1]
                with serve_in_thread(engine) as url:
                    ttft(url, 1, 8)  # warm-up
                    for n in (1, 4):
                        t = ttft(url, n, args.words)
                        results.setdefault(f"{mode[0]} n={n}", []).append(t)
                        print(f"round {r} {mode[0]} n={n}: {t:.3f} s", flush=True)
    finally:
        engine.shutdown()
    print(f"prompt ~{n_tokens} tokens, {args.rounds} rounds, median TTFT (s):")
    med = {k: statistics.median(v) for k, v in results.items()}
    for k, v in med.items():
        print(f"  {k:22s} {v:7.3f}")
    for mode in ("one prefill", "n requests"):
        print(f"  {mode}: n=4 / n=1 = {med[f'{mode} n=4'] / med[f'{mode} n=1']:.2f}x")
    print(f"  n=4: n requests / one prefill = {med['n requests n=4'] / med['one prefill n=4']:.2f}x")


if __name__ == "__main__":
    main()
