"""Client prompt-cache hints reach the engine: OpenAI's ``prompt_cache_key`` (Chat Completions and
Responses) and Anthropic's ``cache_control`` breakpoints (system, tools, messages), the latter as
prompt token positions that are true prefixes of the prompt the engine runs.

What the MLX engine does with them (pinning, snapshots) is tested in ``test_mlx_prefix_cache.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import pytest
from conftest import demo_gguf, serve_in_thread
from engines import CHATML, ScriptedEngine
from smgpy._native import Tokenizer

SYSTEM = "You are a careful agent. " + " ".join(f"Rule {i}: keep item {i} tidy." for i in range(30))
TOOL = {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}


@pytest.fixture(scope="module")
def native() -> Tokenizer:
    from smgpy.mlx import resolve_model

    model_dir = resolve_model(str(demo_gguf()))[0]
    return Tokenizer.from_file(f"{model_dir}/tokenizer.json", None)


def ids_engine(native: Tokenizer) -> ScriptedEngine:
    class IdsEngine(ScriptedEngine):
        tokenizer = native
        accepts_input_ids = True
        chat_template = CHATML

    return IdsEngine(["ok"])


def test_anthropic_breakpoints_become_prompt_positions(native: Tokenizer) -> None:
    engine = ids_engine(native)
    with serve_in_thread(engine) as url:
        client = anthropic.Anthropic(base_url=url, api_key="x")
        client.messages.create(
            model="m",
            max_tokens=4,
            system=[{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "first question", "cache_control": {"type": "ephemeral"}}],
                },
                {"role": "assistant", "content": "first answer"},
                {"role": "user", "content": "second question"},
            ],
        )
        obj = engine.requests[-1]
        ids = obj.input_ids
        marks = obj.cache_breakpoints
        assert len(marks) == 2 and 0 < marks[0] < marks[1] < len(ids)
        full = native.decode(ids)
        head, turn = native.decode(ids[: marks[0]]), native.decode(ids[: marks[1]])
        assert full.startswith(head) and full.startswith(turn)
        assert SYSTEM in head and "first question" not in head
        assert "first question" in turn and "first answer" not in turn

        # A breakpoint on a tool marks the system turn the tools are rendered into.
        client.messages.create(
            model="m",
            max_tokens=4,
            system=SYSTEM,
            tools=[{**TOOL, "cache_control": {"type": "ephemeral"}}],
            messages=[{"role": "user", "content": "hello"}],
        )
        obj = engine.requests[-1]
        assert len(obj.cache_breakpoints) == 1
        assert SYSTEM in native.decode(obj.input_ids[: obj.cache_breakpoints[0]])

        # No hints, no attributes set.
        client.messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": "hello"}])
        assert engine.requests[-1].cache_breakpoints is None


def test_bad_cache_control_is_a_400_in_anthropic_shape(native: Tokenizer) -> None:
    engine = ids_engine(native)
    with serve_in_thread(engine) as url:
        client = anthropic.Anthropic(base_url=url, api_key="x")
        with pytest.raises(anthropic.BadRequestError) as err:
            client.messages.create(
                model="m",
                max_tokens=4,
                messages=[
                    {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": {"type": "forever"}}]}
                ],
            )
        assert err.value.body["type"] == "error"  # type: ignore[index]
        assert "cache_control" in err.value.body["error"]["message"]  # type: ignore[index]
        five = [
            {"role": "user", "content": [{"type": "text", "text": f"q{i}", "cache_control": {"type": "ephemeral"}}]}
            for i in range(5)
        ]
        with pytest.raises(anthropic.BadRequestError):
            client.messages.create(model="m", max_tokens=4, messages=five)
    assert not engine.requests


def test_openai_prompt_cache_key_reaches_the_engine(native: Tokenizer) -> None:
    engine = ids_engine(native)
    with serve_in_thread(engine) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x")
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4, prompt_cache_key="session-1"
        )
        assert engine.requests[-1].prompt_cache_key == "session-1"
        client.responses.create(model="m", input="hi", max_output_tokens=4, prompt_cache_key="session-2")
        assert engine.requests[-1].prompt_cache_key == "session-2"
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        assert engine.requests[-1].prompt_cache_key is None
        n = len(engine.requests)
        for call in (
            lambda: client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}], prompt_cache_key="k" * 1025
            ),
            lambda: client.responses.create(model="m", input="hi", prompt_cache_key="k" * 1025),
        ):
            with pytest.raises(openai.BadRequestError) as err:
                call()
            assert err.value.body["param"] == "prompt_cache_key"  # type: ignore[index]
        assert len(engine.requests) == n


def test_an_engine_request_class_without_hint_fields_still_serves() -> None:
    """sglang-style request classes do not know the hints: they are set as attributes when the
    object takes them and dropped when it does not, never a failed request."""

    @dataclass(slots=True)
    class Strict:
        text: str | None = None
        input_ids: list[int] | None = None
        sampling_params: dict[str, Any] = field(default_factory=dict)
        stream: bool = True
        return_logprob: bool = False
        top_logprobs_num: int = 0
        rid: str | None = None

    engine = ScriptedEngine(["ok"])
    with serve_in_thread(engine, request_class=Strict) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x")
        out = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=4, prompt_cache_key="session-1"
        )
        assert out.choices[0].message.content == "ok"
        assert isinstance(engine.requests[-1], Strict)
