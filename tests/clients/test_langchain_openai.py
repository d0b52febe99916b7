"""langchain-openai against smgpy: `ChatOpenAI(base_url=...)` on Chat Completions (its default for
a model name it does not know) and on the Responses API (`use_responses_api=True`)."""

from __future__ import annotations

import json

import agent_engine
import pytest
from agent_engine import PARIS, AgentEngine, City, assert_plain_chat_prompt
from conftest import serve_in_thread
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

APIS = ["chat", "responses"]


def chat_model(url: str, api: str, **kwargs: object) -> ChatOpenAI:
    return ChatOpenAI(
        model="scripted",
        base_url=url + "/v1",
        api_key="x",  # type: ignore[arg-type]
        max_retries=0,
        timeout=30,
        use_responses_api=api == "responses",
        **kwargs,  # type: ignore[arg-type]
    )


get_weather = tool(agent_engine.get_weather)


@pytest.mark.parametrize("api", APIS)
def test_plain_chat(api: str) -> None:
    engine = AgentEngine(text="Paris is the capital of France.")
    with serve_in_thread(engine) as url:
        messages = [SystemMessage("Answer in one sentence."), HumanMessage("What is the capital of France?")]
        reply = chat_model(url, api).invoke(messages)
    assert isinstance(reply, AIMessage) and reply.text == "Paris is the capital of France."
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["input_tokens"] == 7 and reply.usage_metadata["output_tokens"] == 11
    assert reply.usage_metadata["total_tokens"] == 18
    assert_plain_chat_prompt(engine)


@pytest.mark.parametrize("api", APIS)
def test_streamed_chat(api: str) -> None:
    text = "Paris is the capital of France."
    with serve_in_thread(AgentEngine(text=text)) as url:
        chunks = list(chat_model(url, api, stream_usage=True).stream("Capital of France?"))
    assert sum(1 for c in chunks if c.text) > 1
    assert "".join(c.text for c in chunks) == text
    total = chunks[0]
    for c in chunks[1:]:
        total += c
    assert total.text == text
    assert total.usage_metadata is not None
    assert total.usage_metadata["input_tokens"] == 7 and total.usage_metadata["output_tokens"] == 11


def run_tool_loop(llm: ChatOpenAI, stream: bool) -> list[BaseMessage]:
    """The tool-calling loop of LangChain's tool docs: call the model with the tools bound, run each
    tool call it asks for, send the results back, until it answers."""
    bound = llm.bind_tools([get_weather])
    messages: list[BaseMessage] = [HumanMessage("Weather in Paris?")]
    for _ in range(3):
        if stream:
            chunks = list(bound.stream(messages))
            reply: AIMessage = chunks[0]
            for c in chunks[1:]:
                reply += c  # type: ignore[assignment]
        else:
            reply = bound.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            break
        messages.extend(get_weather.invoke(call) for call in reply.tool_calls)
    return messages


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_tool_calling_loop(api: str, stream: bool) -> None:
    engine = AgentEngine(calls=[("get_weather", {"city": "Paris"})], answer="In Paris it is {result}.")
    with serve_in_thread(engine, tool_parser="hermes") as url:
        messages = run_tool_loop(chat_model(url, api), stream)
    _, call_message, result, final = messages
    assert isinstance(call_message, AIMessage)
    if stream:
        assert isinstance(call_message, AIMessageChunk)
    [call] = call_message.tool_calls
    assert call["name"] == "get_weather" and call["args"] == {"city": "Paris"}
    assert (call["id"] or "").startswith("call_")
    assert isinstance(result, ToolMessage) and result.tool_call_id == call["id"]
    assert result.content == "sunny and 21 C in Paris"
    assert isinstance(final, AIMessage) and final.text == "In Paris it is sunny and 21 C in Paris."
    assert not final.tool_calls
    second = engine.requests[1].text
    assert '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>' in second
    assert "<tool_response>sunny and 21 C in Paris</tool_response>" in second


@pytest.mark.parametrize("api", APIS)
def test_structured_output_with_function_calling(api: str) -> None:
    # A forced call to a tool named after the schema.
    engine = AgentEngine(calls=[("City", PARIS)])
    with serve_in_thread(engine, tool_parser="hermes") as url:
        llm = chat_model(url, api).with_structured_output(City, method="function_calling")
        city = llm.invoke("Tell me about Paris.")
    assert city == City(**PARIS)
    assert "ebnf" in engine.requests[0].sampling_params  # the call was forced


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("method", [None, "json_mode"], ids=["default", "json_mode"])
def test_structured_output_with_response_format(api: str, method: str | None) -> None:
    # ChatOpenAI's default method is json_schema (response_format / text.format).
    engine = AgentEngine(data=PARIS)
    with serve_in_thread(engine) as url:
        kwargs = {"method": method} if method else {}
        llm = chat_model(url, api).with_structured_output(City, include_raw=True, **kwargs)  # type: ignore[arg-type]
        out = llm.invoke("Tell me about Paris, in JSON.")
    assert out["parsed"] == City(**PARIS) and out["parsing_error"] is None  # type: ignore[index]
    assert json.loads(out["raw"].text) == PARIS  # type: ignore[index]
    schema = json.loads(engine.requests[0].sampling_params["json_schema"])
    if method is None:
        assert schema["properties"].keys() == {"name", "country", "population"}
    else:
        assert schema == {"type": "object"}


# langchain-openai dumps the SDK's stream events, whose `parsed` field is typed None
# (langchain-ai/langchain#35538); the warning is the client's own.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("api", APIS)
def test_structured_output_streamed(api: str) -> None:
    with serve_in_thread(AgentEngine(data=PARIS)) as url:
        llm = chat_model(url, api).with_structured_output(City, method="json_schema")
        parts = list(llm.stream("Tell me about Paris."))
    assert parts[-1] == City(**PARIS)
