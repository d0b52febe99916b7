"""Anthropic `POST /v1/messages` and `/v1/messages/count_tokens` through the official `anthropic` SDK."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import pytest
from conftest import serve_in_thread
from engines import ScriptedEngine, TokenizingEngine

MSG: Any = [{"role": "user", "content": "Say hello"}]
WEATHER: Any = {
    "name": "get_weather",
    "description": "Weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
QWEN_CALL = [
    "Let me check.",
    "<tool_call>",
    '\n{"name": "get_weather", ',
    '"arguments": {"city": "Paris"}}',
    "\n</tool_call>",
]


def client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)


def events(body: str) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    name = ""
    for line in body.splitlines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            out.append((name, json.loads(line[len("data: ") :])))
    return out


def test_text_message() -> None:
    engine = ScriptedEngine()
    with serve_in_thread(engine) as url:
        m = client(url).messages.create(model="scripted", max_tokens=100, system="Be kind.", messages=MSG)
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg")
    assert [b.type for b in m.content] == ["text"]
    assert m.content[0].text == "Hello, world!"  # type: ignore[union-attr]
    assert m.stop_reason == "end_turn" and m.stop_sequence is None
    assert m.usage.input_tokens == 7 and m.usage.output_tokens == 4
    assert engine.requests[0].text.startswith("<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nSay hello")
    assert engine.requests[0].sampling_params["max_new_tokens"] == 100


def test_system_blocks_and_max_tokens_reason() -> None:
    engine = ScriptedEngine()
    with serve_in_thread(engine) as url:
        m = client(url).messages.create(
            model="scripted",
            max_tokens=2,
            system=[{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
            messages=MSG,
        )
    assert m.stop_reason == "max_tokens"
    assert engine.requests[0].text.startswith("<|im_start|>system\nA\nB<|im_end|>")


def test_stop_sequences() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        m = client(url).messages.create(model="scripted", max_tokens=50, messages=MSG, stop_sequences=[" wor"])
        with client(url).messages.stream(model="scripted", max_tokens=50, messages=MSG, stop_sequences=[" wor"]) as s:
            final = s.get_final_message()
    assert m.content[0].text == "Hello,"  # type: ignore[union-attr]
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == " wor"
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == " wor"
    assert final.content[0].text == "Hello,"  # type: ignore[union-attr]


def test_streaming_event_sequence() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/v1/messages", json={"model": "m", "max_tokens": 20, "messages": MSG, "stream": True})
    ev = events(r.text)
    names = [n for n, _ in ev]
    assert names[:4] == ["message_start", "ping", "content_block_start", "content_block_delta"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert all(n == d["type"] for n, d in ev)
    assert "".join(d["delta"]["text"] for n, d in ev if n == "content_block_delta") == "Hello, world!"
    assert ev[-2][1]["delta"]["stop_reason"] == "end_turn" and ev[-2][1]["usage"]["output_tokens"] == 4
    assert ev[0][1]["message"]["usage"]["input_tokens"] == 7


def test_sdk_stream_helper_text() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        with client(url).messages.stream(model="scripted", max_tokens=20, messages=MSG) as s:
            text = "".join(s.text_stream)
            final = s.get_final_message()
    assert text == "Hello, world!"
    assert final.content[0].text == "Hello, world!"  # type: ignore[union-attr]
    assert final.stop_reason == "end_turn"


def test_tool_use_round_trip() -> None:
    engine = ScriptedEngine(QWEN_CALL)
    with serve_in_thread(engine, tool_parser="qwen") as url:
        c = client(url)
        m = c.messages.create(model="scripted", max_tokens=100, messages=MSG, tools=[WEATHER])
        assert m.stop_reason == "tool_use"
        assert [b.type for b in m.content] == ["text", "tool_use"]
        use = m.content[1]
        assert use.type == "tool_use" and use.name == "get_weather" and use.input == {"city": "Paris"}
        with c.messages.stream(model="scripted", max_tokens=100, messages=MSG, tools=[WEATHER]) as s:
            streamed = s.get_final_message()
        assert streamed.stop_reason == "tool_use"
        s_use = streamed.content[-1]
        assert s_use.type == "tool_use" and s_use.input == {"city": "Paris"}
        engine.script = ["It is sunny."]
        follow = c.messages.create(
            model="scripted",
            max_tokens=100,
            tools=[WEATHER],
            messages=[
                *MSG,
                {"role": "assistant", "content": m.content},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]},
            ],
        )
    assert follow.content[0].text == "It is sunny."  # type: ignore[union-attr]
    prompt = engine.requests[-1].text
    assert "<|im_start|>tool\nsunny<|im_end|>" in prompt


def test_tool_choice_none_disables_parsing() -> None:
    with serve_in_thread(ScriptedEngine(QWEN_CALL), tool_parser="qwen") as url:
        m = client(url).messages.create(
            model="scripted",
            max_tokens=100,
            messages=MSG,
            tools=[WEATHER],
            tool_choice={"type": "none"},
        )
    assert m.stop_reason == "end_turn" and [b.type for b in m.content] == ["text"]


def test_thinking_blocks() -> None:
    engine = ScriptedEngine(["<think>", "pondering", "</think>", "Answer."])
    with serve_in_thread(engine, reasoning_parser="qwen3") as url:
        m = client(url).messages.create(
            model="scripted", max_tokens=100, messages=MSG, thinking={"type": "enabled", "budget_tokens": 1024}
        )
        r = httpx.post(url + "/v1/messages", json={"max_tokens": 20, "messages": MSG, "stream": True})
        with client(url).messages.stream(model="scripted", max_tokens=20, messages=MSG) as s:
            streamed = s.get_final_message()
    assert [b.type for b in streamed.content] == ["thinking", "text"]
    assert streamed.content[0].thinking == "pondering"  # type: ignore[union-attr]
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert m.content[0].thinking == "pondering"  # type: ignore[union-attr]
    assert m.content[1].text == "Answer."  # type: ignore[union-attr]
    deltas = [d["delta"]["type"] for n, d in events(r.text) if n == "content_block_delta"]
    assert deltas[0] == "thinking_delta" and deltas[-1] == "text_delta"


def test_count_tokens() -> None:
    with serve_in_thread(TokenizingEngine()) as url:
        r = client(url).messages.count_tokens(model="scripted", messages=MSG)
    rendered = "<|im_start|>user\nSay hello<|im_end|>\n<|im_start|>assistant\n"
    assert r.input_tokens == len(rendered)


def test_count_tokens_without_tokenizer_is_a_clear_error() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/v1/messages/count_tokens", json={"messages": MSG})
    assert r.status_code == 400 and r.json()["type"] == "error" and "tokenizer" in r.json()["error"]["message"]


def test_engine_failure_is_anthropic_shaped() -> None:
    with serve_in_thread(ScriptedEngine(raise_after=1)) as url:
        with pytest.raises(anthropic.InternalServerError):
            client(url).messages.create(model="scripted", max_tokens=10, messages=MSG)


INVALID: list[tuple[Any, int]] = [
    ({"messages": MSG}, 400),  # max_tokens is required
    ({"max_tokens": 5}, 400),  # messages missing
    ({"max_tokens": 5, "messages": []}, 400),
    ({"max_tokens": "x", "messages": MSG}, 400),
    ({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, 400),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": 3}]}, 400),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image"}]}]}, 400),
    ({"max_tokens": 5, "messages": MSG, "system": 3}, 400),
    ({"max_tokens": 5, "messages": MSG, "temperature": 1.5}, 400),
    ({"max_tokens": 5, "messages": MSG, "stop_sequences": [""]}, 400),
    ({"max_tokens": 5, "messages": MSG, "tool_choice": {"type": "tool", "name": "nope"}}, 400),
    ({"max_tokens": 5, "messages": MSG, "tool_choice": {"type": "sometimes"}}, 400),
    ({"max_tokens": 5, "messages": MSG, "thinking": {"type": "maybe"}}, 400),
    ("{not json", 400),
]


@pytest.mark.parametrize(("body", "status"), INVALID)
def test_invalid_requests_anthropic_shape(body: Any, status: int) -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        if isinstance(body, str):
            r = httpx.post(url + "/v1/messages", content=body, headers={"content-type": "application/json"})
        else:
            r = httpx.post(url + "/v1/messages", json=body)
    assert r.status_code == status, r.text
    j = r.json()
    assert j["type"] == "error" and j["error"]["type"] == "invalid_request_error" and j["error"]["message"]


def test_body_limit_is_anthropic_shaped() -> None:
    with serve_in_thread(ScriptedEngine(), max_body_bytes=1000) as url:
        r = httpx.post(
            url + "/v1/messages", json={"max_tokens": 5, "messages": [{"role": "user", "content": "x" * 5000}]}
        )
    assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"


def test_sdk_bad_request() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        with pytest.raises(anthropic.BadRequestError) as e:
            client(url).messages.create(model="scripted", max_tokens=5, messages=[{"role": "user", "content": []}])
    assert e.value.status_code == 400
