"""Tool calls and reasoning through `/v1/chat/completions`, checked with the `openai` SDK:
streaming accumulation (the SDK's `.stream()` helper) must give what non-streaming gives."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
import smgpy
from conftest import function_tool, serve_in_thread
from engines import ScriptedEngine

TOOLS = [
    function_tool("get_weather", "Weather for a city", city="string"),
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    },
]
MSG = [{"role": "user", "content": "Weather in Paris and Tokyo?"}]

HERMES_TWO_CALLS = (
    'Let me check.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京 \\"x\\""}}\n</tool_call>'
)


def tokens(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)


def streamed_and_complete(url: str) -> tuple[list[str], Any, Any]:
    """Ask for `MSG` with `TOOLS` streamed through the SDK's `.stream()` helper, then complete:
    the streamed argument deltas, the streamed final completion and the complete one."""
    c = client(url)
    fragments = []
    with c.chat.completions.stream(model="x", messages=MSG, tools=TOOLS) as s:  # type: ignore[arg-type]
        for event in s:
            if event.type == "tool_calls.function.arguments.delta":
                fragments.append(event.arguments_delta)
        final = s.get_final_completion()
    r = c.chat.completions.create(model="x", messages=MSG, tools=TOOLS)  # type: ignore[arg-type]
    return fragments, final, r


def test_tool_calls_non_streaming_and_stream_helper_agree() -> None:
    engine = ScriptedEngine(tokens(HERMES_TWO_CALLS))
    with serve_in_thread(engine, tool_parser="hermes") as url:
        c = client(url)
        r = c.chat.completions.create(model="x", messages=MSG, tools=TOOLS)  # type: ignore[arg-type]
        with c.chat.completions.stream(model="x", messages=MSG, tools=TOOLS) as s:  # type: ignore[arg-type]
            for _ in s:
                pass
            final = s.get_final_completion()
    for choice in (r.choices[0], final.choices[0]):
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls
        assert calls is not None and [tc.function.name for tc in calls] == ["get_weather", "get_weather"]
        assert json.loads(calls[0].function.arguments) == {"city": "Paris"}
        assert json.loads(calls[1].function.arguments) == {"city": '東京 "x"'}
        assert all(tc.id.startswith("call_") and tc.type == "function" for tc in calls)
        assert (choice.message.content or "").strip() == "Let me check."
    assert [tc.function.arguments for tc in r.choices[0].message.tool_calls or []] == [
        tc.function.arguments for tc in final.choices[0].message.tool_calls or []
    ]
    # the request's tools reached the chat template / engine request
    assert engine.requests[0].text


def test_stream_deltas_shape() -> None:
    with serve_in_thread(ScriptedEngine(tokens(HERMES_TWO_CALLS, 2)), tool_parser="hermes") as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "tools": TOOLS, "stream": True})
    chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    seen: dict[int, str] = {}
    args: dict[int, str] = {}
    for ch in chunks:
        for tc in ch["choices"][0]["delta"].get("tool_calls", []):
            i = tc["index"]
            if i not in seen:
                assert tc["id"].startswith("call_") and tc["type"] == "function" and tc["function"]["name"]
                seen[i] = tc["id"]
            else:
                assert "id" not in tc and "name" not in tc["function"]
            args[i] = args.get(i, "") + tc["function"]["arguments"]
    assert sorted(seen) == [0, 1]
    assert json.loads(args[0]) == {"city": "Paris"}
    text = "".join(ch["choices"][0]["delta"].get("content") or "" for ch in chunks)
    assert "<tool_call>" not in text


def test_arguments_stream_incrementally() -> None:
    """A long argument reaches the client in many deltas while the model writes it, and the
    SDK's accumulation equals the non-streamed call."""
    city = "Llanfairpwllgwyngyll " * 6
    call = json.dumps({"name": "get_weather", "arguments": {"city": city}})
    out = f"<tool_call>\n{call}\n</tool_call>"
    engine = ScriptedEngine(tokens(out, 4), delay=0.003)
    with serve_in_thread(engine, tool_parser="hermes") as url:
        fragments, final, r = streamed_and_complete(url)
    assert len(fragments) >= 10, fragments
    streamed = final.choices[0].message.tool_calls
    complete = r.choices[0].message.tool_calls
    assert streamed is not None and complete is not None
    assert "".join(fragments) == streamed[0].function.arguments == complete[0].function.arguments
    assert json.loads(complete[0].function.arguments) == {"city": city}


def test_qwen_xml_string_parameter_streams() -> None:
    """Qwen3-Coder XML: a parameter the tool declares as a string streams as the model writes it."""
    city = "Paris, France; the city of light " * 4
    out = f"<tool_call>\n<function=get_weather>\n<parameter=city>\n{city}\n</parameter>\n</function>\n</tool_call>"
    with serve_in_thread(ScriptedEngine(tokens(out, 4), delay=0.003), tool_parser="qwen3_coder") as url:
        fragments, final, r = streamed_and_complete(url)
    assert len(fragments) >= 10, fragments
    streamed, complete = final.choices[0].message.tool_calls, r.choices[0].message.tool_calls
    assert streamed is not None and complete is not None
    assert "".join(fragments) == streamed[0].function.arguments == complete[0].function.arguments
    assert json.loads(complete[0].function.arguments) == {"city": city}


def test_tool_choice_none_disables_parsing() -> None:
    with serve_in_thread(ScriptedEngine(tokens(HERMES_TWO_CALLS)), tool_parser="hermes") as url:
        r = client(url).chat.completions.create(model="x", messages=MSG, tools=TOOLS, tool_choice="none")  # type: ignore[arg-type]
    assert r.choices[0].message.tool_calls is None
    assert "<tool_call>" in (r.choices[0].message.content or "")
    assert r.choices[0].finish_reason == "stop"


def test_named_tool_choice_drops_other_calls() -> None:
    out = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>' + HERMES_TWO_CALLS
    with serve_in_thread(ScriptedEngine(tokens(out)), tool_parser="hermes") as url:
        r = client(url).chat.completions.create(
            model="x",
            messages=MSG,
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "get_weather"}},  # type: ignore[arg-type]
        )
    names = [tc.function.name for tc in r.choices[0].message.tool_calls or []]
    assert names == ["get_weather", "get_weather"]


@pytest.mark.parametrize(
    ("option", "kind", "names"),
    [
        ("tool_parser", "tool-call", ["hermes", "qwen3_coder", "mistral", "deepseek_v31", "openai"]),
        ("reasoning_parser", "reasoning", ["qwen3", "deepseek_r1", "mistral", "openai_gptoss", "gemma4"]),
    ],
)
def test_unknown_parser_fails_at_startup_listing_the_choices(option: str, kind: str, names: list[str]) -> None:
    bad: dict[str, Any] = {option: "no-such-parser"}

    async def start() -> None:
        await smgpy.serve_oai_async(ScriptedEngine(), port=0, log_level="warn", **bad)

    with pytest.raises(ValueError, match=f"unknown {kind} parser `no-such-parser`") as info:
        asyncio.run(start())
    listed = [n.strip() for n in str(info.value).split("valid names:", 1)[1].split(",")]
    assert set(names) <= set(listed), listed
    # through the test harness too: the server never comes up
    with pytest.raises(RuntimeError, match="did not start"), serve_in_thread(ScriptedEngine(), **{option: "nope"}):
        pass


def test_zero_http_threads_fails_at_startup() -> None:
    async def start() -> None:
        await smgpy.serve_oai_async(ScriptedEngine(), port=0, log_level="warn", http_threads=0)

    with pytest.raises(ValueError, match="http_threads must be at least 1"):
        asyncio.run(start())


QWEN_XML_CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"
HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
# A template that writes Qwen-XML tool calls into the history and has a `<think>` switch.
XML_THINK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}"
    "{% for tc in m.tool_calls or [] %}<tool_call>\n<function={{ tc.function.name }}>\n"
    "{% for k, v in tc.function.arguments.items() %}<parameter={{ k }}>\n{{ v }}\n</parameter>\n{% endfor %}"
    "</function>\n</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


@pytest.mark.parametrize(
    ("model", "template", "options", "output", "calls", "reasoning"),
    [
        # from the model id
        ("Qwen/Qwen2.5-7B-Instruct", None, {}, HERMES_CALL, ["get_weather"], None),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", None, {}, QWEN_XML_CALL, ["get_weather"], None),
        ("Qwen/Qwen3-8B", None, {}, "<think>check</think>" + HERMES_CALL, ["get_weather"], "check"),
        ("deepseek-ai/DeepSeek-R1", None, {}, "check</think>Oslo is sunny.", [], "check"),
        # from the chat template when the model id says nothing
        ("acme/house-model", XML_THINK_TEMPLATE, {}, "<think>check</think>" + QWEN_XML_CALL, ["get_weather"], "check"),
        # an explicit name wins over the model id; None turns parsing off
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", None, {"tool_parser": "hermes"}, HERMES_CALL, ["get_weather"], None),
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", None, {}, HERMES_CALL, [], None),
        ("Qwen/Qwen2.5-7B-Instruct", None, {"tool_parser": None}, HERMES_CALL, [], None),
        ("deepseek-ai/DeepSeek-R1", None, {"reasoning_parser": "qwen3"}, "check</think>Oslo", [], None),
    ],
    ids=[
        "model-hermes",
        "model-qwen3-coder",
        "model-qwen3-reasoning",
        "model-deepseek-r1",
        "template",
        "explicit-wins",
        "auto-differs",
        "explicit-off",
        "explicit-reasoning-wins",
    ],
)
def test_parsers_chosen_automatically_unless_named(
    model: str, template: str | None, options: dict[str, Any], output: str, calls: list[str], reasoning: str | None
) -> None:
    engine = ScriptedEngine(tokens(output))
    if template is not None:
        engine.chat_template = template
    # serve_oai's defaults are tool_parser="auto", reasoning_parser="auto"
    with serve_in_thread(engine, model_name=model, **options) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "tools": TOOLS}).json()
    msg = r["choices"][0]["message"]
    assert [tc["function"]["name"] for tc in msg.get("tool_calls") or []] == calls
    assert msg.get("reasoning_content") == reasoning
    assert r["choices"][0]["finish_reason"] == ("tool_calls" if calls else "stop")
    if not calls:
        assert (msg["content"] or "").endswith(output.split("</think>")[-1])


@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_content(stream: bool) -> None:
    out = "<think>The user wants a city.</think>Paris."
    with serve_in_thread(ScriptedEngine(tokens(out, 2)), reasoning_parser="deepseek_r1") as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "stream": stream})
    if stream:
        chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
        reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks)
        content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    else:
        msg = r.json()["choices"][0]["message"]
        reasoning, content = msg["reasoning_content"], msg["content"]
    assert reasoning == "The user wants a city."
    assert content == "Paris."


def test_reasoning_then_tool_call() -> None:
    out = '<think>need weather</think><tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    with serve_in_thread(ScriptedEngine(tokens(out)), reasoning_parser="deepseek_r1", tool_parser="hermes") as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "tools": TOOLS}).json()
    msg = r["choices"][0]["message"]
    assert msg["reasoning_content"] == "need weather"
    assert msg["tool_calls"][0]["function"]["name"] == "get_weather"
    assert r["choices"][0]["finish_reason"] == "tool_calls"


def test_required_holds_the_engine_to_a_list_of_calls() -> None:
    """`tool_choice: "required"` sends the engine a JSON Schema (a list of calls tagged by tool
    name, each with its tool's parameters) in place of `response_format`, and reads the JSON list
    it writes as tool calls, also on a server without a tool parser."""
    out = '\n[{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "get_time", "parameters": {}}]'
    engine = ScriptedEngine(tokens(out))
    with serve_in_thread(engine) as url:
        c = client(url)
        args: dict[str, Any] = dict(
            model="x", messages=MSG, tools=TOOLS, tool_choice="required", response_format={"type": "json_object"}
        )
        r = c.chat.completions.create(**args)
        with c.chat.completions.stream(**args) as s:
            for _ in s:
                pass
            streamed = s.get_final_completion().choices[0].message.tool_calls
    calls = r.choices[0].message.tool_calls or []
    assert [(t.function.name, json.loads(t.function.arguments)) for t in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {}),
    ]
    assert r.choices[0].message.content is None
    assert r.choices[0].finish_reason == "tool_calls"
    assert [(t.function.name, t.function.arguments) for t in streamed or []] == [
        (t.function.name, t.function.arguments) for t in calls
    ]
    sp = engine.requests[0].sampling_params
    assert "response_format" not in sp
    schema = json.loads(sp["json_schema"])
    assert schema["type"] == "array" and schema["minItems"] == 1
    alts = schema["items"]["anyOf"]
    assert [a["properties"]["name"]["const"] for a in alts] == ["get_weather", "get_time"]
    # Objects that leave `additionalProperties` unsaid are closed: a call's arguments are its tool's.
    assert alts[0]["properties"]["parameters"] == {**TOOLS[0]["function"]["parameters"], "additionalProperties": False}


def test_named_choice_holds_the_engine_to_its_parameters() -> None:
    engine = ScriptedEngine(tokens('{"city": "Paris"}'))
    named = {"type": "function", "function": {"name": "get_weather"}}
    with serve_in_thread(engine) as url:
        r = client(url).chat.completions.create(model="x", messages=MSG, tools=TOOLS, tool_choice=named)  # type: ignore[arg-type]
    calls = r.choices[0].message.tool_calls or []
    assert [(t.function.name, t.function.arguments) for t in calls] == [("get_weather", '{"city":"Paris"}')]
    params = {**TOOLS[0]["function"]["parameters"], "additionalProperties": False}
    assert json.loads(engine.requests[0].sampling_params["json_schema"]) == params


class LarkEngine(ScriptedEngine):
    """An engine that enforces Lark grammars (as smgpy's MLX engine does)."""

    lark_grammars = True


def test_required_with_a_lark_engine_is_a_grammar_of_the_models_own_format() -> None:
    """With an engine that takes Lark grammars, `required` holds the output to calls in the
    server's tool format (here Hermes) and the normal parser reads them."""
    engine = LarkEngine(tokens(HERMES_TWO_CALLS))
    with serve_in_thread(engine, tool_parser="hermes") as url:
        r = client(url).chat.completions.create(model="x", messages=MSG, tools=TOOLS, tool_choice="required")  # type: ignore[arg-type]
    calls = r.choices[0].message.tool_calls or []
    assert [t.function.name for t in calls] == ["get_weather", "get_weather"]
    sp = engine.requests[0].sampling_params
    assert "json_schema" not in sp and sp["ebnf"].startswith("%llguidance")
    assert '"<tool_call>\\n"' in sp["ebnf"] and "get_weather" in sp["ebnf"]


def test_auto_with_a_strict_tool_waits_for_the_call_marker() -> None:
    strict = [{"type": "function", "function": {**TOOLS[0]["function"], "strict": True}}]
    engine = LarkEngine(tokens(HERMES_TWO_CALLS))
    with serve_in_thread(engine, tool_parser="hermes") as url:
        client(url).chat.completions.create(model="x", messages=MSG, tools=strict)  # type: ignore[arg-type]
        client(url).chat.completions.create(model="x", messages=MSG, tools=TOOLS)  # type: ignore[arg-type]
    assert "head[lazy]" in engine.requests[0].sampling_params["ebnf"]
    assert "ebnf" not in engine.requests[1].sampling_params


def test_a_strict_tool_whose_schema_cannot_be_enforced_is_refused() -> None:
    unique = {"type": "object", "properties": {"ids": {"type": "array", "uniqueItems": True}}}
    tools = [{"type": "function", "function": {"name": "f", "parameters": unique, "strict": True}}]
    engine = LarkEngine(tokens("x"))
    with serve_in_thread(engine, tool_parser="hermes") as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "tools": tools, "tool_choice": "required"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "tools[0].function.parameters" and "uniqueItems" in err["message"]
    assert not engine.requests


def test_auto_choice_sends_no_schema() -> None:
    engine = ScriptedEngine(tokens(HERMES_TWO_CALLS))
    with serve_in_thread(engine, tool_parser="hermes") as url:
        client(url).chat.completions.create(model="x", messages=MSG, tools=TOOLS)  # type: ignore[arg-type]
    assert "json_schema" not in engine.requests[0].sampling_params
