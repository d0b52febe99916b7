"""`smgpy serve` (MLXEngine) vs `mlx_lm.server` on the same model, same machine, one run.

Measures, with streaming greedy chat completions of 64 tokens:

* aggregate tokens/s and mean time to first token at 1, 4 and 8 concurrent clients;
* single-stream decode tokens/s against mlx-lm's raw ``stream_generate`` on the same model, in this
  process (the ratio is the serving overhead);
* time to first token of a request sharing a ~2,000-token prefix, cold vs warm prefix cache.

Both servers are started as subprocesses, one after the other, on free ports, from the same
converted model directory (SmolLM2-135M-Instruct, float32). Rounds alternate between the two
servers so that load from other processes on a shared machine hits both alike, and the raw
``stream_generate`` measurement runs inside each round too, not once at the end.

BLAS: by default everything runs on the reference BLAS the Linux ``mlx[cpu]`` wheel links.
``--cpu-blas auto`` (or a library) puts OpenBLAS (or BLIS, MKL) in its place for all of it: both
servers (``LD_PRELOAD``) and the raw ``stream_generate`` run (preloaded in this process), so the
comparison is of the servers alone (see ``benches/_blas.py``).

Run: ``python benches/mlx_serve.py [--rounds 2] [--cpu-blas auto]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from _blas import add_cpu_blas_argument, child_env, find_blas, preload_here
from _servers import QUESTIONS, free_port, mlx_lm_server_cmd, running, smgpy_serve_cmd, sse_chunk, streamed_chat

MAX_TOKENS = 64
CONCURRENCY = (1, 4, 8)
REQUEST_TIMEOUT = 600.0
STARTUP_TIMEOUT = 300.0


@contextmanager
def server(cmd: list[str], port: int, log_path: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start a server subprocess and wait (bounded) until ``/v1/models`` answers; yields its base URL."""
    base = f"http://127.0.0.1:{port}"
    with running(
        cmd, base + "/v1/models", name=str(cmd[0:4]), log_path=log_path, env=env, startup_timeout=STARTUP_TIMEOUT
    ):
        yield base


@dataclass
class Result:
    tokens: int
    ttft: float
    decode_tps: float  # tokens after the first / time after the first


async def chat(
    client: httpx.AsyncClient, base: str, model: str, messages: list[dict[str, Any]], max_tokens: int
) -> Result:
    body = streamed_chat(model, messages, max_tokens)
    t0 = time.perf_counter()
    first = last = 0.0
    chunks = 0
    usage_tokens = None
    async with client.stream("POST", base + "/v1/chat/completions", json=body, timeout=REQUEST_TIMEOUT) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            data = sse_chunk(line)
            if data is None:
                continue
            if data.get("usage"):
                usage_tokens = data["usage"].get("completion_tokens")
            for choice in data.get("choices") or []:
                if (choice.get("delta") or {}).get("content"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    chunks += 1
    tokens = usage_tokens if usage_tokens is not None else chunks
    ttft = (first or time.perf_counter()) - t0
    decode = (tokens - 1) / (last - first) if last > first and tokens > 1 else 0.0
    return Result(tokens, ttft, decode)


async def concurrent(base: str, model: str, c: int) -> dict[str, float]:
    async with httpx.AsyncClient() as client:
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *(
                chat(client, base, model, [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}], MAX_TOKENS)
                for i in range(c)
            )
        )
        wall = time.perf_counter() - t0
    return {
        "tokens_per_s": sum(r.tokens for r in results) / wall,
        "ttft_s": statistics.mean(r.ttft for r in results),
        "decode_tps": statistics.mean(r.decode_tps for r in results),
    }


def long_prefix(words: int) -> str:
    body = " ".join(f"fact {i}: the value of item {i} is {i * 7 % 13}." for i in range(words))
    return f"Session {uuid.uuid4().hex}. You are a careful assistant. Reference data: {body}"


async def prefix_ttft(base: str, model: str) -> dict[str, float]:
    """TTFT of a first request with a new ~2,000-token system prompt, then of a second one sharing it."""
    system = long_prefix(118)
    async with httpx.AsyncClient() as client:
        cold = await chat(
            client, base, model, [{"role": "system", "content": system}, {"role": "user", "content": "Hi."}], 1
        )
        warm = await chat(
            client,
            base,
            model,
            [{"role": "system", "content": system}, {"role": "user", "content": "What is item 3?"}],
            1,
        )
    return {"cold_ttft_s": cold.ttft, "warm_ttft_s": warm.ttft}


class RawStreamGenerate:
    """mlx-lm's own single-stream decode rate on the same model and prompt (no server)."""

    def __init__(self, model_dir: str) -> None:
        from mlx_lm import load

        self.model, self.tok = load(model_dir)
        self.prompt = self.tok.apply_chat_template(
            [{"role": "user", "content": QUESTIONS[0]}], add_generation_prompt=True, tokenize=False
        )
        self.rates: list[float] = []
        self.run()  # warm-up, not kept
        self.rates.clear()

    def run(self) -> float:
        """Decode tokens/s after the first token, measured like the servers' ``decode_tps``."""
        from mlx_lm import stream_generate

        first = last = 0.0
        n = 0
        for _ in stream_generate(self.model, self.tok, self.prompt, max_tokens=MAX_TOKENS):
            last = time.perf_counter()
            first = first or last
            n += 1
        rate = (n - 1) / (last - first) if last > first else 0.0
        self.rates.append(rate)
        return rate


def chart(results: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    blas = results.get("blas", {})
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, label in (("smgpy", "smgpy serve (MLXEngine)"), ("mlx_lm", "mlx_lm.server")):
        label += f", BLAS: {blas.get(name) or 'bundled reference'}"
        ys = [results[name][str(c)]["tokens_per_s"] for c in CONCURRENCY]
        ax.plot(CONCURRENCY, ys, marker="o", label=label)
    ax.axhline(results["raw_stream_generate_tps"], color="gray", linestyle="--", label="raw stream_generate (1 stream)")
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel("aggregate tokens/s")
    ax.set_xticks(list(CONCURRENCY))
    ax.set_title("SmolLM2-135M float32, streaming greedy, 64 tokens")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds per concurrency (median kept)")
    parser.add_argument("--chart", default=os.path.join(os.path.dirname(__file__), "mlx_throughput.png"))
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument(
        "--client-nice",
        type=int,
        default=0,
        help="lower the bench client's priority by this much once the servers are up (e.g. 10)",
    )
    add_cpu_blas_argument(parser, default="off", used_by="both servers and the raw run")
    args = parser.parse_args()

    blas = find_blas(args.cpu_blas)
    preload_here(blas)  # before mlx.core loads: the raw stream_generate run is in this process
    from smgpy.mlx import demo_gguf_path, resolve_model

    print(f"BLAS: {blas or 'bundled reference'} (both servers and the raw run)")
    server_env = child_env(blas)  # the same BLAS for both servers
    load_before = os.getloadavg()

    model_dir, name = resolve_model(str(demo_gguf_path()), dtype="float32")
    ports = {"smgpy": free_port(), "mlx_lm": free_port()}
    cmds = {
        "smgpy": smgpy_serve_cmd(model_dir, name, ports["smgpy"]),
        "mlx_lm": mlx_lm_server_cmd(model_dir, ports["mlx_lm"]),
    }
    runs: dict[str, dict[int, list[dict[str, float]]]] = {k: {c: [] for c in CONCURRENCY} for k in cmds}
    prefix: dict[str, list[dict[str, float]]] = {k: [] for k in cmds}
    log_dir = os.environ.get("TMPDIR", "/tmp")
    with server(cmds["smgpy"], ports["smgpy"], os.path.join(log_dir, "bench-smgpy.log"), server_env) as smgpy_url:
        with server(cmds["mlx_lm"], ports["mlx_lm"], os.path.join(log_dir, "bench-mlx_lm.log"), server_env) as mlx_url:
            # Only one server is driven at a time; the other sits idle.
            urls = {"smgpy": smgpy_url, "mlx_lm": mlx_url}
            models = {"smgpy": name, "mlx_lm": model_dir}
            for key in urls:  # warm-up (first MLX calls compile kernels)
                asyncio.run(concurrent(urls[key], models[key], 2))
            raw = RawStreamGenerate(model_dir)
            if args.client_nice:
                # The load generator should not take CPU from the server it measures (on 2 cores both
                # are saturated by MLX); the servers, started before, keep their priority. The raw
                # loop runs in this process too, but alone, so its priority changes nothing.
                os.nice(args.client_nice)
            for rnd in range(args.rounds):
                for c in CONCURRENCY:
                    order = list(urls) if rnd % 2 == 0 else list(reversed(urls))
                    for key in order:
                        r = asyncio.run(concurrent(urls[key], models[key], c))
                        runs[key][c].append(r)
                        print(
                            f"round {rnd} c={c} {key}: {r['tokens_per_s']:.2f} tok/s, ttft {r['ttft_s']:.3f}s, "
                            f"decode {r['decode_tps']:.2f} tok/s",
                            flush=True,
                        )
                    if c == 1:
                        print(f"round {rnd} raw stream_generate: decode {raw.run():.2f} tok/s", flush=True)
                for key in urls:
                    p = asyncio.run(prefix_ttft(urls[key], models[key]))
                    prefix[key].append(p)
                    print(
                        f"round {rnd} prefix {key}: cold {p['cold_ttft_s']:.3f}s warm {p['warm_ttft_s']:.3f}s",
                        flush=True,
                    )
    results: dict[str, Any] = {k: {str(c): median_of(v[c]) for c in CONCURRENCY} for k, v in runs.items()}
    for k in cmds:
        results[k]["prefix"] = median_of(prefix[k])
    results["raw_stream_generate_tps"] = statistics.median(raw.rates)
    results["blas"] = {"smgpy": blas, "mlx_lm": blas}
    results["loadavg_1m"] = {"before": load_before[0], "after": os.getloadavg()[0]}
    print(json.dumps(results, indent=2))
    print()
    print("| clients | smgpy tok/s | mlx_lm.server tok/s | ratio | smgpy TTFT | mlx_lm.server TTFT |")
    print("|---:|---:|---:|---:|---:|---:|")
    for c in CONCURRENCY:
        s, m = results["smgpy"][str(c)], results["mlx_lm"][str(c)]
        print(
            f"| {c} | {s['tokens_per_s']:.2f} | {m['tokens_per_s']:.2f} | {s['tokens_per_s'] / m['tokens_per_s']:.2f}x "
            f"| {s['ttft_s'] * 1000:.0f} ms | {m['ttft_s'] * 1000:.0f} ms |"
        )
    single = results["smgpy"]["1"]["decode_tps"]
    raw = results["raw_stream_generate_tps"]
    print(
        f"\nsingle-stream decode: smgpy {single:.2f} tok/s, raw stream_generate {raw:.2f} tok/s ({single / raw:.2f}x)"
    )
    for k in cmds:
        p = results[k]["prefix"]
        print(
            f"{k} 2k-prefix TTFT: cold {p['cold_ttft_s']:.3f}s, warm {p['warm_ttft_s']:.3f}s "
            f"({p['cold_ttft_s'] / p['warm_ttft_s']:.1f}x)"
        )
    chart(results, args.chart)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
