"""Cache-aware routing with the SMG router: prefix-cache hits and time to first token, against
round-robin, on two real-model `smgpy serve` workers, in one run.

Eight conversations grow turn by turn (each turn resends the whole history, as chat clients
do). With `cache_aware`, SMG sends a conversation back to the worker that holds its prefix, so
that worker's prefix cache serves most of the prompt; with `round_robin`, turns alternate between
workers and a turn finds its prefix only when it happens to land where the previous one ran.
Policies alternate round by round, with both workers' caches flushed before every round.

Reported per policy: the share of prompt tokens served from the prefix cache
(`usage.prompt_tokens_details.cached_tokens`) and the median time to first token of turns 2+.

``--cpu-blas auto`` (or a library) runs both workers on OpenBLAS (or BLIS, MKL) instead of the
reference BLAS the Linux ``mlx[cpu]`` wheel links, through ``LD_PRELOAD`` (``benches/_blas.py``).

Run: ``python benches/smg_cache.py [--rounds 2] [--turns 4] [--cpu-blas auto]`` (needs `pip install smg`).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from _blas import add_cpu_blas_argument, child_env, find_blas
from _servers import sse_chunk, streamed_chat

TOPICS = ["Paris", "the sea", "volcanoes", "bread", "trains", "owls", "glaciers", "chess"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ok(url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} did not come up")


def start_worker(name: str, blas: str | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "smgpy", "serve", "--port", str(port), "--worker-id", name]
    cmd += ["--max-running", "4", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=child_env(blas))
    url = f"http://127.0.0.1:{port}"
    wait_ok(url + "/health", 300)
    return proc, url


def start_router(workers: list[str], policy: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = ["smg", "launch", "--host", "127.0.0.1", "--port", str(port), "--policy", policy]
    cmd += ["--worker-urls", *workers, "--worker-startup-check-interval", "1", "--log-level", "warn"]
    cmd += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            ws = httpx.get(url + "/workers", timeout=5).json()["workers"]
            if sum(w.get("status") == "ready" for w in ws) == len(workers):
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("the router did not register the workers")


def turn(router: str, messages: list[dict[str, str]]) -> dict[str, Any]:
    body = streamed_chat("SmolLM2-135M-Instruct", messages, 16)
    t0 = time.monotonic()
    ttft = None
    text = ""
    usage: dict[str, Any] = {}
    with httpx.stream("POST", router + "/v1/chat/completions", json=body, timeout=600) as r:
        worker = r.headers.get("x-smg-routed-worker-id")
        for line in r.iter_lines():
            chunk = sse_chunk(line)
            if chunk is None:
                continue
            for c in chunk.get("choices") or []:
                piece = c["delta"].get("content") or ""
                if piece and ttft is None:
                    ttft = time.monotonic() - t0
                text += piece
            usage = chunk.get("usage") or usage
    return {
        "ttft": ttft if ttft is not None else time.monotonic() - t0,
        "text": text,
        "prompt": usage.get("prompt_tokens", 0),
        "cached": (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0),
        "worker": worker,
    }


def conversation(router: str, topic: str, turns: int) -> list[dict[str, Any]]:
    system = f"You are a guide who knows everything about {topic}. " * 12
    messages = [{"role": "system", "content": system}]
    out = []
    for i in range(turns):
        messages.append({"role": "user", "content": f"Tell me fact number {i + 1} about {topic}."})
        r = turn(router, messages)
        out.append(r)
        messages.append({"role": "assistant", "content": r["text"]})
    return out


def run_round(router: str, turns: int) -> dict[str, float]:
    with ThreadPoolExecutor(len(TOPICS)) as pool:
        convs = list(pool.map(lambda t: conversation(router, t, turns), TOPICS))
    later = [r for c in convs for r in c[1:]]
    prompt = sum(r["prompt"] for r in later)
    cached = sum(r["cached"] for r in later)
    sticky = sum(len({r["worker"] for r in c}) == 1 for c in convs)
    return {
        "hit_rate": cached / prompt if prompt else 0.0,
        "ttft_median_s": statistics.median(r["ttft"] for r in later),
        "conversations_on_one_worker": sticky,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--turns", type=int, default=4)
    add_cpu_blas_argument(p, default="off", used_by="both workers (LD_PRELOAD)")
    args = p.parse_args()
    blas = find_blas(args.cpu_blas)
    workers = [start_worker(f"w{i}", blas) for i in (1, 2)]
    urls = [u for _, u in workers]
    results: dict[str, list[dict[str, float]]] = {"cache_aware": [], "round_robin": []}
    try:
        for rnd in range(args.rounds):
            for policy in ("cache_aware", "round_robin") if rnd % 2 == 0 else ("round_robin", "cache_aware"):
                for u in urls:
                    httpx.post(u + "/flush_cache", timeout=30)
                proc, router = start_router(urls, policy)
                try:
                    r = run_round(router, args.turns)
                finally:
                    proc.terminate()
                    proc.wait(30)
                print(f"round {rnd + 1} {policy}: {r}", flush=True)
                results[policy].append(r)
    finally:
        for proc, _ in workers:
            proc.terminate()
            proc.wait(30)
    summary = {
        policy: {
            "hit_rate": round(statistics.median(r["hit_rate"] for r in rs), 3),
            "ttft_median_s": round(statistics.median(r["ttft_median_s"] for r in rs), 3),
            "conversations_on_one_worker": statistics.median(r["conversations_on_one_worker"] for r in rs),
        }
        for policy, rs in results.items()
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
