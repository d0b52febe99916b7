"""What reaches the chat template through the server, and what comes back: the request's tools
(per `tool_choice`), `chat_template_kwargs`, normalised tool-call arguments and Responses-API
tools, `raise_exception` as a 400 in each API's error shape, and thinking on/off prompts
deciding whether the answer lands in `content` or `reasoning_content`."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
from conftest import serve_in_thread
from engines import CHATML, ScriptedEngine, TokenizingEngine

MSG = [{"role": "user", "content": "Weather in Paris?"}]
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)


def prompt_of(engine: ScriptedEngine) -> str:
    assert len(engine.requests) == 1
    return str(engine.requests[0].text)


# ---- tools reach the template ----

TOOLS_TEMPLATE = CHATML + (
    "{% if tools %}<tools>{% for t in tools %}{{ t.function.name }};{% endfor %}</tools>{% endif %}"
)


@pytest.mark.parametrize(
    ("tool_choice", "shown"),
    [
        (None, "get_weather;get_time;"),
        ("auto", "get_weather;get_time;"),
        ("none", "get_weather;get_time;"),  # `none` only turns parsing off; the model still sees them
        ({"type": "function", "function": {"name": "get_time"}}, "get_time;"),
    ],
    ids=["omitted", "auto", "none", "named"],
)
def test_request_tools_reach_the_template(tool_choice: Any, shown: str) -> None:
    engine = ScriptedEngine()
    engine.chat_template = TOOLS_TEMPLATE
    extra = {} if tool_choice is None else {"tool_choice": tool_choice}
    with serve_in_thread(engine) as url:
        client(url).chat.completions.create(model="x", messages=MSG, tools=TOOLS, **extra)  # type: ignore[arg-type]
    assert prompt_of(engine).endswith(f"<|im_start|>assistant\n<tools>{shown}</tools>")


# ---- normalisation and kwargs on the way to the template ----


def test_string_arguments_reach_the_template_as_a_mapping() -> None:
    engine = ScriptedEngine()
    engine.chat_template = (
        "{% for m in messages %}{{ m.role }}:"
        "{% for tc in m.tool_calls or [] %}[{{ tc.function.name }} city={{ tc.function.arguments.city }} "
        "{{ tc.function.arguments | tojson }}]{% endfor %}{{ m.content or '' }}\n{% endfor %}"
    )
    history = [
        *MSG,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 2}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    with serve_in_thread(engine) as url:
        client(url).chat.completions.create(model="x", messages=history, tools=TOOLS)  # type: ignore[arg-type]
    assert prompt_of(engine) == (
        'user:Weather in Paris?\nassistant:[get_weather city=Paris {"city": "Paris", "days": 2}]\ntool:sunny\n'
    )


def test_responses_api_flat_tools_reach_the_template_nested() -> None:
    engine = ScriptedEngine()
    engine.chat_template = CHATML + (
        "{% for t in tools or [] %}<{{ t.type }}|{{ t.function.name }}|{{ t.function.description }}|"
        "{{ t.function.parameters.properties.city.type }}>{% endfor %}"
    )
    flat = {
        "type": "function",
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": False,
    }
    with serve_in_thread(engine) as url:
        client(url).responses.create(model="x", input="Weather in Paris?", tools=[flat])  # type: ignore[list-item]
    assert prompt_of(engine).endswith("<|im_start|>assistant\n<function|get_weather|Weather for a city|string>")


def test_chat_template_kwargs_reach_the_template() -> None:
    engine = ScriptedEngine()
    engine.chat_template = CHATML + "[effort={{ reasoning_effort }} flag={{ custom_flag | tojson }}]"
    with serve_in_thread(engine) as url:
        client(url).chat.completions.create(
            model="x",
            messages=MSG,  # type: ignore[arg-type]
            extra_body={"chat_template_kwargs": {"reasoning_effort": "high", "custom_flag": [1, "a"]}},
        )
    assert prompt_of(engine).endswith('<|im_start|>assistant\n[effort=high flag=[1, "a"]]')


DOCS_TEMPLATE = CHATML + (
    "{% if documents %}[docs:{% for d in documents %} {{ d.title }}={{ d.text }}{% endfor %}]{% endif %}"
)
DOCS = [{"title": "Paris", "text": "Sunny, 21 C."}, {"title": "Tokyo", "text": "Rain."}]


def test_documents_reach_the_template() -> None:
    """`documents` (retrieval-augmented templates: Cohere, Granite) through chat and /v1/tokenize."""
    engine = TokenizingEngine()
    engine.chat_template = DOCS_TEMPLATE
    with serve_in_thread(engine) as url:
        client(url).chat.completions.create(
            model="x",
            messages=MSG,  # type: ignore[arg-type]
            extra_body={"documents": DOCS},
        )
        assert prompt_of(engine).endswith("[docs: Paris=Sunny, 21 C. Tokyo=Rain.]")
        without = httpx.post(url + "/v1/tokenize", json={"messages": MSG})
        with_docs = httpx.post(url + "/v1/tokenize", json={"messages": MSG, "documents": DOCS})
        assert without.status_code == with_docs.status_code == 200
        assert with_docs.json()["count"] > without.json()["count"]
        bad = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "documents": "not a list"})
        assert bad.status_code == 400
        assert set(bad.json()["error"]) >= {"message", "type", "param", "code"}


# ---- raise_exception is the caller's 400 ----

REFUSING = "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}" + CHATML


@pytest.mark.parametrize("stream", [False, True])
def test_raise_exception_is_a_400_in_the_openai_shape(stream: bool) -> None:
    engine = ScriptedEngine()
    engine.chat_template = REFUSING
    messages = [{"role": "system", "content": "Be brief."}, *MSG]
    with serve_in_thread(engine) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": messages, "stream": stream})
        with pytest.raises(openai.BadRequestError, match="System role not supported"):
            client(url).chat.completions.create(model="x", messages=messages)  # type: ignore[arg-type]
    assert r.status_code == 400
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["message"] == "System role not supported"
    assert err["type"] == "invalid_request_error"
    assert not engine.requests


@pytest.mark.parametrize("stream", [False, True])
def test_raise_exception_is_a_400_in_the_anthropic_shape(stream: bool) -> None:
    engine = ScriptedEngine()
    engine.chat_template = REFUSING
    body = {"model": "x", "max_tokens": 5, "system": "Be brief.", "messages": MSG, "stream": stream}
    with serve_in_thread(engine) as url:
        r = httpx.post(url + "/v1/messages", json=body)
        sdk = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.BadRequestError, match="System role not supported"):
            sdk.messages.create(model="x", max_tokens=5, system="Be brief.", messages=MSG)  # type: ignore[arg-type]
    assert r.status_code == 400
    assert r.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "System role not supported"},
    }
    assert not engine.requests


# ---- thinking on / off ----

QWEN3 = CHATML + (
    "{% if add_generation_prompt and enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n{% endif %}"
)
# Qwen3.5 / Qwen3-Thinking style: thinking on leaves `<think>` open in the prompt.
QWEN35 = CHATML + (
    "{% if add_generation_prompt %}{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}{% endif %}"
)
# DeepSeek V3.1 style: `<think>` or `</think>` right after the assistant header.
DEEPSEEK = CHATML + "{% if add_generation_prompt %}{% if thinking %}<think>{% else %}</think>{% endif %}{% endif %}"

THINKING_CASES = [
    # (template, parser, kwargs, model output, reasoning_content, content)
    (QWEN3, "qwen3", {"enable_thinking": True}, "<think>The user wants a capital.</think>Paris.", True),
    (QWEN3, "qwen3", {"enable_thinking": False}, "Paris.", False),
    (QWEN35, "qwen3", {"enable_thinking": True}, "The user wants a capital.</think>Paris.", True),
    (QWEN35, "qwen3", {"enable_thinking": False}, "Paris.", False),
    (DEEPSEEK, "deepseek_r1", {"thinking": True}, "The user wants a capital.</think>Paris.", True),
    (DEEPSEEK, "deepseek_r1", {"thinking": False}, "Paris.", False),
]


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize(
    ("template", "parser", "kwargs", "output", "thinks"),
    THINKING_CASES,
    ids=["qwen3-on", "qwen3-off", "qwen3.5-on", "qwen3.5-off", "deepseek-on", "deepseek-off"],
)
def test_thinking_on_and_off(template: str, parser: str, kwargs: Any, output: str, thinks: bool, stream: bool) -> None:
    engine = ScriptedEngine([output[i : i + 3] for i in range(0, len(output), 3)])
    engine.chat_template = template
    body = {"messages": MSG, "stream": stream, "chat_template_kwargs": kwargs}
    with serve_in_thread(engine, reasoning_parser=parser) as url:
        r = httpx.post(url + "/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    if stream:
        deltas = [
            json.loads(line[6:])["choices"][0]["delta"] for line in r.text.splitlines() if line.startswith("data: {")
        ]
        reasoning = "".join(d.get("reasoning_content") or "" for d in deltas) or None
        content = "".join(d.get("content") or "" for d in deltas)
    else:
        msg = r.json()["choices"][0]["message"]
        reasoning, content = msg.get("reasoning_content"), msg["content"]
    assert content == "Paris."
    assert reasoning == ("The user wants a capital." if thinks else None)
    # the kwarg decided the prompt's tail
    closed = prompt_of(engine).endswith("</think>\n\n") or prompt_of(engine).endswith("</think>")
    assert closed is not thinks
