"""smgpy workers behind the SMG router (`pip install smg`): one endpoint, many workers, and no
request that hangs when a worker dies or drains.

Two scripted workers (tests/smg_worker.py, separate processes so they can be killed) and a real
`smg launch` on loopback, driven with the `openai` and `anthropic` SDKs through the router. The
real-model case (two `smgpy serve` workers) is in tests/test_mlx_smg.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

if shutil.which("smg") is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI=true but the SMG router is not installed (pip install smg)")
    pytest.skip("the SMG router is not installed (pip install smg)", allow_module_level=True)

import anthropic  # noqa: E402
import openai  # noqa: E402
from conftest import free_port  # noqa: E402

HERE = Path(__file__).parent
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
MSG = [{"role": "user", "content": "hi"}]


def wait_until(check: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


class Worker:
    def __init__(self, name: str, delay: float = 0.005) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.delay = delay
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        cmd = [sys.executable, str(HERE / "smg_worker.py"), "--port", str(self.port), "--name", self.name]
        self.proc = subprocess.Popen([*cmd, "--delay", str(self.delay)])
        wait_until(lambda: httpx.get(self.url + "/health").status_code == 200, 30, f"worker {self.name}")
        return self

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Router:
    def __init__(self, workers: list[Any], policy: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = ["smg", "launch", "--host", "127.0.0.1", "--port", str(self.port), "--policy", policy]
        cmd += ["--worker-urls", *(w.url for w in workers)]
        cmd += ["--health-check-interval-secs", "1", "--worker-startup-check-interval", "1"]
        cmd += ["--load-monitor-interval", "1", "--log-level", "warn"]
        cmd += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port())]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: len(self.ready_workers()) == len(workers), 60, "the router to register the workers")

    def workers(self) -> list[dict[str, Any]]:
        return list(httpx.get(self.url + "/workers", timeout=5).json()["workers"])

    def ready_workers(self) -> set[str]:
        return {w["url"] for w in self.workers() if w.get("status") == "ready" and w.get("is_healthy")}

    def stop(self) -> None:
        stop_process(self.proc, 10)


def stop_process(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Terminate ``proc``, and kill it if it has not exited ``grace`` seconds later."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def workers() -> Iterator[list[Worker]]:
    ws = [Worker("A").start(), Worker("B").start()]
    try:
        yield ws
    finally:
        for w in ws:
            w.stop()


@pytest.fixture(scope="module", params=["cache_aware", "round_robin", "power_of_two"])
def router(request: pytest.FixtureRequest, workers: list[Worker]) -> Iterator[Router]:
    r = Router(workers, request.param)
    try:
        yield r
    finally:
        r.stop()


def test_the_router_reads_the_workers_metadata_and_loads(router: Router) -> None:
    wait_until(lambda: all("engine_load" in w for w in router.workers()), 30, "the first load poll")
    for w in router.workers():
        assert w["runtime_type"] == "sglang" and w["labels"]["is_generation"] == "true"
        assert w["models"][0]["context_length"] == 4096
        assert w["engine_load"]["loads"][0]["max_running_requests"] == 64  # /v1/loads parsed


def test_openai_sdk_through_the_router(router: Router) -> None:
    client = openai.OpenAI(base_url=router.url + "/v1", api_key="x", max_retries=0, timeout=60)
    # streamed tool call with reasoning
    chunks = list(client.chat.completions.create(model="scripted", messages=MSG, tools=TOOLS, stream=True))
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or []) if c.choices]
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices)
    assert calls[0].function.name == "get_weather" and "Paris" in "".join(c.function.arguments or "" for c in calls)
    assert "weather" in reasoning and chunks[-1].choices[0].finish_reason == "tool_calls"
    # n, stop strings and usage
    r = client.chat.completions.create(model="scripted", messages=MSG, n=2, stop=[" w3"], max_tokens=10)
    assert len(r.choices) == 2 and all(c.message.content.endswith(" w2") for c in r.choices)
    assert all(c.finish_reason == "stop" for c in r.choices) and r.usage and r.usage.completion_tokens > 0
    with client.chat.completions.stream(model="scripted", messages=MSG) as s:
        final = s.get_final_completion()
    assert final.choices[0].message.content.startswith("Hello from")
    comp = client.completions.create(model="scripted", prompt="x", max_tokens=5)
    assert comp.choices[0].finish_reason == "length"
    resp = client.responses.create(model="scripted", input="hi", max_output_tokens=20)
    assert "Hello from" in resp.output_text


def test_anthropic_sdk_through_the_router(router: Router) -> None:
    client = anthropic.Anthropic(base_url=router.url, api_key="x", max_retries=0, timeout=60)
    msg = client.messages.create(model="scripted", max_tokens=20, messages=MSG)
    assert any(b.type == "text" and "Hello from" in b.text for b in msg.content)
    tools = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    with client.messages.stream(model="scripted", max_tokens=20, messages=MSG, tools=tools) as s:  # type: ignore[arg-type]
        final = s.get_final_message()
    assert any(b.type == "tool_use" and b.name == "get_weather" for b in final.content)


def test_routing_follows_the_policy(router: Router, request: pytest.FixtureRequest) -> None:
    def ask(content: str) -> str:
        body = {"model": "scripted", "messages": [{"role": "user", "content": content}], "max_tokens": 2}
        r = httpx.post(router.url + "/v1/chat/completions", json=body, timeout=30)
        assert r.status_code == 200
        return str(r.headers.get("x-smg-routed-worker-id"))

    if request.node.callspec.params["router"] == "cache_aware":
        # one conversation keeps its worker, where its prefix is cached
        history = "We talked about the weather in Paris for a long while. " * 8
        assert len({ask(history + f"turn {i}") for i in range(8)}) == 1
    else:
        assert len({ask(f"q{i}") for i in range(12)}) == 2


def _stream(url: str, results: list[str], i: int) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=60)
    try:
        text = ""
        finish = None
        msgs = [{"role": "user", "content": f"stream {i}"}]
        for c in client.chat.completions.create(model="scripted", messages=msgs, max_tokens=60, stream=True):
            if c.choices:
                text += c.choices[0].delta.content or ""
                finish = c.choices[0].finish_reason or finish
        # 60 tokens: three of reasoning, "Hello from X", then w0 ... w53
        results.append("completed" if finish == "length" and text.endswith(" w53") else f"short: {finish}")
    except (openai.APIError, httpx.HTTPError) as e:  # a clean error the client sees
        results.append(f"error: {type(e).__name__}")


@contextmanager
def slow_pair(prefix: str) -> Iterator[tuple[Worker, Worker, Router]]:
    """Two slow scripted workers (``prefix`` A and B) behind a round-robin router, stopped afterwards."""
    a, b = Worker(prefix + "A", delay=0.03).start(), Worker(prefix + "B", delay=0.03).start()
    router = Router([a, b], "round_robin")
    try:
        yield a, b, router
    finally:
        router.stop()
        a.stop()
        b.stop()


def start_streams(url: str, n: int) -> tuple[list[str], list[threading.Thread]]:
    """``n`` streamed requests to ``url``, each on a thread of its own (started), and the list where
    each appends its outcome."""
    results: list[str] = []
    threads = [threading.Thread(target=_stream, args=(url, results, i)) for i in range(n)]
    for t in threads:
        t.start()
    return results, threads


def test_killing_a_worker_mid_stream_ends_every_request_and_the_router_recovers() -> None:
    with slow_pair("K") as (a, b, router):
        results, threads = start_streams(router.url, 50)
        time.sleep(1.0)
        a.signal(signal.SIGKILL)
        for t in threads:
            t.join(90)
        assert not any(t.is_alive() for t in threads), "a request hung"
        assert len(results) == 50
        assert all(r == "completed" or r.startswith("error") for r in results), sorted(set(results))
        assert results.count("completed") >= 20  # B's streams, at least
        print(f"killed mid-stream: {results.count('completed')} of 50 completed, the rest ended with an error")
        # the router stops sending to the dead worker...
        wait_until(lambda: a.url not in router.ready_workers(), 30, "the router to mark the dead worker")
        with ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda _: _one(router.url), range(12)))
        assert all(o == b.url for o in outs), outs
        # ...and takes it back once it is up again
        a.start()
        wait_until(lambda: a.url in router.ready_workers(), 60, "the restarted worker to rejoin")
        wait_until(lambda: a.url in {_one(router.url) for _ in range(6)}, 30, "requests to reach it again")


def _one(url: str) -> str:
    body = {"model": "scripted", "messages": MSG, "max_tokens": 2}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    return str(r.headers.get("x-smg-routed-worker-id"))


def test_sigterm_drains_a_worker_while_the_router_routes_around_it() -> None:
    with slow_pair("D") as (a, b, router):
        results, threads = start_streams(router.url, 10)
        time.sleep(0.8)
        a.signal(signal.SIGTERM)  # streams on A get 20 s to finish; they need about 2 s
        time.sleep(0.3)
        # new requests while A drains: A answers 503 and the router retries them on B
        outs = [_one(router.url) for _ in range(8)]
        assert all(o == b.url for o in outs), outs
        for t in threads:
            t.join(60)
        assert results.count("completed") == 10, results
        assert a.proc is not None and a.proc.wait(30) == 0  # A exits once its streams are done
