"""Serving overhead per streamed token: smgpy vs a minimal Starlette/uvicorn/orjson server.

Same engine (benches/fast_engine.py: yields deltas as fast as it can), same load: 64 streaming
chat requests of 2,500 tokens, 32 at a time. Measures the *server process's* CPU time per
streamed token (psutil), tokens/s delivered, and the engine's own CPU per token (draining the
same generators with no server). Serving overhead = server CPU/token - engine CPU/token.

The client matters, because it shares the machine:

* ``--client httpx`` (the default): a Python client that reads and splits every event. It needs
  about a core of its own, so on a 2-core machine the servers' threads and the client take
  turns, and it reads more slowly than smgpy writes.
* ``--client wrk`` (C, one thread; ``apt install wrk``): the same 32 streams, opened back to back
  for ``--seconds``. It costs little and reads as fast as a server writes. Tokens are counted
  from the bytes wrk read (one full response's size, framing included, is measured first).

    python benches/bridge.py [--requests 64] [--concurrency 32] [--tokens 2500] [--rounds 3]
                             [--client httpx|wrk] [--seconds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from _servers import free_port, running  # noqa: E402
from fast_engine import ENGINES, make_engine  # noqa: E402

SMGPY_SERVER = """
import sys; sys.path.insert(0, {here!r})
import smgpy
import fast_engine
smgpy.serve_oai(fast_engine.make_engine({engine!r}), port={port}, log_level="warn")
"""


@contextmanager
def start(kind: str, engine: str = "fast") -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    if kind == "smgpy":
        cmd = [sys.executable, "-c", SMGPY_SERVER.format(here=str(HERE), port=port, engine=engine)]
    else:
        cmd = [sys.executable, str(HERE / "python_server.py"), str(port), engine]
    url = f"http://127.0.0.1:{port}"
    with running(cmd, url + "/health", name=f"{kind} server", startup_timeout=60, poll=0.1) as proc:
        yield proc, url


async def load(url: str, requests: int, concurrency: int, tokens: int) -> int:
    sem = asyncio.Semaphore(concurrency)
    body = {"messages": [{"role": "user", "content": "go"}], "stream": True, "max_tokens": tokens}
    limits = httpx.Limits(max_connections=concurrency)

    async with httpx.AsyncClient(timeout=300, limits=limits) as client:

        async def one() -> int:
            async with sem:
                n = 0
                async with client.stream("POST", url + "/v1/chat/completions", json=body) as r:
                    buf = b""
                    async for chunk in r.aiter_bytes():
                        buf += chunk
                        *events, buf = buf.split(b"\n\n")
                        for ev in events:
                            if ev.startswith(b"data: {") and b'"content":" tok"' in ev:
                                n += 1
                return n

        counts = await asyncio.gather(*(one() for _ in range(requests)))
    return sum(counts)


def request_body(tokens: int) -> str:
    return json.dumps({"messages": [{"role": "user", "content": "go"}], "stream": True, "max_tokens": tokens})


def response_size(url: str, tokens: int) -> int:
    """Bytes on the wire of one whole streamed response (status line, headers, chunk framing and
    events), read from a raw socket as wrk reads it."""
    host, port = url.removeprefix("http://").split(":")
    body = request_body(tokens).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    size = 0
    with socket.create_connection((host, int(port)), timeout=60) as s:
        s.sendall(head.encode() + body)
        while chunk := s.recv(1 << 16):
            size += len(chunk)
    # wrk keeps connections open: its responses lack the `connection: close` header line.
    return size - len("connection: close\r\n")


WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = %s
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("BYTES %%d ERRORS %%d\\n", summary.bytes, e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def wrk_load(url: str, seconds: float, concurrency: int, tokens: int) -> int:
    """Stream for ``seconds`` with wrk: the bytes it read."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT % json.dumps(request_body(tokens)))
    try:
        cmd = [
            "wrk",
            "-t1",
            f"-c{concurrency}",
            f"-d{seconds:g}s",
            "--timeout",
            "300s",
            "-s",
            f.name,
            url + "/v1/chat/completions",
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    m = re.search(r"BYTES (\d+) ERRORS (\d+)", out)
    if m is None or int(m.group(2)):
        raise RuntimeError(f"wrk saw failures:\n{out}")
    return int(m.group(1))


def measure_server(
    kind: str, engine: str, requests: int, concurrency: int, tokens: int, client: str = "httpx", seconds: float = 8.0
) -> dict[str, float]:
    with start(kind, engine) as (proc, url):
        p = psutil.Process(proc.pid)
        asyncio.run(load(url, 4, 4, 200))  # warm-up
        if client == "wrk":
            per_response = response_size(url, tokens)
            wrk_load(url, 1.0, concurrency, tokens)  # warm-up at full concurrency
        c0 = p.cpu_times()
        t0 = time.perf_counter()
        if client == "wrk":
            n = round(wrk_load(url, seconds, concurrency, tokens) / per_response * tokens)
        else:
            n = asyncio.run(load(url, requests, concurrency, tokens))
        wall = time.perf_counter() - t0
        c1 = p.cpu_times()
        cpu = (c1.user - c0.user) + (c1.system - c0.system)
        if client == "httpx" and n != requests * tokens:
            raise RuntimeError(f"{kind}: received {n} tokens, expected {requests * tokens}")
        return {"cpu_us_per_token": cpu / n * 1e6, "tokens_per_s": n / wall, "tokens": n}


def measure_engine(kind: str, requests: int, concurrency: int, tokens: int) -> float:
    engine = make_engine(kind, tokens)

    class Obj:
        sampling_params: dict[str, Any] = {}

    async def drain() -> int:
        sem = asyncio.Semaphore(concurrency)

        async def one() -> int:
            async with sem:
                n = 0
                async for _ in engine.generate_request(Obj()):
                    n += 1
                return n

        return sum(await asyncio.gather(*(one() for _ in range(requests))))

    t0 = time.process_time()
    n = asyncio.run(drain())
    return (time.process_time() - t0) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=2500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--engine",
        choices=sorted(ENGINES),
        default="fast",
        help="fast: yields as fast as it can; stepped: a token per stream every 2 ms from a thread",
    )
    ap.add_argument("--client", choices=("httpx", "wrk"), default="httpx", help="see the module doc")
    ap.add_argument("--seconds", type=float, default=8.0, help="length of a wrk run")
    args = ap.parse_args()
    rows: dict[str, list[dict[str, float]]] = {"smgpy": [], "python": []}
    engine_us = []
    for _ in range(args.rounds):  # interleaved, so both see the same machine noise
        engine_us.append(measure_engine(args.engine, args.requests, args.concurrency, args.tokens))
        for kind in rows:
            for attempt in range(3):
                try:
                    rows[kind].append(
                        measure_server(
                            kind, args.engine, args.requests, args.concurrency, args.tokens, args.client, args.seconds
                        )
                    )
                    break
                except (httpx.HTTPError, RuntimeError, OSError, subprocess.CalledProcessError) as e:
                    print(f"{kind}: attempt {attempt + 1} failed: {e!r}", file=sys.stderr)
    eng = min(engine_us)
    result: dict[str, Any] = {"engine_cpu_us_per_token": eng}
    for kind, rs in rows.items():
        cpu = min(r["cpu_us_per_token"] for r in rs)
        tps = max(r["tokens_per_s"] for r in rs)
        result[kind] = {"cpu_us_per_token": cpu, "overhead_us_per_token": cpu - eng, "tokens_per_s": tps}
    result["overhead_ratio_smgpy_vs_python"] = result["smgpy"]["overhead_us_per_token"] / max(
        result["python"]["overhead_us_per_token"], 1e-9
    )
    result["throughput_ratio_smgpy_vs_python"] = result["smgpy"]["tokens_per_s"] / result["python"]["tokens_per_s"]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
