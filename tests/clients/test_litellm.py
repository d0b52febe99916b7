"""litellm against smgpy: `completion(model="openai/...", api_base=...)`, its way to call an
OpenAI-compatible server, and its Responses API (`litellm.responses`)."""

from __future__ import annotations

import json
import os

# litellm downloads its model cost map when imported unless told to use the copy it ships; the
# tests reach no network but loopback. Set before the import below, for this test process.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

import litellm  # noqa: E402
import pytest  # noqa: E402
from agent_engine import PARIS, WEATHER_TOOL, AgentEngine, City, get_weather  # noqa: E402
from conftest import serve_in_thread  # noqa: E402

# A module litellm imports on first use declares `ReadOnly` TypedDict items, which pydantic warns about.
pytestmark = pytest.mark.filterwarnings("ignore:Items? .* (is|are) using the `ReadOnly` qualifier:UserWarning")

MODEL = "openai/scripted"


def options(url: str) -> dict[str, object]:
    return {"model": MODEL, "api_base": url + "/v1", "api_key": "x", "timeout": 30, "num_retries": 0}


TOOLS = [WEATHER_TOOL]


QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def test_plain_chat() -> None:
    engine = AgentEngine(text="Paris is the capital of France.")
    with serve_in_thread(engine) as url:
        messages = [{"role": "system", "content": "Answer in one sentence."}, *QUESTION]
        r = litellm.completion(messages=messages, **options(url))
    assert r.choices[0].message.content == "Paris is the capital of France."
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens == 7 and r.usage.completion_tokens == 11 and r.usage.total_tokens == 18
    prompt = engine.requests[0].text
    assert "<|im_start|>system\nAnswer in one sentence.<|im_end|>" in prompt


def test_streamed_chat() -> None:
    text = "Paris is the capital of France."
    with serve_in_thread(AgentEngine(text=text)) as url:
        stream = litellm.completion(
            messages=QUESTION, stream=True, stream_options={"include_usage": True}, **options(url)
        )
        chunks = list(stream)
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(deltas) > 1 and "".join(deltas) == text
    full = litellm.stream_chunk_builder(chunks, messages=QUESTION)
    assert full is not None
    assert full.choices[0].message.content == text and full.choices[0].finish_reason == "stop"
    assert full.usage.prompt_tokens == 7 and full.usage.completion_tokens == 11


def run_tool_loop(url: str, stream: bool) -> list[dict[str, object]]:
    """litellm's function-calling loop: ask with tools, run the calls, send the results back."""
    messages: list[dict[str, object]] = [{"role": "user", "content": "Weather in Paris?"}]
    for _ in range(3):
        if stream:
            chunks = list(litellm.completion(messages=messages, tools=TOOLS, stream=True, **options(url)))
            r = litellm.stream_chunk_builder(chunks, messages=messages)
            assert r is not None
        else:
            r = litellm.completion(messages=messages, tools=TOOLS, **options(url))
        message = r.choices[0].message
        messages.append(message.model_dump())
        if not message.tool_calls:
            break
        assert r.choices[0].finish_reason == "tool_calls"
        for call in message.tool_calls:
            assert call.function.name == "get_weather"
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return messages


def test_tool_calling_loop() -> None:
    for stream in (False, True):
        engine = AgentEngine(calls=[("get_weather", {"city": "Paris"})], answer="In Paris it is {result}.")
        with serve_in_thread(engine, tool_parser="hermes") as url:
            _, call_message, result, final = run_tool_loop(url, stream)
        [call] = call_message["tool_calls"]  # type: ignore[misc]
        assert call["function"]["name"] == "get_weather"
        assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
        assert call["id"].startswith("call_") and result["tool_call_id"] == call["id"]
        assert final["content"] == "In Paris it is sunny and 21 C in Paris.", stream
        second = engine.requests[1].text
        assert "<tool_response>sunny and 21 C in Paris</tool_response>" in second


def test_parallel_tool_calls() -> None:
    calls = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"})]
    engine = AgentEngine(calls=[calls], answer="{result}.")
    with serve_in_thread(engine, tool_parser="hermes") as url:
        *_, final = run_tool_loop(url, stream=True)
    assert final["content"] == "sunny and 21 C in Paris; sunny and 21 C in Tokyo."


def test_structured_output() -> None:
    engine = AgentEngine(data=PARIS)
    with serve_in_thread(engine) as url:
        r = litellm.completion(messages=QUESTION, response_format=City, **options(url))
    assert City.model_validate_json(r.choices[0].message.content) == City(**PARIS)
    schema = json.loads(engine.requests[0].sampling_params["json_schema"])
    assert schema["properties"].keys() == {"name", "country", "population"}


def test_responses_api() -> None:
    engine = AgentEngine(text="Paris is the capital of France.")
    with serve_in_thread(engine) as url:
        r = litellm.responses(input="What is the capital of France?", **options(url))
    assert r.output[0].content[0].text == "Paris is the capital of France."  # type: ignore[union-attr]
    assert r.usage.input_tokens == 7 and r.usage.output_tokens == 11
