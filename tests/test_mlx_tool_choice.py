"""Forced tool calls (`tool_choice` `required` / a named function, Anthropic `any` / `tool`) on the
real MLX engine (SmolLM2-135M-Instruct, greedy), through the official SDKs.

SmolLM2 has no tool-call format of its own: without a forced choice it answers in prose. With one,
its output is held to JSON of the call (a list of `{"name", "parameters"}` objects, each following
its own tool's schema, or the named function's arguments), and the server reports tool calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import demo_gguf

GGUF = demo_gguf()
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
from conftest import serve_in_thread  # noqa: E402

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the current time in a time zone",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string"}, "offset": {"type": "integer"}},
            "required": ["timezone", "offset"],
        },
    },
}
TOOLS = [WEATHER, TIME]
ASK = [{"role": "user", "content": "What is the weather like in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_time"}}


@pytest.fixture(scope="module")
def engine(mlx_engine: Any) -> Any:
    return mlx_engine


# The demo model served as if it were trained on another tool format: the server's parser and
# the grammar of forced calls follow that format, so its output is that format's syntax and the
# normal (not forced) parser reads it. (Qwen3-Coder XML, whose string values are raw text the
# demo model rambles in, is checked byte by byte in rust/structured/tests/tool_grammars.rs.)
FORMATS = ["hermes", "mistral", "llama3_json"]


@pytest.fixture(scope="module", params=FORMATS)
def formatted(request: Any, engine: Any) -> Iterator[Any]:
    with serve_in_thread(engine, tool_parser=request.param) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=120)


def test_required_in_the_models_own_format(formatted: Any) -> None:
    # One call: the demo model, which knows none of these formats, would otherwise repeat it.
    r = chat(formatted, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=120)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    calls = choice.message.tool_calls
    assert calls
    for c in calls:
        follows(c.function.name, c.function.arguments)
    assert calls[0].function.name == "get_weather"
    r = chat(formatted, tools=TOOLS, tool_choice=NAMED, max_tokens=120)
    calls = r.choices[0].message.tool_calls
    assert calls is not None and [c.function.name for c in calls] == ["get_time"]
    follows("get_time", calls[0].function.arguments)


def test_strict_tools_under_auto_follow_their_schema_once_called(formatted: Any) -> None:
    """A `strict` tool under `auto`: free text until the model opens a call, then the call is
    held to the tool's schema (formats with an opening marker)."""
    strict = [{"type": "function", "function": {**WEATHER["function"], "strict": True}}]
    r = chat(formatted, tools=strict, max_tokens=60)
    for c in r.choices[0].message.tool_calls or []:
        follows(c.function.name, c.function.arguments)


@pytest.fixture(scope="module")
def client(mlx_url: str) -> Any:
    return openai.OpenAI(base_url=mlx_url + "/v1", api_key="x", max_retries=0, timeout=120)


def chat(client: Any, messages: list[dict[str, Any]] = ASK, **kwargs: Any) -> Any:
    """The served model's greedy chat completion of ``messages`` (by default ASK)."""
    return client.chat.completions.create(model="m", messages=messages, temperature=0, **kwargs)


def greedy_message(tools: list[dict[str, Any]], tool_choice: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a greedy Anthropic Messages request for ASK (80 tokens at most)."""
    return dict(
        model="m", max_tokens=80, messages=ASK, tools=tools, tool_choice=tool_choice, extra_body={"temperature": 0}
    )


def follows(name: str, arguments: str) -> dict[str, Any]:
    """The arguments, checked against the schema of tool `name` (the keys this test's tools use)."""
    args = json.loads(arguments)
    tool = next(t for t in TOOLS if t["function"]["name"] == name)
    params = tool["function"]["parameters"]
    assert set(args) == set(params["required"]), args
    for key, value in args.items():
        spec = params["properties"][key]
        assert isinstance(value, {"string": str, "integer": int}[spec["type"]]), (key, value)
        assert value in spec.get("enum", [value]), (key, value)
    return args


def test_without_a_forced_choice_the_model_answers_in_prose(client: Any) -> None:
    r = chat(client, tools=TOOLS, max_tokens=30)
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].message.content


def test_required_makes_calls_that_follow_their_tools_schemas(client: Any) -> None:
    r = chat(client, tools=TOOLS, tool_choice="required", max_tokens=80)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls and all(c.type == "function" and c.id.startswith("call_") for c in calls)
    for c in calls:
        assert c.function.name in {"get_weather", "get_time"}
        follows(c.function.name, c.function.arguments)
    assert calls[0].function.name == "get_weather"
    assert follows("get_weather", calls[0].function.arguments)["city"] == "Paris"


def test_a_named_function_is_the_one_called(client: Any) -> None:
    r = chat(client, tools=TOOLS, tool_choice=NAMED, max_tokens=80)
    calls = r.choices[0].message.tool_calls
    assert calls is not None and len(calls) == 1
    assert calls[0].function.name == "get_time"
    follows("get_time", calls[0].function.arguments)
    assert r.choices[0].message.content is None


@pytest.mark.parametrize("choice", ["required", NAMED])
def test_streamed_calls_equal_complete(client: Any, choice: Any) -> None:
    args = dict(model="m", messages=ASK, tools=TOOLS, tool_choice=choice, max_tokens=80, temperature=0)
    full = client.chat.completions.create(**args).choices[0].message.tool_calls
    with client.chat.completions.stream(**args) as s:
        for _ in s:
            pass
        final = s.get_final_completion().choices[0]
    streamed = final.message.tool_calls
    assert final.finish_reason == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in streamed] == [
        (c.function.name, c.function.arguments) for c in full
    ]


def test_parallel_tool_calls_false_makes_one_call(client: Any) -> None:
    two = [{"role": "user", "content": "What is the weather in Paris, and what time is it in Tokyo?"}]
    r = chat(client, two, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, max_tokens=120)
    assert len(r.choices[0].message.tool_calls) == 1


def test_the_forced_choice_wins_over_response_format(client: Any) -> None:
    r = chat(client, tools=TOOLS, tool_choice=NAMED, response_format={"type": "json_object"}, max_tokens=80)
    assert r.choices[0].message.tool_calls[0].function.name == "get_time"


def test_a_schema_the_engine_cannot_enforce_still_gives_a_call_to_that_tool(client: Any) -> None:
    dated = {
        "type": "function",
        "function": {
            "name": "book",
            "parameters": {
                "type": "object",
                "properties": {"day": {"type": "string", "format": "date"}},
                "required": ["day"],
            },
        },
    }
    r = chat(
        client,
        [{"role": "user", "content": "Book a table for tomorrow."}],
        tools=[dated],
        tool_choice="required",
        max_tokens=60,
    )
    calls = r.choices[0].message.tool_calls
    assert calls and all(c.function.name == "book" for c in calls)
    assert isinstance(json.loads(calls[0].function.arguments), dict)


def test_a_truncated_call_is_reported_as_far_as_it_was_written(client: Any) -> None:
    """Cut by max_tokens: finish_reason `length`, and the arguments as the model wrote them, never
    closed up into JSON that looks whole (the stream could not take them back either)."""
    r = chat(client, tools=TOOLS, tool_choice=NAMED, max_tokens=5)
    choice = r.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.tool_calls[0].function.name == "get_time"
    args = choice.message.tool_calls[0].function.arguments
    assert args.startswith("{")
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)


def test_anthropic_any_and_tool(mlx_url: str) -> None:
    client = anthropic.Anthropic(base_url=mlx_url, api_key="x", max_retries=0, timeout=120)
    tools = [
        {"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
        for f in (t["function"] for t in TOOLS)
    ]
    r = client.messages.create(**greedy_message(tools, {"type": "any"}))
    assert r.stop_reason == "tool_use"
    uses = [b for b in r.content if b.type == "tool_use"]
    assert uses and uses[0].name == "get_weather"
    follows("get_weather", json.dumps(uses[0].input))
    r = client.messages.create(**greedy_message(tools, {"type": "tool", "name": "get_time"}))
    uses = [b for b in r.content if b.type == "tool_use"]
    assert [u.name for u in uses] == ["get_time"]
    follows("get_time", json.dumps(uses[0].input))


def test_responses_required(client: Any) -> None:
    flat = [{"type": "function", **t["function"]} for t in TOOLS]
    r = client.responses.create(
        model="m", input=ASK[0]["content"], tools=flat, tool_choice="required", max_output_tokens=80, temperature=0
    )
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather"
    follows("get_weather", calls[0].arguments)


def test_required_without_tools_is_a_400(mlx_url: str) -> None:
    r = httpx.post(
        mlx_url + "/v1/chat/completions",
        json={"model": "m", "messages": ASK, "tool_choice": "required"},
        timeout=30,
    )
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "tool_choice"


def test_anthropic_streamed_forced_call_equals_complete(mlx_url: str) -> None:
    client = anthropic.Anthropic(base_url=mlx_url, api_key="x", max_retries=0, timeout=120)
    tools = [{"name": f["name"], "input_schema": f["parameters"]} for f in (t["function"] for t in TOOLS)]
    args = greedy_message(tools, {"type": "tool", "name": "get_weather"})
    full = client.messages.create(**args)
    with client.messages.stream(**args) as s:
        final = s.get_final_message()
    assert final.stop_reason == full.stop_reason == "tool_use"
    uses = [(b.name, b.input) for b in final.content if b.type == "tool_use"]
    assert uses == [(b.name, b.input) for b in full.content if b.type == "tool_use"]
    assert uses[0][0] == "get_weather"


def test_responses_streamed_named_call_equals_complete(client: Any) -> None:
    flat = [{"type": "function", **t["function"]} for t in TOOLS]
    named = {"type": "function", "name": "get_time"}
    args: dict[str, Any] = dict(
        model="m", input=ASK[0]["content"], tools=flat, tool_choice=named, max_output_tokens=80, temperature=0
    )
    full = [(o.name, o.arguments) for o in client.responses.create(**args).output if o.type == "function_call"]
    done = None
    for event in client.responses.create(stream=True, **args):
        if event.type == "response.completed":
            done = event.response
    assert done is not None
    assert [(o.name, o.arguments) for o in done.output if o.type == "function_call"] == full
    assert full and full[0][0] == "get_time"
    follows("get_time", full[0][1])
