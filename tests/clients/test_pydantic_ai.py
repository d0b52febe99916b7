"""pydantic-ai against smgpy: `OpenAIChatModel` (its model for OpenAI-compatible servers) and
`OpenAIResponsesModel` (what `openai:` model names use), each through `OpenAIProvider(base_url=...)`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agent_engine import PARIS, AgentEngine, City, assert_plain_chat_prompt, get_weather
from conftest import serve_in_thread
from pydantic import BaseModel
from pydantic_ai import Agent, NativeOutput, PromptedOutput, ToolOutput
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models import Model
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

APIS = ["chat", "responses"]


def model(url: str, api: str) -> Model:
    provider = OpenAIProvider(base_url=url + "/v1", api_key="x")
    return (
        OpenAIChatModel("scripted", provider=provider)
        if api == "chat"
        else OpenAIResponsesModel("scripted", provider=provider)
    )


@pytest.mark.parametrize("api", APIS)
def test_plain_chat(api: str) -> None:
    engine = AgentEngine(text="Paris is the capital of France.")
    with serve_in_thread(engine) as url:
        agent = Agent(model(url, api), instructions="Answer in one sentence.")
        result = agent.run_sync("What is the capital of France?")
    assert result.output == "Paris is the capital of France."
    usage = result.usage
    assert usage.requests == 1 and usage.input_tokens == 7 and usage.output_tokens > 0
    assert_plain_chat_prompt(engine)


@pytest.mark.parametrize("api", APIS)
def test_streamed_chat(api: str) -> None:
    text = "Paris is the capital of France."

    async def main(url: str) -> tuple[list[str], str, int]:
        agent = Agent(model(url, api))
        async with agent.run_stream("Capital of France?") as result:
            deltas = [d async for d in result.stream_text(delta=True, debounce_by=None)]
            output = await result.get_output()
        return deltas, output, result.usage.output_tokens

    with serve_in_thread(AgentEngine(text=text)) as url:
        deltas, output, output_tokens = asyncio.run(main(url))
    assert len(deltas) > 1 and "".join(deltas) == text
    assert output == text
    assert output_tokens == len(text) // 3 + 1  # 3-character tokens


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
def test_tool_calling_loop(api: str, stream: bool) -> None:
    engine = AgentEngine(calls=[("get_weather", {"city": "Paris"})], answer="In Paris it is {result}.")

    async def main(url: str) -> tuple[str, list[Any]]:
        agent = Agent(model(url, api), tools=[get_weather])
        if not stream:
            result = await agent.run("Weather in Paris?")
            return result.output, result.all_messages()
        async with agent.run_stream("Weather in Paris?") as streamed:
            output = await streamed.get_output()
        return output, streamed.all_messages()

    with serve_in_thread(engine, tool_parser="hermes") as url:
        output, messages = asyncio.run(main(url))
    assert output == "In Paris it is sunny and 21 C in Paris."
    _, call_response, tool_request, final = messages
    assert isinstance(call_response, ModelResponse) and isinstance(tool_request, ModelRequest)
    [call] = call_response.parts
    assert isinstance(call, ToolCallPart) and call.tool_name == "get_weather"
    assert call.args_as_dict() == {"city": "Paris"} and call.tool_call_id.startswith("call_")
    [ret] = tool_request.parts
    assert isinstance(ret, ToolReturnPart) and ret.tool_call_id == call.tool_call_id
    assert ret.content == "sunny and 21 C in Paris"
    assert isinstance(final, ModelResponse) and isinstance(final.parts[-1], TextPart)
    assert "<tool_response>sunny and 21 C in Paris</tool_response>" in engine.requests[1].text


@pytest.mark.parametrize("api", APIS)
def test_structured_output_through_an_output_tool(api: str) -> None:
    # pydantic-ai's default for a model output: a `final_result` tool the model must call.
    engine = AgentEngine(calls=[("final_result", PARIS)])
    with serve_in_thread(engine, tool_parser="hermes") as url:
        result = Agent(model(url, api), output_type=City).run_sync("Tell me about Paris.")
    assert result.output == City(**PARIS)
    assert "ebnf" in engine.requests[0].sampling_params  # the call was forced (tool_choice required)


@pytest.mark.parametrize("api", APIS)
def test_structured_output_streamed(api: str) -> None:
    async def main(url: str) -> tuple[list[City], City]:
        agent = Agent(model(url, api), output_type=ToolOutput(City))
        async with agent.run_stream("Tell me about Paris.") as result:
            partial = [c async for c in result.stream_output(debounce_by=None)]
            return partial, await result.get_output()

    with serve_in_thread(AgentEngine(calls=[("final_result", PARIS)]), tool_parser="hermes") as url:
        partial, output = asyncio.run(main(url))
    assert output == City(**PARIS)
    assert partial and partial[-1] == output


@pytest.mark.parametrize("api", APIS)
def test_native_structured_output(api: str) -> None:
    engine = AgentEngine(data=PARIS)
    with serve_in_thread(engine) as url:
        result = Agent(model(url, api), output_type=NativeOutput(City)).run_sync("Tell me about Paris.")
    assert result.output == City(**PARIS)
    schema = json.loads(engine.requests[0].sampling_params["json_schema"])
    assert schema["properties"].keys() == {"name", "country", "population"}


@pytest.mark.parametrize("api", APIS)
def test_prompted_structured_output(api: str) -> None:
    # The schema goes in the instructions and the model answers in JSON text.
    engine = AgentEngine(text=json.dumps(PARIS))
    with serve_in_thread(engine) as url:
        result = Agent(model(url, api), output_type=PromptedOutput(City)).run_sync("Tell me about Paris.")
    assert result.output == City(**PARIS)
    assert '"population"' in engine.requests[0].text


class Trip(BaseModel):
    destination: City
    stops: list[City]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("lark", [True, False], ids=["lark-engine", "json-schema-engine"])
def test_nested_model_output(api: str, lark: bool) -> None:
    # Nested models put `$defs` in the output tool's schema, referenced as `#/$defs/City`.
    trip = {"destination": PARIS, "stops": [PARIS]}
    engine = AgentEngine(calls=[("final_result", trip)], lark_grammars=lark)
    with serve_in_thread(engine, tool_parser="hermes") as url:
        result = Agent(model(url, api), output_type=Trip).run_sync("Plan a trip to Paris.")
    assert result.output == Trip(**trip)  # type: ignore[arg-type]
