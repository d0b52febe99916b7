//! Reasoning fixtures from peers' tests (each source named): tool calls opened inside reasoning
//! (class 8 of the crate docs' table), the formats and aliases added for peers' names, and the
//! reasoning-to-tool chain for those formats. Complete and streamed char by char.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod reasoning_common;
mod tool_common;

use reasoning_common::{check, check_cases, run};
use smgpy_parsers::reasoning::{self, ReasoningFormat, ReasoningOptions};
use smgpy_parsers::tool::{ToolCallParser, ToolFormat};
use tool_common::stream_through;

/// Reasoning then tool calls, as the server chains them: `(reasoning, content, calls)`.
fn chain(reasoning: &str, tools: &str, text: &str) -> (String, String, Vec<(String, String)>) {
    let (r, content) = run(reasoning, text, ReasoningOptions::default());
    let f: ToolFormat = tools.parse().unwrap();
    let out = stream_through(ToolCallParser::new(f, None), &[&content]);
    (
        r,
        out.normal_text,
        out.calls.into_iter().map(|c| (c.name, c.arguments)).collect(),
    )
}

fn s(x: &str) -> String {
    x.to_string()
}

#[test]
fn tool_calls_opened_inside_reasoning() {
    // vLLM tests/reasoning/test_kimi_k2_reasoning_parser.py::test_extract_reasoning_tool_section_ends_reasoning
    check(
        "kimi_k2",
        "some reasoning<|tool_calls_section_begin|>tool call data",
        "some reasoning",
        "<|tool_calls_section_begin|>tool call data",
    );
    // Kimi K2-Thinking writes the call before `</think>` (llama.cpp tests/test-chat.cpp KIMI_K2,
    // the case its TODO describes): the call reaches the tool parser, nothing of it is reasoning.
    assert_eq!(
        chain(
            "kimi_k2",
            "kimi_k2",
            "<think>I'm thinking<|tool_calls_section_begin|><|tool_call_begin|>functions.complex_function_in_think:0<|tool_call_argument_begin|>{\"name\": \"John Doe\", \"age\": 30}<|tool_call_end|><|tool_calls_section_end|>"
        ),
        (s("I'm thinking"), s(""), vec![(s("complex_function_in_think"), s(r#"{"name":"John Doe","age":30}"#))])
    );
    // A bare call marker too (class 8).
    assert_eq!(
        chain(
            "kimi_k2",
            "kimi_k2",
            "<think>Need weather.<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|>"
        ),
        (s("Need weather."), s(""), vec![(s("get_weather"), s(r#"{"city":"Paris"}"#))])
    );
    // vLLM tests/reasoning/test_glm45_fix.py (GLM-4.5 field reports): a call opened in reasoning.
    assert_eq!(
        chain(
            "glm45",
            "glm45",
            "<think>I should list the files.\n<tool_call>bash\n<arg_key>command</arg_key>\n<arg_value>ls /</arg_value>\n</tool_call>"
        ),
        (s("I should list the files.\n"), s(""), vec![(s("bash"), s(r#"{"command":"ls /"}"#))])
    );
    // GLM-4.7 (its template opens `<think>`), a call before `</think>`.
    assert_eq!(
        chain(
            "glm47",
            "glm47",
            "Let me check the weather.<tool_call>get_weather<arg_key>city</arg_key><arg_value>Beijing</arg_value></tool_call>"
        ),
        (s("Let me check the weather."), s(""), vec![(s("get_weather"), s(r#"{"city":"Beijing"}"#))])
    );
    // vLLM tests/reasoning/test_qwen3_tool_call_recovery.py: Qwen3.5 opens `<tool_call>` without
    // closing `</think>` (the prompt opened it).
    let qwen = "verify result\n<tool_call>\n<function=Finish>\n<parameter=answer>\n204\n</parameter>\n</function>\n</tool_call>";
    let (r, content) = run("qwen3-thinking", qwen, ReasoningOptions::default());
    assert_eq!(r, "verify result\n");
    let out = stream_through(ToolCallParser::new(ToolFormat::Qwen3Coder, None), &[&content]);
    assert_eq!(
        out.calls
            .iter()
            .map(|c| (c.name.as_str(), c.arguments.as_str()))
            .collect::<Vec<_>>(),
        [("Finish", r#"{"answer":"204"}"#)]
    );
    // SGLang python/sglang/srt/parser/reasoning_parser.py HunyuanDetector: `<tool_calls>` ends
    // reasoning (Hunyuan-A13B and Hy3).
    for name in ["hunyuan_a13b", "hunyuan", "hy_v3"] {
        check(
            name,
            "<think>\nI need the weather.\n<tool_calls>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]</tool_calls>",
            "\nI need the weather.\n",
            "<tool_calls>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]</tool_calls>",
        );
    }
    assert_eq!(
        chain(
            "hunyuan_a13b",
            "hunyuan_a13b",
            "<think>\nI need the weather.\n<tool_calls>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]</tool_calls>"
        ),
        (s("\nI need the weather.\n"), s(""), vec![(s("get_weather"), s(r#"{"city":"Paris"}"#))])
    );
}

#[test]
fn implied_reasoning_of_peers_parsers() {
    // vLLM tests/reasoning/test_kimi_k2_reasoning_parser.py::test_extract_reasoning_implicit_start
    check_cases(
        "kimi_k2",
        &[
            ("implicit reasoning with no tags", "implicit reasoning with no tags", ""),
            (
                "<think>step by step reasoning</think>final answer",
                "step by step reasoning",
                "final answer",
            ),
            ("<think></think>final answer", "", "final answer"),
        ],
    );
    // vLLM tests/reasoning/test_glm47_reasoning_parser.py
    check_cases(
        "glm47",
        &[
            (
                "This is a reasoning section</think>This is the rest",
                "This is a reasoning section",
                "This is the rest",
            ),
            ("This is content", "This is content", ""),
            ("</think>This is the rest", "", "This is the rest"),
        ],
    );
    // Thinking switched off by the template (its prompt ends with `</think>`): all content.
    let off = ReasoningOptions {
        prompt_opened_reasoning: false,
        thinking_disabled: true,
        reasoning_not_started: false,
    };
    assert_eq!(
        reasoning::parse_complete("plain", "kimi_k2".parse().unwrap(), off).content,
        "plain"
    );
}

#[test]
fn peers_names_and_apertus() {
    for (alias, canonical) in [
        ("nemotron_3", "nemotron_v3"),
        ("interns1", "qwen3"),
        ("mimo", "qwen3"),
        ("poolside_v1", "qwen3"),
        ("telechat4", "qwen3"),
        ("holo2", "deepseek_v3"),
        ("hunyuan", "hunyuan_a13b"),
        ("minimax-append-think", "minimax_m2_append_think"),
        ("apertus2509", "apertus"),
        ("gpt-oss", "openai_gptoss"),
        ("deepseek-v4", "deepseek_v3"),
        ("qwen3-thinking", "deepseek_r1"),
    ] {
        assert_eq!(alias.parse::<ReasoningFormat>().unwrap().name(), canonical, "{alias}");
    }
    // llama.cpp tests/test-chat.cpp APERTUS and SGLang Apertus2509Detector.
    assert_eq!(
        chain(
            "apertus",
            "apertus",
            "<|inner_prefix|>I'm\nthinking<|inner_suffix|><|tools_prefix|>[{\"special_function\": {\"arg1\": 1}}]<|tools_suffix|>Hello, world!\nWhat's up?"
        ),
        (s("I'm\nthinking"), s("Hello, world!\nWhat's up?"), vec![(s("special_function"), s(r#"{"arg1":1}"#))])
    );
    check(
        "apertus",
        "<|inner_prefix|>plan<|tools_prefix|>[{\"f\": {}}]<|tools_suffix|>",
        "plan",
        "<|tools_prefix|>[{\"f\": {}}]<|tools_suffix|>",
    );
}
