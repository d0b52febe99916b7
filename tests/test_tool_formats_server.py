"""Every tool-call format end to end through the server: a scripted model writes two calls (one
where the format has room for only one) and the `openai` SDK must get the same calls as
`smgpy.parse_tool_call_complete`, non-streaming and through the `.stream()` helper alike."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
import smgpy
from conftest import serve_in_thread
from engines import ScriptedEngine

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}},
        },
    },
]
MSG = [{"role": "user", "content": "Weather in São Paulo for 3 days, and the time in Tokyo?"}]
EXPECTED = [("get_weather", {"city": "São Paulo", "days": 3}), ("get_time", {"timezone": "Asia/Tokyo"})]

W = '{"city": "São Paulo", "days": 3}'
T = '{"timezone": "Asia/Tokyo"}'
WJ = f'{{"name": "get_weather", "arguments": {W}}}'
TJ = f'{{"name": "get_time", "arguments": {T}}}'

# One real-looking output per canonical parser name (markers: ../shared/docs/formats.md).
OUTPUTS: dict[str, str] = {
    "hermes": f"Let me check.\n<tool_call>\n{WJ}\n</tool_call>\n<tool_call>\n{TJ}\n</tool_call>",
    "json": f"[{WJ}, {TJ}]",
    "llama3_json": f'<|python_tag|>{{"name": "get_weather", "parameters": {W}}}; '
    f'{{"name": "get_time", "parameters": {T}}}',
    "pythonic": '[get_weather(city="São Paulo", days=3), get_time(timezone="Asia/Tokyo")]',
    "lfm2": '<|tool_call_start|>[get_weather(city="São Paulo", days=3), get_time(timezone="Asia/Tokyo")]'
    "<|tool_call_end|>Checking both.",
    "olmo3": '<function_calls>\nget_weather(city="São Paulo", days=3)\nget_time(timezone="Asia/Tokyo")\n'
    "</function_calls>",
    "mistral": f"[TOOL_CALLS]get_weather[ARGS]{W}[TOOL_CALLS]get_time[ARGS]{T}",
    "deepseek_v3": "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather"
    f"\n```json\n{W}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{T}\n```"
    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "deepseek_v31": f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{W}<｜tool▁call▁end｜>"
    f"<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{T}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "deepseek_v32": '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">São Paulo</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
    '<｜DSML｜invoke name="get_time">\n'
    '<｜DSML｜parameter name="timezone" string="true">Asia/Tokyo</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>",
    "deepseek_v4": '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">São Paulo</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
    '<｜DSML｜invoke name="get_time">\n'
    '<｜DSML｜parameter name="timezone" string="true">Asia/Tokyo</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
    "command_r": "Plan: I will look up both.\nAction: ```json\n"
    f'[{{"tool_name": "get_weather", "parameters": {W}}}, {{"tool_name": "get_time", "parameters": {T}}}]\n```',
    "generic": f'{{"tool_calls": [{WJ}, {TJ}]}}',
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
    f"{W}<|tool_call_end|><|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{T}"
    "<|tool_call_end|><|tool_calls_section_end|>",
    "kimi_k3": "<|open|>response<|sep|>Checking.<|close|>response<|sep|><|open|>tools<|sep|>"
    '<|open|>call tool="get_weather" index="0"<|sep|><|open|>argument key="city" type="string"<|sep|>São Paulo'
    '<|close|>argument<|sep|><|open|>argument key="days" type="integer"<|sep|>3<|close|>argument<|sep|>'
    '<|close|>call<|sep|><|open|>call tool="get_time" index="1"<|sep|>'
    '<|open|>argument key="timezone" type="string"<|sep|>Asia/Tokyo<|close|>argument<|sep|>'
    "<|close|>call<|sep|><|close|>tools<|sep|>",
    "qwen3_coder": "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n"
    "<parameter=timezone>\nAsia/Tokyo\n</parameter>\n</function>\n</tool_call>",
    "seed_oss": "<seed:tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</seed:tool_call>\n<seed:tool_call>\n<function=get_time>\n"
    "<parameter=timezone>\nAsia/Tokyo\n</parameter>\n</function>\n</seed:tool_call>",
    "glm45": "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>São Paulo</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n<tool_call>get_time\n"
    "<arg_key>timezone</arg_key>\n<arg_value>Asia/Tokyo</arg_value>\n</tool_call>",
    "glm47": "<tool_call>get_weather<arg_key>city</arg_key><arg_value>São Paulo</arg_value>"
    "<arg_key>days</arg_key><arg_value>3</arg_value></tool_call><tool_call>get_time"
    "<arg_key>timezone</arg_key><arg_value>Asia/Tokyo</arg_value></tool_call>",
    "hy_v3": "<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n"
    "<arg_value>São Paulo</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n"
    "<tool_call>get_time<tool_sep>\n"
    "<arg_key>timezone</arg_key>\n<arg_value>Asia/Tokyo</arg_value>\n</tool_call>\n</tool_calls>",
    "step3": '<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather">'
    '<steptml:parameter name="city">São Paulo</steptml:parameter>'
    '<steptml:parameter name="days">3</steptml:parameter></steptml:invoke><｜tool_call_end｜>'
    '<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_time">'
    '<steptml:parameter name="timezone">Asia/Tokyo</steptml:parameter></steptml:invoke><｜tool_call_end｜>'
    "<｜tool_calls_end｜>",
    "minimax_m2": 'Let me check.\n<minimax:tool_call>\n<invoke name="get_weather">\n'
    '<parameter name="city">São Paulo</parameter>\n<parameter name="days">3</parameter>\n</invoke>\n'
    '<invoke name="get_time">\n<parameter name="timezone">Asia/Tokyo</parameter>\n</invoke>\n</minimax:tool_call>',
    "minimax": f"<tool_calls>\n{WJ}\n{TJ}\n</tool_calls>",
    # Harmony: `<|call|>` is a stop token, so one call per turn.
    "openai": f"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{W}<|call|>",
    "cohere_command3": '<|START_ACTION|>[\n{"tool_call_id": "0", "tool_name": "get_weather", "parameters": '
    f'{W}}},\n{{"tool_call_id": "1", "tool_name": "get_time", "parameters": {T}}}\n]<|END_ACTION|>',
    "granite": f"<|tool_call|>[{WJ}, {TJ}]",
    "granite-20b-fc": f"<function_call> {WJ} <function_call> {TJ}",
    "gemma4": '<|tool_call>call:get_weather{city:<|"|>São Paulo<|"|>,days:3}<tool_call|>'
    '<|tool_call>call:get_time{timezone:<|"|>Asia/Tokyo<|"|>}<tool_call|>',
    "functiongemma": "<start_function_call>call:get_weather{city:<escape>São Paulo<escape>,days:3}<end_function_call>"
    "<start_function_call>call:get_time{timezone:<escape>Asia/Tokyo<escape>}<end_function_call>",
    "jamba": f"<tool_calls>[{WJ}, {TJ}]</tool_calls>",
    "hunyuan_a13b": f"<tool_calls>[{WJ}, {TJ}]</tool_calls>",
    "apriel": f"<tool_calls>[{WJ}, {TJ}]</tool_calls>",
    "nemotron_json": f"<TOOLCALL>[{WJ}, {TJ}]</TOOLCALL>",
    "phi4_mini_json": f"functools[{WJ}, {TJ}]",
    # InternLM2: `<|action_end|>` ends the turn, one action per turn.
    "internlm": f"Sure.<|action_start|><|plugin|>\n{WJ}<|action_end|>",
    "apertus": f'<|tools_prefix|>[{{"get_weather": {W}}}, {{"get_time": {T}}}]<|tools_suffix|>',
    # GigaChat 3: one call per message.
    "gigachat3": f"<|function_call|>{WJ}",
    "longcat": f"<longcat_tool_call>{WJ}</longcat_tool_call>\n<longcat_tool_call>{TJ}</longcat_tool_call>",
    "solar_open": f"<|tool_call:begin|>c1<|tool_call:name|>get_weather<|tool_call:args|>{W}<|tool_call:end|>"
    f"<|tool_call:begin|>c2<|tool_call:name|>get_time<|tool_call:args|>{T}<|tool_call:end|>",
    "xlam": f"```json\n[{WJ}, {TJ}]\n```",
    "functionary_v3_1": f"<function=get_weather>{W}</function>\n<function=get_time>{T}</function>",
    "functionary_v3_2": f"get_weather\n{W}>>>get_time\n{T}",
    "sarashina": "[{'name': 'get_weather', 'arguments': {'city': 'São Paulo', 'days': 3}}, "
    "{'name': 'get_time', 'arguments': {'timezone': 'Asia/Tokyo'}}]",
    "inkling": "<|message_model|>get_weather<|content_invoke_tool_json|>"
    f'{{"name": "get_weather", "args": {W}}}<|end_message|>'
    f'<|message_model|>get_time<|content_invoke_tool_json|>{{"name": "get_time", "args": {T}}}<|end_message|>',
}
ONE_CALL = {"openai", "internlm", "gigachat3"}


def tokens(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def calls_of(message: Any) -> list[tuple[str, str]]:
    return [(tc.function.name, tc.function.arguments) for tc in message.tool_calls or []]


def test_every_canonical_parser_has_an_output() -> None:
    assert set(OUTPUTS) == set(smgpy.list_tool_parsers())


@pytest.mark.parametrize("parser", list(OUTPUTS))
def test_format_through_the_server(parser: str) -> None:
    output = OUTPUTS[parser]
    want = smgpy.parse_tool_call_complete(output, parser, TOOLS)
    # The sample itself is right: the parser reads the calls it was written to hold.
    n = 1 if parser in ONE_CALL else 2
    assert [(c["name"], json.loads(c["arguments"])) for c in want["tool_calls"]] == EXPECTED[:n]
    want_calls = [(c["name"], c["arguments"]) for c in want["tool_calls"]]

    with serve_in_thread(ScriptedEngine(tokens(output)), tool_parser=parser) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        r = client.chat.completions.create(model="x", messages=MSG, tools=TOOLS)  # type: ignore[arg-type]
        with client.chat.completions.stream(model="x", messages=MSG, tools=TOOLS) as s:  # type: ignore[arg-type]
            for _ in s:
                pass
            final = s.get_final_completion()

    complete, streamed = r.choices[0], final.choices[0]
    assert complete.finish_reason == "tool_calls"
    assert calls_of(complete.message) == want_calls
    assert (complete.message.content or "") == want["normal_text"]
    assert all(tc.type == "function" and tc.id for tc in complete.message.tool_calls or [])
    # The SDK's accumulation of the stream is the same message.
    assert streamed.finish_reason == "tool_calls"
    assert calls_of(streamed.message) == want_calls
    assert (streamed.message.content or "") == (complete.message.content or "")
    assert len({tc.id for tc in streamed.message.tool_calls or []}) == n
