"""`n` choices of one request, for an engine that samples them from one prefill (`accepts_n`)."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import openai
from conftest import serve_in_thread
from engines import GroupEngine, ScriptedEngine

ASK = [{"role": "user", "content": "hi"}]


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)


def test_one_engine_request_carries_n_and_each_output_reaches_its_choice() -> None:
    engine = GroupEngine(["a", "b", "c"])
    with serve_in_thread(engine) as url:
        r = client(url).chat.completions.create(model="m", messages=ASK, n=3, seed=5)  # type: ignore[arg-type]
    assert len(engine.requests) == 1
    assert engine.requests[0].sampling_params["n"] == 3
    assert engine.requests[0].sampling_params["seed"] == 5  # the engine derives each choice's stream
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert [c.message.content for c in r.choices] == ["[0]a[0]b[0]c", "[1]a[1]b[1]c", "[2]a[2]b[2]c"]
    assert all(c.finish_reason == "stop" for c in r.choices)
    assert r.usage is not None and r.usage.completion_tokens == 9
    assert engine.aborted == []


def test_streamed_choices_are_demultiplexed() -> None:
    engine = GroupEngine(["a", "b", "c", "d"], lengths=[4, 2, 3])
    with serve_in_thread(engine) as url:
        stream = client(url).chat.completions.create(
            model="m",
            messages=ASK,  # type: ignore[arg-type]
            n=3,
            stream=True,
            stream_options={"include_usage": True},
        )
        text = ["", "", ""]
        finish: dict[int, str | None] = {}
        usage = None
        for chunk in stream:
            usage = chunk.usage or usage
            for c in chunk.choices:
                text[c.index] += c.delta.content or ""
                if c.finish_reason:
                    finish[c.index] = c.finish_reason
    assert text == ["[0]a[0]b[0]c[0]d", "[1]a[1]b", "[2]a[2]b[2]c"]
    assert finish == {0: "stop", 1: "length", 2: "length"}
    assert usage is not None and usage.completion_tokens == 9
    assert len(engine.requests) == 1 and engine.aborted == []


def test_a_stop_string_ends_its_choice_only_and_the_group_is_aborted_once_all_are_done() -> None:
    # Only choice 1's text has "[1]X". Choices 0 and 2 end after 5 tokens; choice 1 would run on.
    engine = GroupEngine(["a", "b", "X", "c", "d"] + ["e"] * 395, lengths=[5, 400, 5], delay=0.005)
    with serve_in_thread(engine) as url:
        r = client(url).chat.completions.create(model="m", messages=ASK, n=3, stop=["[1]X"])  # type: ignore[arg-type]
        deadline = time.monotonic() + 5
        while not engine.closed and time.monotonic() < deadline:
            time.sleep(0.01)
    assert [c.message.content for c in r.choices] == ["[0]a[0]b[0]X[0]c[0]d", "[1]a[1]b", "[2]a[2]b[2]X[2]c[2]d"]
    assert [c.finish_reason for c in r.choices] == ["length", "stop", "length"]
    # The stop did not end the siblings; once they were done, the request was aborted, once.
    rid = engine.requests[0].rid
    assert engine.aborted == [rid]
    assert engine.produced[f"{rid}/1"] < 400


def test_a_group_the_engine_finished_is_not_aborted() -> None:
    engine = GroupEngine(["a", "X", "b"])
    with serve_in_thread(engine) as url:
        r = client(url).chat.completions.create(model="m", messages=ASK, n=2, stop=["[0]X"])  # type: ignore[arg-type]
        time.sleep(0.2)
    assert [c.message.content for c in r.choices] == ["[0]a", "[1]a[1]X[1]b"]
    assert engine.aborted == []


def test_a_disconnect_aborts_the_group_once() -> None:
    engine = GroupEngine(["t"] * 400, delay=0.01)
    with serve_in_thread(engine) as url:
        with httpx.Client(timeout=10) as http:
            body = {"model": "m", "messages": ASK, "n": 2, "stream": True}
            with http.stream("POST", f"{url}/v1/chat/completions", json=body) as resp:
                for _ in zip(range(5), resp.iter_lines(), strict=False):
                    pass
        deadline = time.monotonic() + 5
        while not engine.closed and time.monotonic() < deadline:
            time.sleep(0.01)
    rid = engine.requests[0].rid
    assert engine.aborted == [rid]
    assert engine.closed == [rid]
    assert max(engine.produced.values()) < 400


def test_completions_start_one_group_per_prompt() -> None:
    engine = GroupEngine(["a", "b"])
    with serve_in_thread(engine) as url:
        r = client(url).completions.create(model="m", prompt=["p", "q"], n=2)
    assert len(engine.requests) == 2
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert [c.text for c in r.choices] == ["[0]a[0]b", "[1]a[1]b", "[0]a[0]b", "[1]a[1]b"]


def test_an_engine_without_accepts_n_gets_one_request_per_choice() -> None:
    engine = ScriptedEngine(["a"])
    with serve_in_thread(engine) as url:
        r = client(url).chat.completions.create(model="m", messages=ASK, n=2, seed=3)  # type: ignore[arg-type]
    assert len(r.choices) == 2
    rids = [q.rid for q in engine.requests]
    assert len(rids) == 2 and rids[0].endswith("-0") and rids[1].endswith("-1")
    assert [q.sampling_params["seed"] for q in engine.requests] == [3, 4]
    assert all("n" not in q.sampling_params for q in engine.requests)


class BadIndexEngine(GroupEngine):
    async def generate_request(self, obj):  # type: ignore[no-untyped-def]
        self.requests.append(obj)
        yield {"delta": "x", "output_ids": [1], "index": 7, "meta_info": {"finish_reason": None}}


def test_an_output_for_a_choice_that_does_not_exist_fails_the_request_cleanly() -> None:
    engine = BadIndexEngine()
    with serve_in_thread(engine) as url:
        r = httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": ASK, "n": 2}, timeout=10)
    assert r.status_code == 500
    err = r.json()["error"]
    assert "index" not in err["message"]  # engine-side detail stays in the log


def test_a_slow_reader_holds_the_engine_back_and_loses_nothing() -> None:
    # 3,000 outputs from an engine that never awaits: far more than a request's channel holds
    # (1,024), so the pump must wait for room (woken by the server, not by polling) and resume.
    script = [f"<{i}>" for i in range(3000)]
    engine = GroupEngine(script)
    with serve_in_thread(engine) as url:
        body = {"model": "m", "messages": ASK, "n": 2, "stream": True}
        text = ["", ""]
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=60) as r:
            for i, line in enumerate(r.iter_lines()):
                if i % 500 == 0:
                    time.sleep(0.05)  # a reader that lags behind
                if line.startswith("data: {"):
                    for c in json.loads(line[6:])["choices"]:
                        text[c["index"]] += c["delta"].get("content") or ""
    assert text == ["".join(f"[{i}]{t}" for t in script) for i in range(2)]
    assert engine.aborted == []


def test_many_streams_behind_lagging_readers_all_end_complete() -> None:
    # Outputs are held until the end of the event loop's turn, channels fill behind slow readers,
    # pumps sleep until there is room, and the engine (which never awaits) finishes while outputs
    # are still held: every stream must still get every token, the last ones included.
    script = [f"<{i}>" for i in range(2500)]
    engine = ScriptedEngine(script)
    body = {"model": "m", "messages": ASK, "stream": True}

    async def read(client: httpx.AsyncClient, url: str) -> tuple[str, str | None]:
        text, finish = "", None
        async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
            i = 0
            async for line in r.aiter_lines():
                i += 1
                if i % 400 == 0:
                    await asyncio.sleep(0.02)  # readers that lag behind
                if line.startswith("data: {"):
                    for c in json.loads(line[6:])["choices"]:
                        text += c["delta"].get("content") or ""
                        finish = c["finish_reason"] or finish
        return text, finish

    async def main(url: str) -> list[tuple[str, str | None]]:
        async with httpx.AsyncClient(timeout=60) as client:
            return await asyncio.gather(*(read(client, url) for _ in range(16)))

    with serve_in_thread(engine) as url:
        results = asyncio.run(main(url))
    assert results == [("".join(script), "stop")] * 16
    assert engine.aborted == []


class BlockingEngine(ScriptedEngine):
    """Computes each token without returning to the event loop (a plain loop around a model inside
    its generator), and records when it hands each one over."""

    def __init__(self) -> None:
        super().__init__(["a", "b", "c"])
        self.yielded: list[float] = []

    async def generate_request(self, obj):  # type: ignore[no-untyped-def]
        for i, tok in enumerate(self.script):
            if i:
                time.sleep(0.4)  # the model's step, on the loop thread
            self.yielded.append(time.monotonic())
            last = i == len(self.script) - 1
            meta = {"completion_tokens": i + 1, "finish_reason": {"type": "stop"} if last else None}
            yield {"delta": tok, "output_ids": [i], "meta_info": meta}


def test_an_engine_that_never_yields_to_the_loop_still_streams_each_token_at_once() -> None:
    # Outputs pushed in a burst are held to the end of the loop's turn; this engine's turn lasts its
    # whole generation, so its outputs must go out as they come, not when it is done.
    engine = BlockingEngine()
    body = {"model": "m", "messages": ASK, "stream": True}
    arrived: list[float] = []
    with serve_in_thread(engine) as url:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith("data: {") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                    arrived.append(time.monotonic())
    assert len(arrived) == 3
    # each token reached the client before the engine had computed the next one
    assert arrived[0] < engine.yielded[1] and arrived[1] < engine.yielded[2]
