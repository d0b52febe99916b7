"""instructor against smgpy: `instructor.from_openai(OpenAI(base_url=...))` in each mode that
reaches an OpenAI-compatible server (forced tool calls by default, response_format, Markdown
JSON, and the Responses API), plain and streamed, and its re-ask loop on a validation error."""

from __future__ import annotations

import json

import instructor
import openai
import pytest
from agent_engine import AgentEngine
from conftest import serve_in_thread
from pydantic import BaseModel, field_validator


class City(BaseModel):
    name: str
    country: str
    population: int

    @field_validator("population")
    @classmethod
    def positive(cls, v: int) -> int:
        if v <= 0:
            raise ValueError("the population must be positive")
        return v


PARIS = {"name": "Paris", "country": "France", "population": 2102650}
ASK = [{"role": "user", "content": "Tell me about Paris."}]
MODES = [
    instructor.Mode.TOOLS,
    instructor.Mode.TOOLS_STRICT,
    instructor.Mode.JSON,
    instructor.Mode.JSON_SCHEMA,
    instructor.Mode.MD_JSON,
    instructor.Mode.RESPONSES_TOOLS,
]


def paris_engine(tool: str = "City") -> AgentEngine:
    # Whichever way the mode asks: a forced call to the tool instructor declares, JSON under a
    # response_format, or JSON in a Markdown block when nothing is enforced.
    return AgentEngine(calls=[(tool, PARIS)], data=PARIS, text=f"```json\n{json.dumps(PARIS)}\n```")


def client(url: str, mode: instructor.Mode = instructor.Mode.TOOLS) -> instructor.Instructor:
    return instructor.from_openai(openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0), mode=mode)


def test_plain_chat_passes_through() -> None:
    engine = AgentEngine(text="Paris is the capital of France.")
    with serve_in_thread(engine) as url:
        r = client(url).chat.completions.create(model="scripted", messages=ASK, response_model=None)
    assert r.choices[0].message.content == "Paris is the capital of France."
    assert r.usage.prompt_tokens == 7


def test_streamed_chat_passes_through() -> None:
    text = "Paris is the capital of France."
    with serve_in_thread(AgentEngine(text=text)) as url:
        stream = client(url).chat.completions.create(model="scripted", messages=ASK, response_model=None, stream=True)
        deltas = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(deltas) > 1 and "".join(deltas) == text


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_structured_output(mode: instructor.Mode) -> None:
    engine = paris_engine()
    with serve_in_thread(engine, tool_parser="hermes") as url:
        city, raw = client(url, mode).chat.completions.create_with_completion(
            model="scripted", messages=ASK, response_model=City
        )
    assert city.model_dump() == PARIS
    params = engine.requests[0].sampling_params
    if mode in (instructor.Mode.TOOLS, instructor.Mode.TOOLS_STRICT):
        assert "ebnf" in params  # the call to `City` was forced
        assert raw.choices[0].message.tool_calls[0].function.name == "City"
    elif mode == instructor.Mode.RESPONSES_TOOLS:
        assert "ebnf" in params
        assert [(o.type, o.name) for o in raw.output] == [("function_call", "City")]
    elif mode == instructor.Mode.MD_JSON:
        assert "json_schema" not in params
    else:
        assert "json_schema" in params


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_structured_output_streamed(mode: instructor.Mode) -> None:
    # Streamed, instructor asks for `Partial[City]`: its tool is `PartialCity`.
    with serve_in_thread(paris_engine("PartialCity"), tool_parser="hermes") as url:
        partial = list(
            client(url, mode).chat.completions.create_partial(model="scripted", messages=ASK, response_model=City)
        )
    assert len(partial) > 1
    assert partial[-1].model_dump() == PARIS
    # the fields fill in as the stream goes
    assert any(p.population is None for p in partial)


def test_reask_sends_the_validation_error_back() -> None:
    # The first call fails City's validator; instructor sends the error back as the tool's
    # result and the model calls again.
    bad = {**PARIS, "population": -1}
    engine = AgentEngine(calls=[("City", bad), ("City", PARIS)])
    with serve_in_thread(engine, tool_parser="hermes") as url:
        city = client(url).chat.completions.create(model="scripted", messages=ASK, response_model=City, max_retries=2)
    assert city.model_dump() == PARIS
    assert len(engine.requests) == 2
    retry = engine.requests[1].text
    assert '<tool_call>{"name": "City", "arguments": {"name": "Paris", "country": "France", "population": -1}}' in retry
    assert "the population must be positive" in retry.rsplit("<tool_response>", 1)[1]


LONDON = {"name": "London", "country": "United Kingdom", "population": 8866180}


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
def test_iterable(stream: bool) -> None:
    # `create_iterable` asks for one call to `IterableCity`, whose `tasks` items are a `$ref` to
    # City in the schema's `$defs`.
    engine = AgentEngine(calls=[("IterableCity", {"tasks": [PARIS, LONDON]})])
    with serve_in_thread(engine, tool_parser="hermes") as url:
        cities = client(url).chat.completions.create_iterable(
            model="scripted", messages=ASK, response_model=City, stream=stream
        )
        assert [c.model_dump() for c in cities] == [PARIS, LONDON]
