"""Soak: 10,000 mixed requests against `serve_oai` with a scripted engine, in one run.

The mix: OpenAI chat (streamed and not), completions, Responses and Anthropic messages; clients
that disconnect in the middle of a stream; malformed bodies (bad JSON, wrong types, token ids
outside the vocabulary, unknown routes); slow clients that trickle their body; and the shapes of
issue 38: a client reusing a running stream's id as its /generate rid (the stream must finish),
3 MB bodies of many messages, unique 256 KB JSON schemas, and half-sent request heads. The server runs
in its own process; this process drives it with 64 concurrent clients and reads the server's RSS
from /proc.

A sentinel client in a process of its own streams one long chat completion through each fifth of the
run and records when each of its reads arrives: its longest gaps are reported overall, and apart for
the gaps that overlapped a 3 MB request in flight (goal: those no longer than the others, i.e. no
stream gap from another client's request). ``benches/heavy_bodies.py`` measures the same with 33 MB
bodies on an otherwise idle server.

Reported: RSS growth (goal < 5 %), read in quiet pauses after each fifth of the run: from the second
pause, once the bounded caches have filled (the structured-output check cache reaches its 16 MiB bound
within the first two fifths; its size at each pause is reported), to the end; the growth from the first
pause and the peak under load beside it, requests lost (a request that hung or ended
without a complete answer or a clean error; goal 0), 5xx answers (goal 0), and whether every
disconnected stream was aborted in the engine (no engine request left running that nobody reads;
a stream dropped before the engine started it never reaches the engine at all).

Run: ``python benches/soak.py [--requests 10000] [--concurrency 64]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
from asyncio.subprocess import PIPE
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx

MSG = [{"role": "user", "content": "hi"}]


# ----- the server process -----


class SoakEngine:
    """Short answers, a token every millisecond; counts aborts for the report."""

    model_name = "soak"
    context_length = 4096
    vocab_size = 1000
    max_running_requests = 64
    chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )

    def __init__(self) -> None:
        self.aborted = 0
        self.started = 0
        self.finished = 0

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        self.started += 1
        async for out in self._tokens(obj):
            yield out
        self.finished += 1

    async def _tokens(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        # 20 tokens and a stop, or `max_tokens` if that is smaller (a length finish) or at least
        # 1,000 (the long streams that clients disconnect from).
        limit = obj.sampling_params.get("max_new_tokens")
        n = 20 if limit is None else (limit if limit >= 1000 else min(int(limit), 20))
        for i in range(n):
            await asyncio.sleep(0.001)
            last = i == n - 1
            finish = ({"type": "length"} if limit is not None and n == limit else {"type": "stop"}) if last else None
            yield {
                "delta": f"w{i} ",
                "output_ids": [i],
                "meta_info": {"prompt_tokens": 5, "completion_tokens": i + 1, "finish_reason": finish},
            }

    def abort_request(self, rid: str) -> None:
        self.aborted += 1

    def get_load(self) -> dict[str, Any]:
        return {"aborted": self.aborted, "started": self.started, "finished": self.finished}


def serve(port: int) -> None:
    import smgpy

    # A small Responses store budget, so that the run reaches its steady state (the default is 256 MB).
    smgpy.serve_oai(
        SoakEngine(),
        port=port,
        log_level="error",
        header_read_timeout=5.0,
        body_read_timeout=5.0,
        response_store_bytes=256 << 10,
    )


# ----- the load -----


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Tally:
    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()
        self.status: Counter[int] = Counter()
        self.lost: list[str] = []
        self.disconnects = 0
        # (start, end) monotonic times of the 3 MB requests, for the sentinel's gaps.
        self.huge_windows: list[tuple[float, float]] = []


def sentinel(port: int) -> None:
    """Stream one long chat completion until a line arrives on stdin; print the monotonic time of
    every read (JSON). A process of its own, so that the load's client does not delay its reads."""
    from _servers import stream_read_times

    print(json.dumps(stream_read_times(port, {"messages": MSG, "stream": True, "max_tokens": 10_000_000})))


def stream_gaps(runs: list[list[float]], huge: list[tuple[float, float]]) -> dict[str, float]:
    """The sentinel's longest gaps in ms (``runs``: its read times in each fifth): overall, p99, and
    split by whether a 3 MB request was in flight during the gap."""
    gaps = sorted((b - a, a, b) for reads in runs for a, b in zip(reads, reads[1:], strict=False))
    if not gaps:
        return {}
    during = [g for g, a, b in gaps if any(s < b and a < e for s, e in huge)]
    other = [g for g, a, b in gaps if not any(s < b and a < e for s, e in huge)]
    return {
        "gaps": len(gaps),
        "max_ms": round(gaps[-1][0] * 1e3, 1),
        "p99_ms": round(gaps[int(0.99 * (len(gaps) - 1))][0] * 1e3, 1),
        "max_while_huge_ms": round(max(during, default=0.0) * 1e3, 1),
        "max_otherwise_ms": round(max(other, default=0.0) * 1e3, 1),
    }


async def complete_stream(client: httpx.AsyncClient, url: str, body: dict[str, Any], t: Tally) -> None:
    async with client.stream("POST", url, json=body) as r:
        t.status[r.status_code] += 1
        text = (await r.aread()).decode()
    if r.status_code != 200:
        t.lost.append(f"stream {url} {r.status_code}")
        return
    if "/v1/messages" in url:
        ok = "event: message_stop" in text
    elif "/v1/responses" in url:
        ok = "response.completed" in text
    else:
        ok = text.rstrip().endswith("data: [DONE]") and '"finish_reason":"' in text
    if not ok:
        t.lost.append(f"stream {url} incomplete: {text[-200:]!r}")


# Seconds without load before RSS is read (half-open connections time out, pools settle).
QUIET_S = 3.0
# The run is cut in this many equal parts, each followed by a quiet pause where RSS is read.
FIFTHS = 5
KINDS = ["chat", "chat_stream", "completions", "responses", "messages", "disconnect", "malformed", "slow"]
KINDS += ["rid_reuse", "huge", "schema", "half_open"]
WEIGHTS = [25, 20, 10, 8, 7, 15, 13, 2, 3, 1, 2, 2]
# A body of many empty messages (about 3 MB): handled off the HTTP worker.
HUGE = json.dumps({"messages": [{"role": "user", "content": ""}] * 100_000, "max_tokens": 1}).encode()


async def rid_reuse(client: httpx.AsyncClient, base: str, t: Tally) -> None:
    """Another client names a running stream's id as its /generate rid and hangs up: the first
    stream must still finish (a client's rid is a label, never a key into another request)."""
    body = {"messages": MSG, "stream": True, "max_tokens": 20}
    async with client.stream("POST", base + "/v1/chat/completions", json=body) as r:
        t.status[r.status_code] += 1
        lines = r.aiter_lines()
        first = ""
        async for line in lines:
            if line.startswith("data: {"):
                first = line
                break
        victim = json.loads(first[6:])["id"] if first else "none"
        gen = {"text": "hi", "rid": victim, "stream": True}
        async with client.stream("POST", base + "/generate", json=gen) as other:
            t.status[other.status_code] += 1
            async for _ in other.aiter_raw():
                break
        rest = [line async for line in lines if line]
    if not rest or rest[-1] != "data: [DONE]" or any('"error"' in line for line in rest):
        t.lost.append(f"rid_reuse: the first stream was cut: {rest[-3:]!r}")


async def half_open(base: str) -> None:
    """Half a request head, held a moment, then dropped."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
    await writer.drain()
    await asyncio.sleep(0.2)
    writer.close()
    del reader


async def one(client: httpx.AsyncClient, base: str, rng: random.Random, t: Tally, only: str | None) -> None:
    kind = only or rng.choices(KINDS, weights=WEIGHTS)[0]
    t.outcomes[kind] += 1
    if kind == "chat":
        r = await client.post(base + "/v1/chat/completions", json={"messages": MSG, "max_tokens": rng.randint(1, 30)})
        t.status[r.status_code] += 1
        if r.status_code != 200 or not r.json()["choices"][0]["finish_reason"]:
            t.lost.append(f"chat {r.status_code}")
    elif kind == "chat_stream":
        await complete_stream(client, base + "/v1/chat/completions", {"messages": MSG, "stream": True}, t)
    elif kind == "completions":
        r = await client.post(base + "/v1/completions", json={"prompt": [1, 2, 3], "max_tokens": 8, "n": 2})
        t.status[r.status_code] += 1
        if r.status_code != 200 or len(r.json()["choices"]) != 2:
            t.lost.append(f"completions {r.status_code}")
    elif kind == "responses":
        await complete_stream(client, base + "/v1/responses", {"input": "hi", "stream": True}, t)
    elif kind == "messages":
        body = {"model": "soak", "max_tokens": 10, "messages": MSG, "stream": True}
        await complete_stream(client, base + "/v1/messages", body, t)
    elif kind == "disconnect":
        body = {"messages": MSG, "stream": True, "max_tokens": 1000}
        async with client.stream("POST", base + "/v1/chat/completions", json=body) as r:
            t.status[r.status_code] += 1
            got = 0
            async for _ in r.aiter_raw():
                got += 1
                if got >= rng.randint(1, 3):
                    break
        t.disconnects += 1
    elif kind == "malformed":
        path, content = rng.choice(
            [
                ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": '),
                ("/v1/chat/completions", json.dumps({"messages": "nope"}).encode()),
                ("/v1/chat/completions", json.dumps({"messages": MSG, "temperature": "hot"}).encode()),
                ("/v1/completions", json.dumps({"prompt": [60000]}).encode()),
                ("/generate", json.dumps({"input_ids": [10**12]}).encode()),
                ("/v1/chat/completions", json.dumps({"messages": MSG, "logit_bias": {"x": 1}}).encode()),
                ("/v1/messages", json.dumps({"model": "m", "messages": MSG}).encode()),
                ("/v1/no/such/route", b"{}"),
                ("/v1/responses", json.dumps({"input": [{"role": "user", "content": [{"type": "x"}]}]}).encode()),
            ]
        )
        r = await client.post(base + path, content=content, headers={"content-type": "application/json"})
        t.status[r.status_code] += 1
        if not 400 <= r.status_code < 500:
            t.lost.append(f"malformed {path} got {r.status_code}")
    elif kind == "rid_reuse":
        await rid_reuse(client, base, t)
    elif kind == "huge":
        start = time.monotonic()
        r = await client.post(base + "/v1/chat/completions", content=HUGE, headers={"content-type": "application/json"})
        t.huge_windows.append((start, time.monotonic()))
        t.status[r.status_code] += 1
        if r.status_code != 200:
            t.lost.append(f"huge {r.status_code}")
    elif kind == "schema":  # a unique 256 KB schema: the check cache stays within its byte budget
        schema = {"type": "object", "description": f"{rng.random()}" + "x" * (256 << 10)}
        fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema}}
        r = await client.post(base + "/v1/chat/completions", json={"messages": MSG, "response_format": fmt})
        t.status[r.status_code] += 1
        if r.status_code != 200:
            t.lost.append(f"schema {r.status_code}")
    elif kind == "half_open":
        await half_open(base)
    else:  # slow: the body trickles in over ~0.3 s
        payload = json.dumps({"messages": MSG, "max_tokens": 3}).encode()

        async def trickle() -> AsyncIterator[bytes]:
            for i in range(0, len(payload), 8):
                await asyncio.sleep(0.02)
                yield payload[i : i + 8]

        r = await client.post(
            base + "/v1/chat/completions",
            content=trickle(),
            headers={"content-type": "application/json", "content-length": str(len(payload))},
        )
        t.status[r.status_code] += 1
        if r.status_code != 200:
            t.lost.append(f"slow {r.status_code}")


async def drive(base: str, pid: int, total: int, concurrency: int, only: str | None) -> dict[str, Any]:
    """Warm-up (a fifth of the requests), a quiet pause, the rest, a quiet pause. RSS is compared
    at the two pauses: mid-load it holds the requests in flight (64 clients with 3 MB bodies are
    hundreds of MB), which says nothing about growth; the peak is reported beside it."""
    rng = random.Random(1)
    t = Tally()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    rss: dict[str, int] = {"start": rss_kib(pid), "peak": 0}
    sampling = True

    async def sample() -> None:
        while sampling:
            rss["peak"] = max(rss["peak"], rss_kib(pid))
            await asyncio.sleep(0.1)

    async with httpx.AsyncClient(timeout=30.0, limits=limits) as client:

        async def phase(n: int) -> None:
            queue: asyncio.Queue[int] = asyncio.Queue()
            for i in range(n):
                queue.put_nowait(i)

            async def worker() -> None:
                while True:
                    try:
                        queue.get_nowait()
                    except asyncio.QueueEmpty:
                        return
                    try:
                        await one(client, base, rng, t, only)
                    except Exception as e:  # a hang (timeout) or a broken answer: lost
                        t.lost.append(f"{type(e).__name__}: {e}")

            await asyncio.gather(*(worker() for _ in range(concurrency)))

        sampler = asyncio.create_task(sample())
        elapsed = 0.0
        quiet: list[int] = []
        checks: list[int] = []
        port = base.rsplit(":", 1)[1]
        reads: list[list[float]] = []
        for k in range(FIFTHS):
            n = total * (k + 1) // FIFTHS - total * k // FIFTHS
            watcher = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "--sentinel", port, stdin=PIPE, stdout=PIPE
            )
            await asyncio.sleep(0.5)  # its stream is running
            t0 = time.monotonic()
            await phase(n)
            elapsed += time.monotonic() - t0
            out, _ = await watcher.communicate(b"stop\n")
            reads.append([x for x in json.loads(out) if x >= t0])
            await asyncio.sleep(QUIET_S)
            quiet.append(rss_kib(pid))
            checks.append(await check_cache_bytes(client, base))
        rss["after_warmup"], rss["end"] = quiet[0], quiet[-1]
        sampling = False
        await sampler
        load = (await client.get(base + "/v1/loads")).json()["loads"][0]
    five = sum(v for k, v in t.status.items() if k >= 500)
    return {
        "requests": total,
        "seconds": round(elapsed, 1),
        "outcomes": dict(t.outcomes),
        "status": {str(k): v for k, v in sorted(t.status.items())},
        "lost": len(t.lost),
        "lost_examples": t.lost[:5],
        "5xx": five,
        "rss_kib": rss,
        "rss_growth_after_warmup_pct": round(100 * (rss["end"] - rss["after_warmup"]) / rss["after_warmup"], 2),
        # RSS at each quiet pause: a leak climbs to the end; bounded caches filling level off.
        "rss_quiet_kib": quiet,
        "rss_growth_last_three_fifths_pct": round(100 * (quiet[-1] - quiet[1]) / quiet[1], 2),
        # The structured-output check cache at each pause: it fills to its bound (16 MiB) early on.
        "structured_check_cache_bytes": checks,
        # Gaps between the sentinel's reads during the load (a 3 MB request in flight or not).
        "stream_gaps": stream_gaps(reads, t.huge_windows),
        "disconnects": t.disconnects,
        "engine_aborts": load.get("aborted"),
        # Engine requests neither finished nor aborted when the load ended: generation nobody reads.
        "engine_orphans": load.get("started", 0) - load.get("finished", 0) - load.get("aborted", 0),
    }


async def check_cache_bytes(client: httpx.AsyncClient, base: str) -> int:
    """The server's structured-output check cache size, from /metrics."""
    text = (await client.get(base + "/metrics")).text
    for line in text.splitlines():
        if line.startswith("smgpy_structured_check_cache_bytes"):
            return int(float(line.split()[-1]))
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=10_000)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--only", choices=KINDS, help="send only this kind of request (to find what grows)")
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    p.add_argument("--sentinel", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.sentinel:
        sentinel(args.sentinel)
        return
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], env=os.environ.copy())
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the server did not start")
            time.sleep(0.2)
        report = asyncio.run(drive(base, proc.pid, args.requests, args.concurrency, args.only))
    finally:
        proc.terminate()
        proc.wait(30)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
