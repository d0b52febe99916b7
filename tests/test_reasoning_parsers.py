"""Reasoning parsers through the public Python API: examples per format and the streaming invariant."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from smgpy import _native as native

# (parser, output, expected reasoning, expected content), thinking on, no prompt information.
EXAMPLES = [
    ("qwen3", "<think>\nplan 計画\n</think>\n\nAnswer", "\nplan 計画\n", "\n\nAnswer"),
    ("qwen3", "no thinking", "", "no thinking"),
    ("glm45", "<think>r</think>c", "r", "c"),
    ("glm47", "r</think>c", "r", "c"),
    ("apertus", "<|inner_prefix|>r<|inner_suffix|>c", "r", "c"),
    ("kimi_k2", "<think>r</think>c", "r", "c"),
    ("nemotron_v3", "<think>r</think>c", "r", "c"),
    ("hy_v3", "<think>r</think>c", "r", "c"),
    ("olmo3", "<think>r</think>c", "r", "c"),
    ("deepseek_v3", "<think>r</think>c", "r", "c"),
    ("deepseek_r1", "plan\n</think>\n\nAnswer", "plan\n", "\n\nAnswer"),
    ("deepseek_r1", "cut off", "cut off", ""),
    ("step3", "r</think>c", "r", "c"),
    ("step3p5", "r</think>c", "r", "c"),
    ("minimax_m2", "<think>r</think>c", "r", "c"),
    ("minimax_m2_append_think", "r</think>c", "", "<think>r</think>c"),
    ("minimax_m3", "<mm:think>r</mm:think>c", "r", "c"),
    ("ernie45", "r\n</think>\n<response>\nc\n</response>", "r\n", "\n\nc\n"),
    ("hunyuan_a13b", "<think>r</think><answer>c</answer>", "r", "c"),
    ("kimi", "◁think▷思考◁/think▷答え", "思考", "答え"),
    ("kimi_k3", "<|open|>think<|sep|>r<|close|>think<|sep|><|open|>response<|sep|>c<|close|>response<|sep|>", "r", "c"),
    ("seed_oss", "<seed:think>r</seed:think>c", "r", "c"),
    ("mistral", "[THINK]r[/THINK]c", "r", "c"),
    ("cohere_command3", "<|START_THINKING|>r<|END_THINKING|><|START_RESPONSE|>c<|END_RESPONSE|>", "r", "c"),
    ("cohere_command4", "<|START_THINKING|>r<|END_THINKING|><|START_TEXT|>c<|END_TEXT|>", "r", "c"),
    (
        "openai_gptoss",
        "<|channel|>analysis<|message|>r<|end|><|start|>assistant<|channel|>final<|message|>c<|return|>",
        "r",
        "c",
    ),
    ("gemma4", "<|channel>thought\nr<channel|>c", "r", "c"),
    ("granite", "Here is my thought process: r Here is my response: c", " r ", " c"),
    ("apriel", "r\n[BEGIN FINAL RESPONSE]\nc\n[END FINAL RESPONSE]", "r\n", "\nc\n"),
    ("solar_open", "<|think|>r<|end|><|begin|>assistant<|content|>c<|end|>", "r", "c"),
    (
        "inkling",
        "<|message_model|><|content_thinking|>r<|end_message|><|message_model|><|content_text|>c<|end_message|>",
        "r",
        "c",
    ),
    # Aliases of SMG and SGLang.
    ("deepseek-r1", "r</think>c", "r", "c"),
    ("qwen3-thinking", "r</think>c", "r", "c"),
    ("gpt-oss", "<|channel|>analysis<|message|>r<|end|>c", "r", "c"),
    ("cohere_cmd", "<|START_THINKING|>r<|END_THINKING|>c", "r", "c"),
]


def stream(parser: str, parts: list[str], **kwargs: object) -> tuple[str, str]:
    s = native.ReasoningStream(parser, **kwargs)  # type: ignore[arg-type]
    reasoning, content = "", ""
    for p in parts:
        d = s.feed(p)
        reasoning += d["reasoning_text"]
        content += d["normal_text"]
    d = s.finish()
    return reasoning + d["reasoning_text"], content + d["normal_text"]


@pytest.mark.parametrize(("parser", "text", "reasoning", "content"), EXAMPLES)
def test_examples_complete_and_streamed(parser: str, text: str, reasoning: str, content: str) -> None:
    assert native.parse_reasoning_complete(text, parser) == {"reasoning_text": reasoning, "normal_text": content}
    assert stream(parser, list(text)) == (reasoning, content)


def test_every_canonical_parser_has_an_example() -> None:
    names = native.list_reasoning_parsers()
    assert "deepseek_r1" in names and "qwen3" in names and "openai_gptoss" in names
    assert set(names) <= {e[0] for e in EXAMPLES}


def test_unknown_parser_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="deepseek_r1"):
        native.parse_reasoning_complete("x", "nope")
    with pytest.raises(ValueError, match="qwen3"):
        native.ReasoningStream("nope")


def test_keyword_typo_raises_type_error() -> None:
    with pytest.raises(TypeError):
        native.parse_reasoning_complete("x", "qwen3", thinking_disable=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        native.ReasoningStream("qwen3", promt="x")  # type: ignore[call-arg]


def test_prompt_state() -> None:
    # Qwen3.5-style prompt that opened the block: output starts in reasoning.
    assert stream("qwen3", ["r</th", "ink>c"], prompt="<|im_start|>assistant\n<think>\n") == ("r", "c")
    # enable_thinking=False closed it: everything is content, even for an implied-open format.
    off = "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert stream("deepseek_r1", ["all ", "answer"], prompt=off) == ("", "all answer")
    assert native.parse_reasoning_complete("r</think>c", "qwen3", prompt_opened_reasoning=True) == {
        "reasoning_text": "r",
        "normal_text": "c",
    }
    # Thinking disabled: reasoning markers are the model's text, kept verbatim (docs/parsers.md).
    assert native.parse_reasoning_complete("a</think>b", "deepseek_r1", thinking_disabled=True) == {
        "reasoning_text": "",
        "normal_text": "a</think>b",
    }
    # `prompt_opened_reasoning=False` is honoured over DeepSeek-R1's implied opening.
    assert native.parse_reasoning_complete("a</think>b", "deepseek_r1", prompt_opened_reasoning=False) == {
        "reasoning_text": "",
        "normal_text": "a</think>b",
    }
    assert native.parse_reasoning_complete("a</think>b", "deepseek_r1") == {"reasoning_text": "a", "normal_text": "b"}


def test_markers_after_reasoning_ended_are_content() -> None:
    # vLLM's Qwen3 / DeepSeek-R1 parsers and SGLang's detectors split at the first close only.
    text = "<think>plan</think>Write <think> and </think> literally."
    for parser in ("qwen3", "deepseek_r1", "olmo3"):
        assert stream(parser, list(text)) == ("plan", "Write <think> and </think> literally.")
    # Gemma 4: a thought channel without its header, split across deltas (vLLM's Gemma 4 parser).
    assert stream("gemma4", ["<|chan", "nel>plan", "<channel|>Answer"]) == ("plan", "Answer")


def test_partial_marker_held_back() -> None:
    s = native.ReasoningStream("qwen3", prompt_opened_reasoning=True)
    assert s.feed("abc</thi") == {"reasoning_text": "abc", "normal_text": ""}
    assert s.in_reasoning
    assert s.feed("nk>def") == {"reasoning_text": "", "normal_text": "def"}
    assert not s.in_reasoning
    assert s.finish() == {"reasoning_text": "", "normal_text": ""}


def test_gpt_oss_tool_calls_reach_the_tool_parser_only_when_kept() -> None:
    # llama.cpp tests/test-chat.cpp GPT_OSS: analysis, then a call without `<|call|>`.
    text = (
        "<|channel|>analysis<|message|>I'm\nthinking<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.special_function <|constrain|>json<|message|>{"arg1": 1}'
    )
    assert stream("openai_gptoss", [text]) == ("I'm\nthinking", "")
    reasoning, content = stream("openai_gptoss", [text[:40], text[40:]], keep_tool_calls=True)
    assert reasoning == "I'm\nthinking"
    calls = native.parse_tool_call_complete(content, "openai")["tool_calls"]
    assert [(c["name"], c["arguments"]) for c in calls] == [("special_function", '{"arg1":1}')]


def test_model_mapping() -> None:
    assert native.reasoning_parser_for_model("deepseek-ai/DeepSeek-R1") == "deepseek_r1"
    assert native.reasoning_parser_for_model("Qwen/Qwen3-8B") == "qwen3"
    assert native.reasoning_parser_for_model("Qwen/Qwen3-235B-A22B-Thinking-2507") == "deepseek_r1"
    assert native.reasoning_parser_for_model("moonshotai/Kimi-K3") == "kimi_k3"
    assert native.reasoning_parser_for_model("OPENAI/GPT-OSS-120B") == "openai_gptoss"
    assert native.reasoning_parser_for_model("meta-llama/Llama-3.1-8B-Instruct") is None


PIECES = st.sampled_from(
    [
        "<think>",
        "</think>",
        "</thi",
        "<",
        "◁think▷",
        "◁/think▷",
        "[THINK]",
        "[/THINK]",
        "<|channel|>analysis<|message|>",
        "<|end|>",
        "<|channel|>final<|message|>",
        "<|return|>",
        "<answer>",
        "</answer>",
        "思考",
        "｜▁",
        "a b\n",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    parser=st.sampled_from(native.list_reasoning_parsers()),
    pieces=st.lists(st.one_of(PIECES, st.text(max_size=5)), max_size=20),
    cuts=st.lists(st.integers(min_value=0), max_size=10),
    opened=st.booleans(),
    disabled=st.booleans(),
)
def test_any_chunking_equals_complete(
    parser: str, pieces: list[str], cuts: list[int], opened: bool, disabled: bool
) -> None:
    text = "".join(pieces)
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    parts = [text[a:b] for a, b in zip(points, points[1:], strict=False)]
    full = native.parse_reasoning_complete(text, parser, prompt_opened_reasoning=opened, thinking_disabled=disabled)
    got = stream(parser, parts, prompt_opened_reasoning=opened, thinking_disabled=disabled)
    assert got == (full["reasoning_text"], full["normal_text"])
