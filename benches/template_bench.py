"""Chat-template rendering throughput: smgpy vs transformers, side by side in one run.

For a few real templates and a long conversation (system prompt, tools, 50 turns with tool calls), measure
renders per second of ``smgpy._native.ChatTemplate.render`` and of transformers' own render path
(``transformers.utils.chat_template_utils.render_jinja_template``, which ``apply_chat_template`` calls), after
checking both produce the same text. The two engines run in alternated rounds; rates and the ratio are medians
over rounds. Run: ``python benches/template_bench.py [--seconds 4] [--rounds 8]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from smgpy import _native
from transformers.utils.chat_template_utils import render_jinja_template

TEMPLATES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "chat_templates"
CANDIDATES = [
    ("Qwen3-Coder", "Qwen3-Coder.jinja"),
    ("Llama 3.1 JSON tools", "tool_chat_template_llama3.1_json.jinja"),
    ("DeepSeek V3.1", "deepseek-ai-DeepSeek-V3.1.jinja"),
    ("GLM-4.6", "GLM-4.6.jinja"),
    ("Kimi K2", "moonshotai-Kimi-K2.jinja"),
]
SPECIAL_TOKENS: dict[str, Any] = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Tool {name}: does something useful with a query and a few options.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look up"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    "filters": {
                        "type": "object",
                        "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
                    },
                },
                "required": ["query"],
            },
        },
    }
    for name in ["search_docs", "get_weather", "create_event", "read_file", "run_tests"]
]


def long_conversation(turns: int = 50, string_arguments: bool = False) -> list[dict[str, Any]]:
    """A system prompt, then `turns` user/assistant exchanges; every fifth answer goes through a tool call.
    Some templates (DeepSeek V3.1) concatenate tool arguments, so they get them as a JSON string."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a helpful assistant. " * 20}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Question {i}: " + "please explain this in detail. " * 10})
        if i % 5 == 4:
            arguments: Any = {"query": f"topic {i}", "limit": 5, "filters": {"tags": ["a", "b"]}}
            if string_arguments:
                arguments = json.dumps(arguments)
            call = {"name": "search_docs", "arguments": arguments}
            messages.append(
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": f"c{i}", "type": "function", "function": call}],
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps({"results": ["x" * 40] * 3})}
            )
        messages.append({"role": "assistant", "content": f"Answer {i}: " + "here is a thorough explanation. " * 12})
    messages.append({"role": "user", "content": "Thanks, one last question?"})
    return messages


def rate(fn: Callable[[], Any], seconds: float) -> float:
    fn()
    n, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()
        n += 1
    return n / elapsed


def measure(label: str, source: str, seconds: float, rounds: int) -> None:
    """Print one table row: both engines on the same template and conversation."""
    template = _native.ChatTemplate(source, SPECIAL_TOKENS)
    messages = long_conversation(string_arguments="DeepSeek" in label)

    def ours() -> str:
        return template.render(messages, tools=TOOLS, add_generation_prompt=True)

    def theirs() -> str:
        result: Any = render_jinja_template(
            conversations=[messages],
            tools=list(TOOLS),
            chat_template=source,
            add_generation_prompt=True,
            **SPECIAL_TOKENS,
        )
        return str(result[0][0])

    try:
        expected = theirs()
    except Exception as exc:  # a template may refuse this conversation shape
        print(f"{label:24} skipped: transformers raises {exc!r}")
        return
    assert ours() == expected, f"{label}: outputs differ"
    # Alternate short rounds of each engine and take medians, so that load from other processes on a
    # shared machine hits both sides alike; the ratio is the median of the per-round ratios.
    ours_rates, theirs_rates = [], []
    for _ in range(rounds):
        ours_rates.append(rate(ours, seconds / rounds))
        theirs_rates.append(rate(theirs, seconds / rounds))
    ratios = sorted(a / b for a, b in zip(ours_rates, theirs_rates, strict=True))
    a, b = statistics.median(ours_rates), statistics.median(theirs_rates)
    print(
        f"{label:24} {len(expected):>7} {a:>10.0f} {b:>15.0f} {statistics.median(ratios):>6.1f}x"
        f"   ({ratios[0]:.1f}x-{ratios[-1]:.1f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0, help="time per engine and template")
    parser.add_argument("--rounds", type=int, default=8, help="alternated rounds per engine and template")
    args = parser.parse_args()
    print(f"conversation: {len(long_conversation())} messages, {len(TOOLS)} tools")
    print(f"{'template':24} {'chars':>7} {'smgpy/s':>10} {'transformers/s':>15} {'ratio':>7}   (range of rounds)")
    for label, file in CANDIDATES:
        path = TEMPLATES / file
        if path.is_file():
            measure(label, path.read_text(), args.seconds, args.rounds)


if __name__ == "__main__":
    main()
