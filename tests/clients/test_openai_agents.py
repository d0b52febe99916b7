"""openai-agents against smgpy: its Responses model (the SDK's default) and its Chat Completions
model, through `OpenAIProvider` with our client, as the SDK documents for other providers.
Tracing is turned off per run (`RunConfig(tracing_disabled=True)`): it would upload to OpenAI."""

from __future__ import annotations

import asyncio
import json

import pytest
from agent_engine import PARIS, AgentEngine, City, assert_plain_chat_prompt
from agents import Agent, ItemHelpers, OpenAIProvider, RunConfig, Runner, function_tool
from agents.items import MessageOutputItem, ReasoningItem, ToolCallItem, ToolCallOutputItem
from conftest import serve_in_thread
from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent
from pydantic import BaseModel

APIS = ["responses", "chat_completions"]


def run_config(url: str, api: str) -> RunConfig:
    client = AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=30)
    provider = OpenAIProvider(openai_client=client, use_responses=api == "responses")
    return RunConfig(model_provider=provider, model="scripted", tracing_disabled=True)


calls: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    calls.append(city)
    return f"sunny and 21 C in {city}"


def test_the_default_model_speaks_the_responses_api() -> None:
    # No use_responses: the provider takes the SDK's default, which is the Responses API.
    engine = AgentEngine(text="Bonjour!")
    with serve_in_thread(engine) as url:
        client = AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=30)
        config = RunConfig(model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True)
        result = Runner.run_sync(Agent(name="a", model="scripted"), "hi", run_config=config)
    assert result.final_output == "Bonjour!"
    assert (result.last_response_id or "").startswith("resp_")


@pytest.mark.parametrize("api", APIS)
def test_plain_chat(api: str) -> None:
    engine = AgentEngine(text="Paris is the capital of France.")
    with serve_in_thread(engine) as url:
        agent = Agent(name="geo", instructions="Answer in one sentence.")
        result = Runner.run_sync(agent, "What is the capital of France?", run_config=run_config(url, api))
    assert result.final_output == "Paris is the capital of France."
    [response] = result.raw_responses
    assert response.usage.input_tokens == 7 and response.usage.output_tokens > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert_plain_chat_prompt(engine)


@pytest.mark.parametrize("api", APIS)
def test_streamed_chat(api: str) -> None:
    text = "Paris is the capital of France."

    async def main(url: str) -> tuple[list[str], object]:
        result = Runner.run_streamed(Agent(name="geo"), "Capital of France?", run_config=run_config(url, api))
        deltas = []
        async for event in result.stream_events():
            if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
                deltas.append(event.data.delta)
        return deltas, result.final_output

    with serve_in_thread(AgentEngine(text=text)) as url:
        deltas, final = asyncio.run(main(url))
    assert len(deltas) > 1 and "".join(deltas) == text
    assert final == text


@pytest.mark.parametrize("api", APIS)
def test_tool_calling_loop(api: str) -> None:
    calls.clear()
    engine = AgentEngine(calls=[("get_weather", {"city": "Paris"})], answer="In Paris it is {result}.")
    with serve_in_thread(engine, tool_parser="hermes") as url:
        agent = Agent(name="weather", tools=[get_weather])
        result = Runner.run_sync(agent, "Weather in Paris?", run_config=run_config(url, api))
    assert calls == ["Paris"]
    assert result.final_output == "In Paris it is sunny and 21 C in Paris."
    call, output, message = result.new_items
    assert isinstance(call, ToolCallItem) and isinstance(output, ToolCallOutputItem)
    assert isinstance(message, MessageOutputItem)
    assert call.raw_item.name == "get_weather" and json.loads(call.raw_item.arguments) == {"city": "Paris"}  # type: ignore[union-attr]
    assert output.raw_item["call_id"] == call.raw_item.call_id  # type: ignore[index, union-attr]
    assert call.raw_item.call_id.startswith("call_")  # type: ignore[union-attr]
    # the second turn carried the call and its result back to the model
    second = engine.requests[1].text
    assert '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>' in second
    assert "<tool_response>sunny and 21 C in Paris</tool_response>" in second
    assert len(result.raw_responses) == 2


@pytest.mark.parametrize("api", APIS)
def test_streamed_tool_calling_loop(api: str) -> None:
    calls.clear()

    async def main(url: str) -> tuple[list[str], object]:
        agent = Agent(name="weather", tools=[get_weather])
        result = Runner.run_streamed(agent, "Weather in Paris?", run_config=run_config(url, api))
        names = []
        async for event in result.stream_events():
            if event.type == "run_item_stream_event":
                names.append(event.name)
                if event.name == "message_output_created":
                    assert isinstance(event.item, MessageOutputItem)
                    names.append(ItemHelpers.text_message_output(event.item))
        return names, result.final_output

    engine = AgentEngine(calls=[("get_weather", {"city": "Paris"})], answer="It is {result}.")
    with serve_in_thread(engine, tool_parser="hermes") as url:
        names, final = asyncio.run(main(url))
    assert calls == ["Paris"]
    assert names == ["tool_called", "tool_output", "message_output_created", "It is sunny and 21 C in Paris."]
    assert final == "It is sunny and 21 C in Paris."


@pytest.mark.parametrize("api", APIS)
def test_structured_output(api: str) -> None:
    engine = AgentEngine(data=PARIS)
    with serve_in_thread(engine) as url:
        agent = Agent(name="geo", output_type=City)
        result = Runner.run_sync(agent, "Tell me about Paris.", run_config=run_config(url, api))
    assert result.final_output == City(**PARIS)
    # the schema reached the engine as the constraint to enforce
    schema = json.loads(engine.requests[0].sampling_params["json_schema"])
    assert schema["properties"].keys() == {"name", "country", "population"}


@pytest.mark.parametrize("api", APIS)
def test_tool_then_structured_output(api: str) -> None:
    calls.clear()
    engine = AgentEngine(calls=[("get_weather", {"city": "Paris"})], data=PARIS)
    with serve_in_thread(engine, tool_parser="hermes") as url:
        agent = Agent(name="geo", tools=[get_weather], output_type=City)
        result = Runner.run_sync(agent, "Paris?", run_config=run_config(url, api))
    assert calls == ["Paris"]
    assert result.final_output == City(**PARIS)


@pytest.mark.parametrize("api", APIS)
def test_parallel_calls_and_reasoning_streamed(api: str) -> None:
    # A reasoning model (qwen3 parser) that calls two tools at once: the SDK runs both, sends the
    # reasoning and both results back, and the second turn answers.
    calls.clear()
    two = [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"})]
    engine = AgentEngine(calls=[two], answer="{result}.", think="Two cities, two calls.")

    async def main(url: str) -> tuple[list[str], object, list[object]]:
        result = Runner.run_streamed(
            Agent(name="w", tools=[get_weather]), "Paris and Tokyo?", run_config=run_config(url, api)
        )
        names = [e.name async for e in result.stream_events() if e.type == "run_item_stream_event"]
        return names, result.final_output, result.new_items

    with serve_in_thread(engine, tool_parser="hermes", reasoning_parser="qwen3") as url:
        names, final, items = asyncio.run(main(url))
    assert calls == ["Paris", "Tokyo"]
    assert names == [
        "reasoning_item_created",
        "tool_called",
        "tool_called",
        "tool_output",
        "tool_output",
        "reasoning_item_created",
        "message_output_created",
    ]
    assert final == "sunny and 21 C in Paris; sunny and 21 C in Tokyo."
    reasoning = items[0]
    assert isinstance(reasoning, ReasoningItem)
    texts = [c.text for c in reasoning.raw_item.content or []] + [s.text for s in reasoning.raw_item.summary]
    assert texts == ["Two cities, two calls."]
    assert "<think>" not in engine.requests[1].text  # the reasoning did not leak into the content


@pytest.mark.parametrize("api", APIS)
def test_handoff(api: str) -> None:
    engine = AgentEngine(calls=[("transfer_to_french", {})], answer="Bonjour ! ({result})")
    with serve_in_thread(engine, tool_parser="hermes") as url:
        french = Agent(name="french", instructions="Speak French.")
        triage = Agent(name="triage", instructions="Hand French speakers over.", handoffs=[french])
        result = Runner.run_sync(triage, "Bonjour", run_config=run_config(url, api))
    assert result.last_agent is french
    assert [type(i).__name__ for i in result.new_items] == ["HandoffCallItem", "HandoffOutputItem", "MessageOutputItem"]
    assert result.final_output == 'Bonjour ! ({"assistant": "french"})'
    assert "<|im_start|>system\nSpeak French.<|im_end|>" in engine.requests[1].text


def test_previous_response_id_continues_a_stored_conversation() -> None:
    engine = AgentEngine(text="Nice to meet you, Ada.")
    with serve_in_thread(engine) as url:
        agent = Agent(name="a")
        first = Runner.run_sync(agent, "My name is Ada.", run_config=run_config(url, "responses"))
        Runner.run_sync(
            agent,
            "What is my name?",
            run_config=run_config(url, "responses"),
            previous_response_id=first.last_response_id,
        )
    assert engine.requests[1].text == (
        "<|im_start|>user\nMy name is Ada.<|im_end|>\n<|im_start|>assistant\nNice to meet you, Ada.<|im_end|>\n"
        "<|im_start|>user\nWhat is my name?<|im_end|>\n<|im_start|>assistant\n"
    )


class Stop(BaseModel):
    city: str
    nights: int


booked: list[Stop] = []


@function_tool
def book(stops: list[Stop]) -> str:
    """Book a trip."""
    booked.extend(stops)
    return f"booked {len(stops)} stops"


@pytest.mark.parametrize("api", APIS)
def test_tool_taking_nested_models(api: str) -> None:
    # The SDK's strict schema for `book` refers to Stop through `$defs`.
    booked.clear()
    stops = [{"city": "Paris", "nights": 2}, {"city": "Lyon", "nights": 1}]
    engine = AgentEngine(calls=[("book", {"stops": stops})])
    with serve_in_thread(engine, tool_parser="hermes") as url:
        result = Runner.run_sync(Agent(name="travel", tools=[book]), "Paris then Lyon", run_config=run_config(url, api))
    assert booked == [Stop(**s) for s in stops]  # type: ignore[arg-type]
    assert result.final_output == "The tool said: booked 2 stops"
