"""Tool-call parsers through the public Python API: every format complete and streamed, the
streaming invariant under random chunking (hypothesis), tools filtering and name lookup."""

from __future__ import annotations

import json
from typing import Any

import pytest
import smgpy._native as native
from hypothesis import given, settings
from hypothesis import strategies as st

# (parser, output, expected normal_text, expected [(name, arguments-as-object)])
EXAMPLES: list[tuple[str, str, str, list[tuple[str, Any]]]] = [
    (
        "hermes",
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        "Checking.\n",
        [("get_weather", {"city": "Paris"})],
    ),
    (
        "json",
        '[{"name": "a", "arguments": {}}, {"name": "b", "parameters": {"x": 1}}]',
        "",
        [("a", {}), ("b", {"x": 1})],
    ),
    ("llama3_json", '<|python_tag|>{"name": "f", "parameters": {"q": "é"}}<|eom_id|>', "", [("f", {"q": "é"})]),
    ("pythonic", '[f(a=1, b="x"), g()]', "", [("f", {"a": 1, "b": "x"}), ("g", {})]),
    ("lfm2", "<|tool_call_start|>[f(x=True)]<|tool_call_end|>ok", "ok", [("f", {"x": True})]),
    ("olmo3", "<function_calls>\nf(a=null)\n</function_calls>", "", [("f", {"a": None})]),
    ("mistral", '[TOOL_CALLS]get[ARGS]{"city": "Paris"}', "", [("get", {"city": "Paris"})]),
    (
        "deepseek_v3",
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n"
        '{"a": [1]}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        "",
        [("f", {"a": [1]})],
    ),
    (
        "deepseek_v31",
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"a": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        "",
        [("f", {"a": 1})],
    ),
    (
        "deepseek_v32",
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="n" string="false">2'
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
        "",
        [("f", {"n": 2})],
    ),
    (
        "deepseek_v4",
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="n" string="false">2'
        "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        "",
        [("f", {"n": 2})],
    ),
    (
        "kimi_k2",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
        '{"a": 1}<|tool_call_end|><|tool_calls_section_end|>',
        "",
        [("f", {"a": 1})],
    ),
    (
        "kimi_k3",
        '<|open|>tools<|sep|><|open|>call tool="f" index="0"<|sep|><|open|>argument key="a" type="string"<|sep|>x'
        "<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
        "",
        [("f", {"a": "x"})],
    ),
    # Without a schema, XML values stay text, as Qwen's and MiniMax's reference parsers keep them.
    (
        "qwen3_coder",
        "<tool_call>\n<function=f>\n<parameter=a>\n5\n</parameter>\n</function>\n</tool_call>",
        "",
        [("f", {"a": "5"})],
    ),
    ("seed_oss", "<seed:tool_call>\n<function=f>\n</function>\n</seed:tool_call>", "", [("f", {})]),
    ("glm45", "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>x</arg_value>\n</tool_call>", "", [("f", {"a": "x"})]),
    ("glm47", "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", "", [("f", {"a": 1})]),
    ("hy_v3", "<tool_calls>\n<tool_call>f<tool_sep>\n</tool_call>\n</tool_calls>", "", [("f", {})]),
    (
        "step3",
        '<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="f">'
        '<steptml:parameter name="a">x</steptml:parameter></steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>',
        "",
        [("f", {"a": "x"})],
    ),
    (
        "minimax_m2",
        '<minimax:tool_call>\n<invoke name="f">\n<parameter name="a">1</parameter>\n</invoke>\n</minimax:tool_call>',
        "",
        [("f", {"a": "1"})],
    ),
    ("minimax", '<tool_calls>\n{"name": "f", "arguments": {}}\n</tool_calls>', "", [("f", {})]),
    (
        "openai",
        '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": 1}<|call|>',
        "",
        [("f", {"a": 1})],
    ),
    (
        "cohere_command3",
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {}}]<|END_ACTION|>',
        "",
        [("f", {})],
    ),
    (
        "command_r",
        'Plan: search.\nAction: ```json\n[{"tool_name": "f", "parameters": {"q": "x"}}]\n```',
        "Plan: search.\n",
        [("f", {"q": "x"})],
    ),
    ("granite", '<|tool_call|>[{"name": "f", "arguments": {}}]', "", [("f", {})]),
    ("granite-20b-fc", '<function_call> {"name": "f", "arguments": {}}', "", [("f", {})]),
    ("gemma4", '<|tool_call>call:f{a:<|"|>x<|"|>,n:1}<tool_call|>', "", [("f", {"a": "x", "n": 1})]),
    ("functiongemma", "<start_function_call>call:f{a:<escape>x<escape>}<end_function_call>", "", [("f", {"a": "x"})]),
    ("jamba", '<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>', "", [("f", {})]),
    ("hunyuan_a13b", '<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>', "", [("f", {})]),
    ("apriel", '<tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>', "", [("f", {})]),
    ("nemotron_json", '<TOOLCALL>[{"name": "f", "arguments": {}}]</TOOLCALL>', "", [("f", {})]),
    ("phi4_mini_json", 'functools[{"name": "f", "arguments": {}}]', "", [("f", {})]),
    ("internlm", '<|action_start|><|plugin|>\n{"name": "f", "parameters": {}}<|action_end|>', "", [("f", {})]),
    ("apertus", '<|tools_prefix|>[{"f": {"a": 1}}]<|tools_suffix|>', "", [("f", {"a": 1})]),
    ("gigachat3", '<|function_call|>{"name": "f", "arguments": {}}', "", [("f", {})]),
    ("longcat", '<longcat_tool_call>{"name": "f", "arguments": {}}</longcat_tool_call>', "", [("f", {})]),
    (
        "solar_open",
        '<|tool_call:begin|>id1<|tool_call:name|>f<|tool_call:args|>{"a": 1}<|tool_call:end|>',
        "",
        [("f", {"a": 1})],
    ),
    ("xlam", '```json\n[{"name": "f", "arguments": {}}]\n```', "", [("f", {})]),
    ("functionary_v3_1", '<function=f>{"a": 1}</function>', "", [("f", {"a": 1})]),
    ("functionary_v3_2", 'f\n{"a": 1}', "", [("f", {"a": 1})]),
    ("sarashina", "[{'name': 'f', 'arguments': {'a': 'b'}}]", "", [("f", {"a": "b"})]),
    (
        "inkling",
        '<|message_model|>f<|content_invoke_tool_json|>{"name": "f", "args": {}}<|end_message|>',
        "",
        [("f", {})],
    ),
    ("generic", '{"tool_call": {"name": "f", "arguments": {"a": 1}}}', "", [("f", {"a": 1})]),
]


def _stream(
    chunks: list[str], parser: str, tools: list[dict[str, Any]] | None = None, tool_choice: Any = None
) -> dict[str, Any]:
    """Feed chunks and assemble like an OpenAI client accumulates deltas: what a complete parse
    reports, calls cut off or broken after they started included (docs/parsers.md)."""
    s = native.ToolCallStream(parser, tools, tool_choice)
    text = ""
    calls: list[dict[str, Any]] = []
    for d in [s.feed(c) for c in chunks] + [s.finish()]:
        text += d["normal_text"]
        for c in d["calls"]:
            if c["index"] == len(calls):
                assert c["name"] is not None
                call = {"name": c["name"], "arguments": c["arguments"]}
                if c["id"] is not None:
                    call["id"] = c["id"]
                calls.append(call)
            else:
                assert c["name"] is None
                calls[c["index"]]["arguments"] += c["arguments"]
    return {"normal_text": text, "tool_calls": calls}


def test_every_parser_has_an_example() -> None:
    assert {e[0] for e in EXAMPLES} == set(native.list_tool_parsers())


@pytest.mark.parametrize(("parser", "output", "text", "calls"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_complete_and_streaming(parser: str, output: str, text: str, calls: list[tuple[str, Any]]) -> None:
    got = native.parse_tool_call_complete(output, parser)
    assert got["normal_text"] == text
    assert [(c["name"], json.loads(c["arguments"])) for c in got["tool_calls"]] == calls
    assert _stream(list(output), parser) == got


def test_ids_only_when_the_format_has_them() -> None:
    kimi = EXAMPLES[[e[0] for e in EXAMPLES].index("kimi_k2")][1]
    assert native.parse_tool_call_complete(kimi, "kimi_k2")["tool_calls"][0]["id"] == "functions.f:0"
    hermes = native.parse_tool_call_complete(EXAMPLES[0][1], "qwen")
    assert "id" not in hermes["tool_calls"][0]


def test_tools_filter_and_schema_types() -> None:
    out = '<tool_call>{"name": "other", "arguments": {}}</tool_call>'
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    got = native.parse_tool_call_complete(out, "hermes", tools)
    assert got == {"normal_text": out, "tool_calls": []}
    xml = "<tool_call>\n<function=f>\n<parameter=zip>\n12345\n</parameter>\n</function>\n</tool_call>"
    flat = [{"name": "f", "parameters": {"properties": {"zip": {"type": "string"}}}}]
    assert native.parse_tool_call_complete(xml, "qwen3_coder", flat)["tool_calls"][0]["arguments"] == '{"zip":"12345"}'
    # Without a schema the value stays text (Qwen's reference parser); an integer schema types it.
    assert native.parse_tool_call_complete(xml, "qwen3_coder")["tool_calls"][0]["arguments"] == '{"zip":"12345"}'
    typed = [{"name": "f", "parameters": {"properties": {"zip": {"type": "integer"}}}}]
    assert native.parse_tool_call_complete(xml, "qwen3_coder", typed)["tool_calls"][0]["arguments"] == '{"zip":12345}'


def test_unknown_parser_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="hermes"):
        native.parse_tool_call_complete("x", "no-such-parser")
    with pytest.raises(ValueError, match="qwen3_coder"):
        native.ToolCallStream("no-such-parser")


def test_aliases_and_model_mapping() -> None:
    assert native.ToolCallStream("qwen25").parser == "hermes"
    # SGLang's `llama4` parser reads Llama 4's pythonic calls (its JSON mode is `llama4_json`).
    assert native.ToolCallStream("llama4").parser == "pythonic"
    assert native.ToolCallStream("llama4_json").parser == "llama3_json"
    assert native.tool_parser_for_model("Qwen/Qwen3-Coder-30B-A3B-Instruct") == "qwen3_coder"
    assert native.tool_parser_for_model("Qwen/Qwen2.5-7B-Instruct") == "hermes"
    assert native.tool_parser_for_model("deepseek-ai/DeepSeek-V3.1") == "deepseek_v31"
    assert native.tool_parser_for_model("no/such-model") is None


@pytest.mark.parametrize(
    ("parser", "output", "text", "calls"),
    [
        # xLAM's array may follow reasoning the reasoning parser did not take out.
        ("xlam", 'I think.</think>\n[{"name": "f", "arguments": {"a": 1}}]', "I think.</think>\n", [("f", {"a": 1})]),
        ("xlam", "I think.</think>\nNo call here: [1, 2].", "I think.</think>\nNo call here: [1, 2].", []),
        # Granite 3.1 may close its `<tool_call>[...]` with `</tool_call>`, which is not text.
        ("granite", '<tool_call>[{"name": "g", "arguments": {}}]</tool_call> done', " done", [("g", {})]),
    ],
)
def test_reported_forms(parser: str, output: str, text: str, calls: list[tuple[str, Any]]) -> None:
    got = native.parse_tool_call_complete(output, parser)
    assert got["normal_text"] == text
    assert [(c["name"], json.loads(c["arguments"])) for c in got["tool_calls"]] == calls
    assert _stream(list(output), parser) == got


def test_held_back_marker_prefix_is_not_emitted() -> None:
    s = native.ToolCallStream("hermes")
    assert s.feed("Hello <tool_")["normal_text"] == "Hello "
    d = s.feed('call>{"name": "f", "arguments": {}}</tool_call>')
    assert d["normal_text"] == ""
    assert d["calls"] == [{"index": 0, "id": None, "name": "f", "arguments": "{}"}]
    assert s.finish() == {"normal_text": "", "calls": []}


def test_malformed_never_raises_from_a_stream() -> None:
    s = native.ToolCallStream("mistral")
    text = "".join(s.feed(c)["normal_text"] for c in ["[TOOL_CALLS]f[AR", "GS]{bad"]) + s.finish()["normal_text"]
    assert text == "[TOOL_CALLS]f[ARGS]{bad"


@st.composite
def _case_and_cuts(draw: st.DrawFn) -> tuple[str, str, list[int]]:
    parser, output, _, _ = draw(st.sampled_from(EXAMPLES))
    noise = draw(st.text(alphabet=st.sampled_from(list('ab <>{}[]|｜▁\n"')), max_size=8))
    text = draw(st.sampled_from([output, noise + output, output + noise, output[: len(output) // 2]]))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    return parser, text, cuts


@settings(max_examples=300, deadline=None)
@given(_case_and_cuts())
def test_any_chunking_equals_complete(case: tuple[str, str, list[int]]) -> None:
    parser, text, cuts = case
    points = [0, *cuts, len(text)]
    chunks = [text[a:b] for a, b in zip(points, points[1:], strict=False)]
    assert _stream(chunks, parser) == native.parse_tool_call_complete(text, parser)


def test_arguments_stream_as_fragments() -> None:
    s = native.ToolCallStream("hermes")
    assert s.feed('<tool_call>{"name": "f", "arg') == {"normal_text": "", "calls": []}
    d = s.feed('uments": {"code": "print(')
    assert d["calls"] == [{"index": 0, "id": None, "name": "f", "arguments": '{"code":"print('}]
    assert s.feed("1)\\n")["calls"] == [{"index": 0, "id": None, "name": None, "arguments": "1)\\n"}]
    assert s.feed('"}}</tool_call>')["calls"] == [{"index": 0, "id": None, "name": None, "arguments": '"}'}]
    assert s.finish() == {"normal_text": "", "calls": []}


def test_truncated_call_is_abandoned_not_closed_up() -> None:
    # Output cut off by max_tokens inside the arguments: the started call cannot be taken back,
    # and its arguments are not closed up as if whole; a complete parse reports the same partial
    # call (docs/parsers.md, cut-off calls), and `abandoned` lists it.
    text = '<tool_call>{"name": "f", "arguments": {"a": "unfini'
    s = native.ToolCallStream("hermes")
    d = s.feed(text)
    assert d["calls"][0]["arguments"] == '{"a":"unfini'
    assert s.finish() == {"normal_text": "", "calls": []}
    assert s.abandoned == {"calls": [0], "text": [(0, text)]}
    assert native.parse_tool_call_complete(text, "hermes") == {
        "normal_text": "",
        "tool_calls": [{"name": "f", "arguments": '{"a":"unfini'}],
    }


NAMED = {"type": "function", "function": {"name": "get_weather"}}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 60), max_size=10))
def test_forced_tool_choice_reads_the_json_it_forced(cuts: list[int]) -> None:
    """What a schema-holding engine writes for `tool_choice` named / `required` is read as the
    calls under any chunking; output in the format's own markers still reads as usual."""
    cases = [
        (NAMED, ' {"city": "Paris", "days": 2}', [("get_weather", {"city": "Paris", "days": 2})]),
        (
            "required",
            '\n[{"name": "get_weather", "parameters": {"city": "Oslo"}}, {"name": "t", "parameters": {}}]',
            [("get_weather", {"city": "Oslo"}), ("t", {})],
        ),
        (
            NAMED,
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"}}</tool_call>',
            [("get_weather", {"city": "Rome"})],
        ),
    ]
    for choice, text, calls in cases:
        points = sorted({0, len(text), *(c for c in cuts if c < len(text))})
        chunks = [text[a:b] for a, b in zip(points, points[1:], strict=False)]
        got = _stream(chunks, "hermes", tool_choice=choice)
        assert [(c["name"], json.loads(c["arguments"])) for c in got["tool_calls"]] == calls
        assert got["normal_text"] == ""
        assert got == native.parse_tool_call_complete(text, "hermes", None, choice)


def test_forced_tool_choice_auto_and_bad_values() -> None:
    text = '{"city": "Paris"}'
    assert _stream([text], "hermes", tool_choice="auto") == {"normal_text": text, "tool_calls": []}
    for bad in ["none", "sometimes", {"type": "function"}]:
        with pytest.raises(ValueError, match="tool_choice"):
            native.ToolCallStream("hermes", None, bad)
