"""A scripted engine that answers the way a tool-using model does, for the client-framework tests.

It reads the rendered prompt of the current turn (everything after the last user message), in
which ``k`` tool results have come back so far:

1. tools declared and a ``k``-th entry in ``calls``: those calls, in Hermes form
   (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``), so serve it with
   ``tool_parser="hermes"``; an entry is one ``(name, arguments)`` call or a list of them;
2. else, structured output asked for (``json_schema`` in the sampling parameters) and ``data``
   scripted: ``data`` as JSON;
3. else, a tool result in the turn: the final answer, ``answer`` with ``{result}`` filled in
   (the results joined by "; ");
4. else ``text``.

With ``think``, every reply opens with ``<think>{think}</think>`` (serve with a reasoning parser).

It enforces nothing but by default says it takes Lark grammars, as smgpy's MLX engine does: forced
tool calls then reach it as a grammar for Hermes calls (which it writes anyway), and a
``json_schema`` always means the client's own structured output. With ``lark_grammars=False`` (an
engine that takes JSON Schemas only, as sglang's) forced calls reach it as a ``json_schema`` too,
and the server reads the Hermes calls it writes all the same. Output is cut into 3-character tokens so that streams
carry many deltas, and markers are split across them.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from conftest import function_tool
from engines import ScriptedEngine
from pydantic import BaseModel

# ChatML with the tools in a system block, calls in Hermes form and tool results wrapped, as
# Qwen's and Hermes' templates render them.
TEMPLATE = (
    "{% macro text(c) %}{% if c is string %}{{ c }}{% elif c %}{% for p in c %}{{ p.text }}{% endfor %}"
    "{% endif %}{% endmacro %}"
    "{% if tools %}<|im_start|>system\n<tools>\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}"
    "</tools><|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.role == 'tool' %}<tool_response>{{ text(m.content) }}</tool_response>"
    "{% else %}{{ text(m.content) }}{% for c in m.tool_calls or [] %}"
    "<tool_call>{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}</tool_call>"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

Call = tuple[str, dict[str, Any]]
TOOL_RESULT = re.compile(r"<tool_response>(.*?)</tool_response>", re.S)


def tokens(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class AgentEngine(ScriptedEngine):
    chat_template = TEMPLATE

    def __init__(
        self,
        *,
        text: str = "Hello from the scripted model.",
        calls: Sequence[Call | list[Call]] = (),
        answer: str = "The tool said: {result}",
        data: dict[str, Any] | None = None,
        think: str | None = None,
        lark_grammars: bool = True,
    ) -> None:
        super().__init__()
        self.text = text
        self.calls = [c if isinstance(c, list) else [c] for c in calls]
        self.answer = answer
        self.data = data
        self.think = think
        self.lark_grammars = lark_grammars

    def reply(self, prompt: str, sampling_params: dict[str, Any]) -> str:
        turn = prompt.rsplit("<|im_start|>user\n", 1)[-1]
        results = TOOL_RESULT.findall(turn)
        if len(results) < len(self.calls) and "<tools>" in prompt:
            return "".join(
                "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"
                for name, arguments in self.calls[len(results)]
            )
        if "json_schema" in sampling_params and self.data is not None:
            return json.dumps(self.data)
        if results:
            return self.answer.format(result="; ".join(results))
        return self.text

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        reply = self.reply(obj.text, obj.sampling_params)
        if self.think is not None:
            reply = f"<think>{self.think}</think>{reply}"
        self.script = tokens(reply)
        async for out in super().generate_request(obj):
            yield out


# What the framework tests share: the structured output they parse into ``City``, the tool they
# declare (``get_weather``), and a plain chat with a system instruction.


class City(BaseModel):
    name: str
    country: str
    population: int


PARIS = {"name": "Paris", "country": "France", "population": 2102650}


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny and 21 C in {city}"


# `get_weather` as a chat completion's `tools` entry, for the clients that declare tools as JSON.
WEATHER_TOOL = function_tool("get_weather", "The weather in a city.", city="string")


def assert_plain_chat_prompt(engine: AgentEngine) -> None:
    """The first prompt carries the system instruction "Answer in one sentence." and ends with the
    question "What is the capital of France?" and the assistant's turn, in ChatML."""
    prompt = engine.requests[0].text
    assert "<|im_start|>system\nAnswer in one sentence.<|im_end|>" in prompt
    assert prompt.endswith("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")
