"""What real clients expect, found by running them against smgpy: each test makes the call the
client library makes (the SDK call, not only raw HTTP) against a scripted engine."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import openai
import pytest
from conftest import serve_in_thread
from engines import ScriptedEngine
from smgpy.engine import ContextLengthExceeded

MSG = [{"role": "user", "content": "hi"}]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]
THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined %}[thinking={{ enable_thinking }}]{% endif %}{% endif %}"
)


def oai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=30)


def ant(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=30)


# ----- 1. Anthropic prefill -----


def test_anthropic_prefill_is_continued_not_restated() -> None:
    engine = ScriptedEngine([" Paris", "."])
    with serve_in_thread(engine) as url:
        msg = ant(url).messages.create(
            model="m",
            max_tokens=20,
            messages=[
                {"role": "user", "content": "What is the capital of France?"},
                {"role": "assistant", "content": "The capital of France is"},
            ],
        )
        assert msg.content[0].type == "text" and msg.content[0].text == " Paris."
        prompt = engine.requests[-1].text
        assert prompt.endswith("<|im_start|>assistant\nThe capital of France is"), prompt
        # trailing whitespace in a prefill is refused, as Anthropic's API does
        with pytest.raises(anthropic.BadRequestError, match="trailing whitespace"):
            ant(url).messages.create(
                model="m",
                max_tokens=5,
                messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "{ "}],
            )


# ----- 3. every thinking variant -----


@pytest.mark.parametrize(
    ("thinking", "switch"),
    [
        ({"type": "enabled", "budget_tokens": 1024}, "True"),
        ({"type": "adaptive"}, "True"),
        ({"type": "adaptive", "display": "omitted"}, "True"),
        ({"type": "between_tools"}, "True"),
        ({"type": "disabled"}, "False"),
    ],
)
def test_anthropic_thinking_variants_map_to_the_template_switch(thinking: dict[str, Any], switch: str) -> None:
    class Engine(ScriptedEngine):
        chat_template = THINKING_TEMPLATE

    engine = Engine(["ok"])
    with serve_in_thread(engine) as url:
        ant(url).messages.create(model="m", max_tokens=2000, messages=MSG, thinking=thinking)  # type: ignore[arg-type]
        assert engine.requests[-1].text.endswith(f"[thinking={switch}]")


# ----- 5. routes and error bodies -----


def test_model_by_id_and_stored_input_items() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        client = oai(url)
        assert client.models.retrieve("scripted").id == "scripted"
        with pytest.raises(openai.NotFoundError):
            client.models.retrieve("gpt-9")
        resp = client.responses.create(
            model="m", input=[{"role": "user", "content": "first"}, {"role": "user", "content": "second"}]
        )
        items = client.responses.input_items.list(resp.id)
        texts = [i.content[0].text for i in items.data]  # type: ignore[union-attr]
        assert texts == ["second", "first"]  # newest first, as OpenAI lists them
        asc = client.responses.input_items.list(resp.id, order="asc", limit=1)
        assert [i.content[0].text for i in asc.data] == ["first"] and asc.has_more  # type: ignore[union-attr]


def test_unknown_routes_and_methods_answer_in_the_api_shape() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/v1/nope", json={})
        assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
        r = httpx.get(url + "/v1/chat/completions")
        assert r.status_code == 405 and "GET" in r.json()["error"]["message"]
        r = httpx.get(url + "/v1/messages")
        assert r.status_code == 405 and r.json()["type"] == "error"


# ----- 7. small but visible -----


def test_parallel_tool_calls_false_keeps_the_first_call_under_auto() -> None:
    two = ['<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>']
    two += ['<tool_call>{"name": "get_time", "arguments": {}}</tool_call>']
    with serve_in_thread(ScriptedEngine(two), tool_parser="hermes") as url:
        r = oai(url).chat.completions.create(model="m", messages=MSG, tools=TOOLS, parallel_tool_calls=False)  # type: ignore[arg-type]
        assert [c.function.name for c in r.choices[0].message.tool_calls or []] == ["get_weather"]
        r = oai(url).chat.completions.create(model="m", messages=MSG, tools=TOOLS)  # type: ignore[arg-type]
        assert len(r.choices[0].message.tool_calls or []) == 2


def test_reasoning_tokens_are_counted() -> None:
    script = ["<think>", "step", " one", "</think>", "Answer"]
    with serve_in_thread(ScriptedEngine(script), reasoning_parser="qwen3") as url:
        r = oai(url).chat.completions.create(model="m", messages=MSG)
        details = r.usage.completion_tokens_details if r.usage else None
        assert details is not None and details.reasoning_tokens == 3
        resp = oai(url).responses.create(model="m", input="hi")
        assert resp.usage and resp.usage.output_tokens_details.reasoning_tokens == 3


def test_startup_log_names_the_parsers(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="smgpy")
    with serve_in_thread(ScriptedEngine(), tool_parser="hermes", reasoning_parser="qwen3"):
        pass
    assert "tool parser: hermes, reasoning parser: qwen3" in caplog.text


def test_anthropic_ids_look_like_anthropics() -> None:
    with serve_in_thread(
        ScriptedEngine(['<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>']), tool_parser="hermes"
    ) as url:
        tools = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}]
        msg = ant(url).messages.create(model="m", max_tokens=20, messages=MSG, tools=tools)  # type: ignore[arg-type]
        assert msg.id.startswith("msg_")
        assert msg.content[0].type == "tool_use" and msg.content[0].id.startswith("toolu_")


# ----- 8. strictness where peers agree -----


def test_generation_prompt_and_continue_final_message_together_is_a_400() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        body = {"continue_final_message": True, "add_generation_prompt": True}
        with pytest.raises(openai.BadRequestError) as e:
            oai(url).chat.completions.create(model="m", messages=MSG, extra_body=body)
        assert e.value.body["param"] == "continue_final_message"  # type: ignore[index]
        # continue_final_message alone is fine
        oai(url).chat.completions.create(
            model="m",
            messages=[*MSG, {"role": "assistant", "content": "Sure"}],
            extra_body={"continue_final_message": True},
        )


def test_stream_options_without_stream_is_a_400() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        with pytest.raises(openai.BadRequestError, match="stream_options"):
            oai(url).chat.completions.create(model="m", messages=MSG, stream_options={"include_usage": True})
        r = httpx.post(url + "/v1/completions", json={"prompt": "x", "stream_options": {"include_usage": True}})
        assert r.status_code == 400 and r.json()["error"]["param"] == "stream_options"


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/v1/chat/completions", {"messages": MSG}, "messages"),
        ("/v1/completions", {"prompt": "x"}, "prompt"),
        ("/v1/responses", {"input": "x"}, "input"),
    ],
)
def test_context_overflow_carries_openais_code_and_param(path: str, body: dict[str, Any], param: str) -> None:
    engine = ScriptedEngine(error=ContextLengthExceeded("the prompt has 9000 tokens; the context is 8192"))
    with serve_in_thread(engine) as url:
        r = httpx.post(url + path, json=body)
        err = r.json()["error"]
        assert r.status_code == 400 and err["code"] == "context_length_exceeded" and err["param"] == param


def test_bearer_scheme_is_case_insensitive_and_401_names_it() -> None:
    with serve_in_thread(ScriptedEngine(), api_key="k1") as url:
        for scheme in ("Bearer", "bearer", "BEARER"):
            r = httpx.get(url + "/v1/models", headers={"authorization": f"{scheme} k1"})
            assert r.status_code == 200, scheme
        r = httpx.get(url + "/v1/models")
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"


def test_bodies_are_one_json_document_of_json_type() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        body = json.dumps({"messages": MSG}).encode()
        r = httpx.post(
            url + "/v1/chat/completions", content=body + b'{"x": 1}', headers={"content-type": "application/json"}
        )
        assert r.status_code == 400 and "after the JSON value" in r.json()["error"]["message"]
        r = httpx.post(url + "/v1/chat/completions", content=body, headers={"content-type": "text/plain"})
        assert r.status_code == 415 and "application/json" in r.json()["error"]["message"]
        r = httpx.post(
            url + "/v1/chat/completions", content=body, headers={"content-type": "application/json; charset=utf-8"}
        )
        assert r.status_code == 200


# ----- 9. images -----

IMAGE = "data:image/png;base64,iVBORw0KGgo="


def test_images_on_a_text_only_engine_are_a_400_naming_the_part() -> None:
    engine = ScriptedEngine()
    with serve_in_thread(engine) as url:
        chat = [
            {
                "role": "user",
                "content": [{"type": "text", "text": "what"}, {"type": "image_url", "image_url": {"url": IMAGE}}],
            }
        ]
        with pytest.raises(openai.BadRequestError) as e:
            oai(url).chat.completions.create(model="m", messages=chat)  # type: ignore[arg-type]
        assert e.value.body["param"] == "messages[0].content[1]"  # type: ignore[index]
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
        for content, param in [
            ([image], "messages[0].content[0]"),
            ([{"type": "tool_result", "tool_use_id": "t", "content": [image]}], "messages[2].content[0].content[0]"),
        ]:
            messages: list[dict[str, Any]] = [{"role": "user", "content": content}]
            if param.startswith("messages[2]"):
                call = {"type": "tool_use", "id": "t", "name": "f", "input": {}}
                messages = [{"role": "user", "content": "x"}, {"role": "assistant", "content": [call]}, *messages]
            r = httpx.post(url + "/v1/messages", json={"model": "m", "max_tokens": 5, "messages": messages})
            assert r.status_code == 400 and param in r.text, r.text
        with pytest.raises(openai.BadRequestError) as e:
            oai(url).responses.create(
                model="m",
                input=[{"role": "user", "content": [{"type": "input_image", "image_url": IMAGE}]}],  # type: ignore[list-item]
            )
        assert e.value.body["param"] == "input[0].content[0]"  # type: ignore[index]
        assert not engine.requests


def test_an_engine_that_takes_images_gets_them_in_order() -> None:
    class Vision(ScriptedEngine):
        accepts_images = True
        chat_template = (
            "{% for m in messages %}{{ m['role'] }}:{% if m['content'] is string %}{{ m['content'] }}"
            "{% else %}{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }}{% else %}<image>"
            "{% endif %}{% endfor %}{% endif %}\n{% endfor %}assistant:"
        )

    engine = Vision(["a cat"])
    with serve_in_thread(engine) as url:
        parts = [{"type": "image_url", "image_url": {"url": IMAGE}}, {"type": "text", "text": "and"}]
        parts.append({"type": "image_url", "image_url": {"url": "https://example.com/b.png"}})
        oai(url).chat.completions.create(model="m", messages=[{"role": "user", "content": parts}])  # type: ignore[arg-type]
        req = engine.requests[-1]
        assert req.image_data == [IMAGE, "https://example.com/b.png"]
        assert req.text == "user:<image>and<image>assistant:"  # trim_blocks, as transformers
        ant(url).messages.create(
            model="m",
            max_tokens=5,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "image", "source": {"type": "url", "url": "https://example.com/c.png"}},
                        {"type": "text", "text": "what is it?"},
                    ],
                }
            ],
        )
        assert engine.requests[-1].image_data == ["https://example.com/c.png"]


# ----- 4 and 6: calls cut off by max_tokens, whitespace between calls -----

TWO_CALLS = [
    '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>',
    "\n",
    '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
    "\n",
]


def test_whitespace_between_calls_is_no_item_or_block() -> None:
    with serve_in_thread(ScriptedEngine(TWO_CALLS), tool_parser="hermes") as url:
        resp = oai(url).responses.create(
            model="m",
            input="hi",
            tools=[{"type": "function", "name": "get_weather"}, {"type": "function", "name": "get_time"}],
        )  # type: ignore[list-item]
        assert [i.type for i in resp.output] == ["function_call", "function_call"]
        with oai(url).responses.stream(
            model="m",
            input="hi",
            tools=[{"type": "function", "name": "get_weather"}, {"type": "function", "name": "get_time"}],
        ) as s:  # type: ignore[list-item]
            final = s.get_final_response()
        assert [i.type for i in final.output] == ["function_call", "function_call"]
        tools = [{"name": n, "input_schema": {"type": "object", "properties": {}}} for n in ("get_weather", "get_time")]
        msg = ant(url).messages.create(model="m", max_tokens=50, messages=MSG, tools=tools)  # type: ignore[arg-type]
        assert [b.type for b in msg.content] == ["tool_use", "tool_use"]


def test_a_call_cut_off_by_max_tokens_is_reported_as_cut_off() -> None:
    cut = ['<tool_call>{"name": "get_weather", "arguments": {"city": "Pa', 'ris", "days": ', "3}}</tool_call>"]
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    with serve_in_thread(ScriptedEngine(cut), tool_parser="hermes") as url:
        # Chat: finish_reason length, arguments as far as the model wrote them (never closed up)
        r = oai(url).chat.completions.create(model="m", messages=MSG, tools=tools, max_tokens=2)  # type: ignore[arg-type]
        choice = r.choices[0]
        assert choice.finish_reason == "length"
        call = (choice.message.tool_calls or [])[0]
        assert call.function.name == "get_weather" and call.function.arguments == '{"city":"Paris","days":'
        # Responses: the function_call item is incomplete, as OpenAI marks it
        resp = oai(url).responses.create(
            model="m",
            input="hi",
            tools=[{"type": "function", "name": "get_weather"}],
            max_output_tokens=2,  # type: ignore[list-item]
        )
        assert resp.status == "incomplete" and resp.output[0].type == "function_call"
        assert resp.output[0].status == "incomplete"


def test_a_forced_call_cut_off_never_leaks_its_wrapper_json() -> None:
    cut = ['[{"name": "get_weather", "parameters": {"city": "Pa', 'ris"}}]']
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    with serve_in_thread(ScriptedEngine(cut)) as url:
        r = oai(url).chat.completions.create(
            model="m",
            messages=MSG,
            tools=tools,
            tool_choice="required",
            max_tokens=1,  # type: ignore[arg-type]
        )
        choice = r.choices[0]
        assert choice.finish_reason == "length"
        assert not (choice.message.content or "").strip(), choice.message.content
        assert (choice.message.tool_calls or [])[0].function.name == "get_weather"
