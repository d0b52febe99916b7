"""`serve_oai` end to end: the official `openai` SDK and raw HTTP against a running server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import httpx
import openai
import pytest
from conftest import REPO, assert_openai_error, free_port, serve_in_thread, wait_for_health
from engines import ScriptedEngine

MSG = [{"role": "user", "content": "Say hello"}]


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def sse_events(body: str) -> list[str]:
    return [line[len("data: ") :] for line in body.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("mode", ["delta", "cumulative"])
def test_chat_non_streaming(mode: str) -> None:
    engine = ScriptedEngine(mode=mode)
    with serve_in_thread(engine) as url:
        r = client(url).chat.completions.create(model="scripted", messages=MSG)
    assert r.choices[0].message.content == "Hello, world!"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].finish_reason == "stop"
    assert r.object == "chat.completion"
    assert r.id.startswith("chatcmpl-")
    assert r.usage is not None and r.usage.prompt_tokens == 7 and r.usage.completion_tokens == 4
    assert r.usage.total_tokens == 11
    assert r.system_fingerprint
    # the prompt was rendered with the whole conversation by the engine's chat template
    assert engine.requests[0].text == "<|im_start|>user\nSay hello<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize("mode", ["delta", "cumulative"])
def test_chat_streaming_sdk(mode: str) -> None:
    with serve_in_thread(ScriptedEngine(mode=mode)) as url:
        chunks = list(
            client(url).chat.completions.create(
                model="scripted", messages=MSG, stream=True, stream_options={"include_usage": True}
            )
        )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello, world!"
    assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 4
    assert chunks[-2].choices[0].finish_reason == "stop"


def test_chat_stream_helper() -> None:
    """The SDK's strict `.stream()` accumulator gets the same message as non-streaming."""
    with serve_in_thread(ScriptedEngine()) as url:
        with client(url).chat.completions.stream(model="scripted", messages=MSG) as stream:
            for _ in stream:
                pass
            final = stream.get_final_completion()
    assert final.choices[0].message.content == "Hello, world!"
    assert final.choices[0].message.role == "assistant"
    assert final.choices[0].finish_reason == "stop"


def test_raw_sse_sequence() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(
            url + "/v1/chat/completions",
            json={"messages": MSG, "stream": True, "stream_options": {"include_usage": True}},
        )
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    first = chunks[0]["choices"][0]
    assert first["delta"] == {"role": "assistant", "content": ""}
    for c in chunks[1:-2]:
        delta = c["choices"][0]["delta"]
        assert set(delta) == {"content"} and delta["content"]
        assert c["choices"][0]["finish_reason"] is None
    final = chunks[-2]["choices"][0]
    assert final["delta"] == {} and final["finish_reason"] == "stop"
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["total_tokens"] == 11
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({(c["id"], c["created"], c["model"], c["system_fingerprint"]) for c in chunks}) == 1


def test_no_usage_chunk_without_include_usage() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "stream": True})
    chunks = [json.loads(e) for e in sse_events(r.text)[:-1]]
    assert all(c["choices"] for c in chunks) and all("usage" not in c for c in chunks)


def test_disconnect_aborts_engine_request() -> None:
    engine = ScriptedEngine(["tok"] * 10_000, delay=0.005)
    with serve_in_thread(engine) as url:
        with httpx.stream("POST", url + "/v1/chat/completions", json={"messages": MSG, "stream": True}) as r:
            for i, _ in enumerate(r.iter_lines()):
                if i > 5:
                    break
        closed_at = time.monotonic()
        deadline = closed_at + 5
        while not engine.aborted and time.monotonic() < deadline:
            time.sleep(0.01)
        assert engine.aborted, "abort_request was not called"
        rid = engine.aborted[0]
        assert engine.abort_times[rid] - closed_at < 0.2
        deadline = time.monotonic() + 2
        while rid not in engine.closed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rid in engine.closed, "the engine's generator was not closed"
        assert engine.produced[rid] < 10_000
        # the server keeps serving
        r2 = client(url).chat.completions.create(model="x", messages=MSG, max_tokens=3)
        assert r2.choices[0].message.content


def test_engine_exception_is_500_and_server_survives() -> None:
    engine = ScriptedEngine(raise_after=2)
    with serve_in_thread(engine) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG})
        assert r.status_code == 500
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        # The client learns that the engine failed and which request it was; the exception's
        # text stays in the server log.
        assert err["type"] == "server_error" and "the engine failed on request chatcmpl-" in err["message"]
        assert "scripted engine failure" not in r.text and "Traceback" not in r.text
        # mid-stream: an error event
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "stream": True})
        events = sse_events(r.text)
        assert any("error" in json.loads(e) for e in events if e != "[DONE]")
        engine.raise_after = None
        assert client(url).chat.completions.create(model="x", messages=MSG).choices[0].message.content


def test_engine_request_error_is_400() -> None:
    from smgpy import EngineOverloaded, EngineRequestError

    for stream in (False, True):  # a refusal is an HTTP status even for a streaming request
        engine = ScriptedEngine(error=EngineRequestError("prompt has 9000 tokens, context is 8192"))
        with serve_in_thread(engine) as url:
            r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "stream": stream})
            assert r.status_code == 400 and "8192" in r.json()["error"]["message"]
        with serve_in_thread(ScriptedEngine(error=EngineOverloaded("queue full"))) as url:
            r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "stream": stream})
            assert r.status_code == 429 and r.headers.get("retry-after")
            assert r.json()["error"]["type"] == "overloaded_error"


BAD_REQUESTS: list[tuple[Any, str | None]] = [
    (b"{not json", None),
    ({}, None),
    ({"messages": "hi"}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": MSG, "temperature": "hot"}, "temperature"),
    ({"messages": MSG, "temperature": -1}, "temperature"),
    ({"messages": MSG, "max_tokens": -3}, "max_tokens"),
    ({"messages": MSG, "max_tokens": 0}, "max_tokens"),
    ({"messages": MSG, "n": 0}, "n"),
    ({"messages": MSG, "stop": ["ok", ""]}, "stop[1]"),
    ({"messages": MSG, "stop": 5}, "stop"),
    ({"messages": MSG, "stream": "yes"}, "stream"),
    ({"messages": MSG, "tool_choice": "sometimes"}, "tool_choice"),
    ({"messages": MSG, "top_logprobs": 5}, "top_logprobs"),
    ({"messages": MSG, "top_k": -2}, "top_k"),
    ({"messages": MSG, "top_p": 1.5}, "top_p"),
]


@pytest.mark.parametrize(("body", "param"), BAD_REQUESTS)
def test_bad_requests_are_400(body: Any, param: str | None) -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        r = httpx.post(url + "/v1/chat/completions", content=content, headers={"content-type": "application/json"})
    err = assert_openai_error(r, 400, param)
    assert set(err) == {"message", "type", "param", "code"}


def test_body_limit_413() -> None:
    with serve_in_thread(ScriptedEngine(), max_body_bytes=1000) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x" * 5000}]})
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "invalid_request_error"


def test_no_chat_template_is_a_clear_error() -> None:
    engine = ScriptedEngine()
    engine.chat_template = None  # type: ignore[assignment]
    with serve_in_thread(engine) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG})
    assert r.status_code == 400 and "chat template" in r.json()["error"]["message"]
    assert not engine.requests


def test_models_and_health() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        assert httpx.get(url + "/health").status_code == 200
        models = client(url).models.list()
    assert [m.id for m in models.data] == ["scripted"]


def test_request_class_and_sampling_params() -> None:
    class MyReq:
        def __init__(self, **kw: Any) -> None:
            assert "rid" not in kw  # tokenspeed style: rid set after construction
            self.__dict__.update(kw)
            self.rid: str | None = None

    engine = ScriptedEngine()
    with serve_in_thread(engine, request_class=MyReq) as url:
        client(url).chat.completions.create(
            model="x",
            messages=MSG,
            max_tokens=5,
            temperature=0.5,
            top_p=0.9,
            seed=3,
            stop=["zz"],
            extra_body={
                "top_k": 4,
                "min_p": 0.1,
                "repetition_penalty": 1.1,
                "stop_token_ids": [9],
                "ignore_eos": True,
                "num_draft_tokens": 0,
            },
        )
    obj = engine.requests[0]
    assert isinstance(obj, MyReq) and obj.rid
    sp = obj.sampling_params
    assert sp["max_new_tokens"] == 5 and sp["temperature"] == 0.5 and sp["top_p"] == 0.9 and sp["seed"] == 3
    assert sp["stop"] == ["zz"] and sp["stop_token_ids"] == [9] and sp["top_k"] == 4 and sp["ignore_eos"] is True
    assert sp["num_draft_tokens"] == 0
    assert obj.stream is False and obj.text.endswith("<|im_start|>assistant\n")


def test_serve_oai_blocking_sigterm() -> None:
    """`serve_oai` in its own process: serves, then SIGTERM shuts it down gracefully."""
    port = free_port()
    code = textwrap.dedent(
        f"""
        import sys; sys.path.insert(0, {str(REPO / "tests")!r})
        import smgpy
        from engines import ScriptedEngine
        smgpy.serve_oai(ScriptedEngine(delay=0.01), port={port})
        print("RETURNED", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(url)
        r = client(url).chat.completions.create(model="x", messages=MSG)
        assert r.choices[0].message.content == "Hello, world!"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "RETURNED" in out
        assert "serving" in err
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_oai_async_in_running_loop() -> None:
    """Embedding: serve inside the caller's loop, cancel to stop."""
    import asyncio

    async def main() -> str:
        ready: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            __import__("smgpy").serve_oai_async(
                ScriptedEngine(), port=0, on_ready=lambda h, p: ready.set_result((h, p)), log_level="warn"
            )
        )
        host, port = await ready
        async with httpx.AsyncClient() as c:
            r = await c.post(f"http://{host}:{port}/v1/chat/completions", json={"messages": MSG})
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return str(r.json()["choices"][0]["message"]["content"])

    assert asyncio.run(main()) == "Hello, world!"
    assert os.environ.get("NONEXISTENT") is None
