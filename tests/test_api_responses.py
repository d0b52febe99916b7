"""OpenAI Responses API (`/v1/responses`) through the official `openai` SDK."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from conftest import assert_openai_error, serve_in_thread
from engines import ScriptedEngine

TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
QWEN_CALL = ["<tool_call>", '\n{"name": "get_weather", ', '"arguments": {"city": "Paris"}}', "\n</tool_call>"]


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def test_string_input() -> None:
    engine = ScriptedEngine()
    with serve_in_thread(engine) as url:
        r = client(url).responses.create(model="scripted", input="Say hello", instructions="Be kind.")
    assert r.object == "response" and r.status == "completed" and r.id.startswith("resp_")
    assert r.output_text == "Hello, world!"
    assert [o.type for o in r.output] == ["message"]
    assert r.usage is not None and r.usage.input_tokens == 7 and r.usage.output_tokens == 4
    assert r.usage.input_tokens_details.cached_tokens == 0 and r.usage.total_tokens == 11
    assert engine.requests[0].text.startswith("<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nSay hello")


def test_max_output_tokens_is_incomplete() -> None:
    engine = ScriptedEngine()
    with serve_in_thread(engine) as url:
        r = client(url).responses.create(model="scripted", input="x", max_output_tokens=2, temperature=0.3, top_p=0.9)
    assert r.status == "incomplete" and r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens"
    sp = engine.requests[0].sampling_params
    assert sp["max_new_tokens"] == 2 and sp["temperature"] == 0.3 and sp["top_p"] == 0.9


def test_streaming_event_sequence() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        events: list[Any] = list(client(url).responses.create(model="scripted", input="hi", stream=True))
    types = [e.type for e in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert types[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "Hello, world!"
    done = events[-1]
    assert done.type == "response.completed" and done.response.output_text == "Hello, world!"
    assert done.response.usage is not None and done.response.usage.output_tokens == 4


def test_stream_helper_final_response() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        with client(url).responses.stream(model="scripted", input="hi") as s:
            for _ in s:
                pass
            final = s.get_final_response()
    assert final.output_text == "Hello, world!"


def test_reasoning_items() -> None:
    engine = ScriptedEngine(["<think>", "pondering", "</think>", "Answer."])
    with serve_in_thread(engine, reasoning_parser="qwen3") as url:
        r = client(url).responses.create(model="scripted", input="q", reasoning={"effort": "low"})
        events: list[Any] = list(client(url).responses.create(model="scripted", input="q", stream=True))
    assert [o.type for o in r.output] == ["reasoning", "message"]
    reasoning = r.output[0]
    assert reasoning.type == "reasoning" and reasoning.content is not None
    assert reasoning.content[0].text == "pondering"
    assert r.output_text == "Answer."
    assert "response.reasoning_text.delta" in [e.type for e in events]


def test_function_calling_loop_with_previous_response_id() -> None:
    engine = ScriptedEngine(QWEN_CALL)
    with serve_in_thread(engine, tool_parser="qwen") as url:
        c = client(url)
        first = c.responses.create(model="scripted", input="Weather in Paris?", tools=TOOLS)
        calls = [o for o in first.output if o.type == "function_call"]
        assert len(calls) == 1
        call = calls[0]
        assert call.type == "function_call" and call.name == "get_weather"
        assert json.loads(call.arguments) == {"city": "Paris"}
        engine.script = ["It is sunny."]
        second = c.responses.create(
            model="scripted",
            previous_response_id=first.id,
            tools=TOOLS,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
        )
        assert second.output_text == "It is sunny."
        assert second.previous_response_id == first.id
        prompt = engine.requests[-1].text
        assert "<|im_start|>user\nWeather in Paris?<|im_end|>" in prompt
        assert "<|im_start|>tool\nsunny<|im_end|>" in prompt
        # explicit items instead of previous_response_id give the same conversation
        engine.script = ["ok"]
        c.responses.create(
            model="scripted",
            tools=TOOLS,
            input=[
                {"role": "user", "content": "Weather in Paris?"},
                {"type": "function_call", "call_id": call.call_id, "name": "get_weather", "arguments": call.arguments},
                {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
            ],
        )
        assert engine.requests[-1].text == prompt


def test_streamed_function_call_events() -> None:
    with serve_in_thread(ScriptedEngine(QWEN_CALL), tool_parser="qwen") as url:
        events: list[Any] = list(client(url).responses.create(model="scripted", input="w?", tools=TOOLS, stream=True))
    types = [e.type for e in events]
    assert "response.function_call_arguments.delta" in types
    assert "response.function_call_arguments.done" in types
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(args) == {"city": "Paris"}
    final = events[-1]
    assert final.type == "response.completed"
    assert final.response.output[-1].type == "function_call"


def test_tool_choice_none() -> None:
    with serve_in_thread(ScriptedEngine(QWEN_CALL), tool_parser="qwen") as url:
        r = client(url).responses.create(model="scripted", input="w?", tools=TOOLS, tool_choice="none")
    assert [o.type for o in r.output] == ["message"]


def test_get_and_delete_stored_response() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        c = client(url)
        r = c.responses.create(model="scripted", input="hi")
        got = c.responses.retrieve(r.id)
        assert got.id == r.id and got.output_text == "Hello, world!"
        c.responses.delete(r.id)
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(r.id)
        with pytest.raises(openai.NotFoundError):
            c.responses.delete(r.id)
        unstored = c.responses.create(model="scripted", input="hi", store=False)
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(unstored.id)
        with pytest.raises(openai.NotFoundError):
            c.responses.create(model="scripted", input="hi", previous_response_id=unstored.id)


def test_streamed_response_is_stored() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        events: list[Any] = list(client(url).responses.create(model="scripted", input="hi", stream=True))
        rid = events[-1].response.id
        assert client(url).responses.retrieve(rid).output_text == "Hello, world!"


INVALID: list[tuple[dict[str, Any], int, str | None]] = [
    ({}, 400, "input"),
    ({"input": 3}, 400, "input"),
    ({"input": []}, 400, "input"),
    ({"input": [{"type": "web_search_call"}]}, 400, "input[0].type"),
    ({"input": [{"role": "wizard", "content": "x"}]}, 400, "input[0].role"),
    ({"input": [{"type": "function_call", "name": "f"}]}, 400, "input[0]"),
    ({"input": "x", "tools": [{"type": "web_search"}]}, 400, "tools[0].type"),
    ({"input": "x", "tool_choice": "required"}, 400, "tool_choice"),
    ({"input": "x", "tool_choice": "sometimes"}, 400, "tool_choice"),
    ({"input": "x", "max_output_tokens": 0}, 400, "max_output_tokens"),
    ({"input": "x", "temperature": "hot"}, 400, "temperature"),
    ({"input": "x", "previous_response_id": "resp_missing"}, 404, None),
]


@pytest.mark.parametrize(("body", "status", "param"), INVALID)
def test_invalid_requests(body: dict[str, Any], status: int, param: str | None) -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/v1/responses", json=body)
    assert_openai_error(r, status, param, ("invalid_request_error", "not_found_error"))
