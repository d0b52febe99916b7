//! Real-looking outputs per reasoning format, complete and streamed char by char.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod reasoning_common;

use reasoning_common::{check, check_cases, run};
use smgpy_parsers::reasoning::{prompt_state, ReasoningFormat, ReasoningOptions, ReasoningParser};

fn opts(opened: bool, disabled: bool) -> ReasoningOptions {
    ReasoningOptions {
        prompt_opened_reasoning: opened,
        thinking_disabled: disabled,
        reasoning_not_started: false,
    }
}

#[test]
fn think_written_by_model() {
    for name in ["qwen3", "glm45", "nemotron_v3", "hy_v3", "olmo3", "deepseek_v3"] {
        check(
            name,
            "<think>\nplan 計画\n</think>\n\nAnswer",
            "\nplan 計画\n",
            "\n\nAnswer",
        );
        check(name, "no thinking here", "", "no thinking here");
        check(name, "<think>cut off at max_tokens", "cut off at max_tokens", "");
        // Once reasoning has closed, later tags are the model's text, kept verbatim (vLLM's
        // DeepSeek-R1 / Qwen3 parsers and SGLang's detectors split at the first close only).
        check(name, "<think>a</think>b<think>c</think>d", "a", "b<think>c</think>d");
        // Inside reasoning a nested opening is reasoning text; the first close ends it.
        check(name, "<think>a<think>b</think>c</think>d", "a<think>b", "c</think>d");
        check(
            name,
            "x < y and </thinking> is text",
            "",
            "x < y and </thinking> is text",
        );
    }
    // The prompt opened the block.
    assert_eq!(
        run("qwen3", "plan</think>ans", opts(true, false)),
        ("plan".into(), "ans".into())
    );
    // Thinking off: every marker is plain text, verbatim (SGLang and SMG leave output without
    // reasoning untouched).
    assert_eq!(
        run("qwen3", "</think>ans <think>", opts(false, true)),
        ("".into(), "</think>ans <think>".into())
    );
    // The prompt did not open reasoning: a stray close is text too (SGLang's Qwen3 detector with
    // `force_reasoning=False`, SMG's base parser: text without `<think>` comes back unchanged).
    assert_eq!(
        run("qwen3", "ans</think> more", opts(false, false)),
        ("".into(), "ans</think> more".into())
    );
}

#[test]
fn think_implied() {
    for name in [
        "deepseek_r1",
        "step3",
        "step3p5",
        "minimax_m2",
        "qwen3-thinking",
        "deepseek-r1",
        "qwq",
        // vLLM's `kimi_k2` and `glm47` (their templates open the block).
        "kimi_k2",
        "glm47",
    ] {
        check_cases(
            name,
            &[
                ("plan\n</think>\n\nAnswer", "plan\n", "\n\nAnswer"),
                ("<think>\nplan</think>Answer", "\nplan", "Answer"),
                ("cut off", "cut off", ""),
            ],
        );
        assert_eq!(
            run(name, "all answer", opts(false, true)),
            ("".into(), "all answer".into())
        );
    }
}

#[test]
fn tool_section_inside_reasoning_reaches_content() {
    let text = "thinking<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0";
    assert_eq!(
        run("kimi_k2", text, opts(true, false)),
        (
            "thinking".into(),
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0".into()
        )
    );
    let ds = "plan<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f";
    assert_eq!(
        run("deepseek_r1", ds, opts(false, false)).1,
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f"
    );
}

#[test]
fn append_think() {
    check(
        "minimax_m2_append_think",
        "plan</think>ans",
        "",
        "<think>plan</think>ans",
    );
    assert_eq!(
        run("minimax_m2_append_think", "ans", opts(false, true)),
        ("".into(), "ans".into())
    );
}

#[test]
fn other_delimiters() {
    check("kimi", "◁think▷思考◁/think▷答え", "思考", "答え");
    check(
        "seed_oss",
        "<seed:think>r<seed:cot_budget_reflect>5 left</seed:cot_budget_reflect></seed:think>c",
        "r<seed:cot_budget_reflect>5 left</seed:cot_budget_reflect>",
        "c",
    );
    check(
        "mistral",
        "[THINK]r[/THINK]c[TOOL_CALLS]f[ARGS]{}",
        "r",
        "c[TOOL_CALLS]f[ARGS]{}",
    );
    check("minimax_m3", "</mm:think><mm:think>思考</mm:think>答案", "思考", "答案");
    check(
        "kimi_k3",
        "<|open|>think<|sep|>r<|close|>think<|sep|><|open|>response<|sep|>c<|close|>response<|sep|><|open|>tools<|sep|>",
        "r",
        "c<|open|>tools<|sep|>",
    );
}

#[test]
fn cohere() {
    // The turn's end token never reaches content (vLLM's Cohere parsers keep special tokens).
    check(
        "cohere_command3",
        "<|START_RESPONSE|>Hi.<|END_RESPONSE|><|END_OF_TURN_TOKEN|>",
        "",
        "Hi.",
    );
    for name in ["cohere_command3", "cohere_command4", "cohere_cmd"] {
        check_cases(
            name,
            &[
                (
                    "<|START_THINKING|>plan<|END_THINKING|><|START_RESPONSE|>Hi<|END_RESPONSE|>",
                    "plan",
                    "Hi",
                ),
                (
                    "<|START_THINKING|>p<|END_THINKING|><|START_TEXT|>Hi<|END_TEXT|>",
                    "p",
                    "Hi",
                ),
                (
                    "<|START_THINKING|>p<|END_THINKING|><|START_ACTION|>[{\"tool_name\":\"f\"}]<|END_ACTION|>",
                    "p",
                    "<|START_ACTION|>[{\"tool_name\":\"f\"}]<|END_ACTION|>",
                ),
            ],
        );
    }
}

#[test]
fn harmony() {
    let text =
        "<|channel|>analysis<|message|>User asks.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>";
    check("openai_gptoss", text, "User asks.", "Hello!");
    let call = "<|channel|>analysis<|message|>Need tool.<|end|><|start|>assistant<|channel|>commentary \
                to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>";
    // Without a tool-call parser behind it, a call is nobody's text (`tests/harmony.rs` has the
    // chained cases).
    check("openai_gptoss", call, "Need tool.", "");
    check("gpt-oss", "plain", "", "plain");
}

#[test]
fn gemma4() {
    check(
        "gemma4",
        "<|channel>thought\nstep 1<channel|>The answer",
        "step 1",
        "The answer",
    );
    check(
        "gemma4",
        "<|channel>thought\na<channel|>x<|channel>thought\nb<channel|>y",
        "ab",
        "xy",
    );
    check("gemma4", "<|channel>thoughtless", "less", "");
    // vLLM's Gemma 4 reasoning parser: a channel opened without its `thought` header is
    // thinking too; `run` also streams it char by char, so `<|channel>` arrives split.
    check("gemma4", "<|channel>plan it<channel|>Answer", "plan it", "Answer");
    check("gemma4", "<|channel>\nplan<channel|>A<|tool_response>", "\nplan", "A");
}

/// Reasoning markers once reasoning has ended, with thinking disabled, or with no reasoning
/// open are the model's text (vLLM's DeepSeek-R1 / Qwen3 / OLMo 3 parsers, SGLang's detectors
/// and SMG's base parser split at the first close only and return text without an opening
/// unchanged).
#[test]
fn markers_after_reasoning_are_content() {
    for name in ["deepseek_r1", "qwen3", "olmo3", "nemotron_v3", "glm45"] {
        let (r, c) = run(
            name,
            "<think>plan</think>Use <think> and </think> tags.",
            opts(false, false),
        );
        assert_eq!(
            (r.as_str(), c.as_str()),
            ("plan", "Use <think> and </think> tags."),
            "{name}"
        );
        let (r, c) = run(name, "Use </think> here.", opts(false, true));
        assert_eq!((r.as_str(), c.as_str()), ("", "Use </think> here."), "{name}");
    }
    // DeepSeek-R1: the prompt opened the block and the model writes `<think>` again at once
    // (dropped), then a nested one later (kept).
    assert_eq!(
        run("deepseek_r1", "<think>a <think> b</think>c", opts(true, false)),
        ("a <think> b".into(), "c".into())
    );
    // A prompt state that says reasoning was not started is honoured over the implied opening.
    let not_started = ReasoningOptions {
        reasoning_not_started: true,
        ..ReasoningOptions::default()
    };
    assert_eq!(
        run("deepseek_r1", "Hello</think>", not_started.clone()),
        ("".into(), "Hello</think>".into())
    );
    assert_eq!(
        run("deepseek_r1", "<think>x</think>y", not_started),
        ("x".into(), "y".into())
    );
    assert_eq!(
        run("deepseek_r1", "Hello</think>", ReasoningOptions::default()),
        ("Hello".into(), "".into())
    );
}

#[test]
fn inkling() {
    let text =
        "<|message_model|><|content_thinking|>hmm<|end_message|><|message_model|><|content_text|>Hi<|end_message|>";
    check("inkling", text, "hmm", "Hi");
    let tool = "<|message_model|>get<|content_invoke_tool_json|>{\"name\":\"get\",\"args\":{}}<|end_message|>";
    check("inkling", tool, "", tool);
}

#[test]
fn answer_tags() {
    check(
        "hunyuan_a13b",
        "<think>\nr\n</think>\n<answer>\nc\n</answer>",
        "\nr\n",
        "\n\nc\n",
    );
    check(
        "ernie45",
        "r\n</think>\n\n<response>\nc\n</response>\n",
        "r\n",
        "\n\n\nc\n\n",
    );
    check("ernie45", "r</think>c", "r", "c");
}

#[test]
fn phrases() {
    check(
        "granite",
        "Here is my thought process: r Here is my response: c",
        " r ",
        " c",
    );
    check("granite", "<think>r</think><response>c</response>", "r", "c");
    check("granite", "just an answer", "", "just an answer");
    check(
        "apriel",
        "steps 1 2\n[BEGIN FINAL RESPONSE]\nAnswer\n[END FINAL RESPONSE]",
        "steps 1 2\n",
        "\nAnswer\n",
    );
}

#[test]
fn solar_segments() {
    check(
        "solar_open",
        "<|think|>r<|end|><|begin|>assistant<|content|>c<|end|>",
        "r",
        "c",
    );
}

#[test]
fn prompt_state_drives_parser() {
    let f: ReasoningFormat = "qwen3".parse().unwrap();
    let o = prompt_state(f, "<|im_start|>assistant\n<think>\n");
    assert_eq!(run("qwen3", "r</think>c", o), ("r".into(), "c".into()));
    let o = prompt_state(f, "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    assert_eq!(run("qwen3", "c", o), ("".into(), "c".into()));
    let r1: ReasoningFormat = "deepseek_r1".parse().unwrap();
    let o = prompt_state(r1, "<｜Assistant｜></think>");
    assert_eq!(run("deepseek_r1", "c", o), ("".into(), "c".into()));
}

#[test]
fn partial_markers_are_held_not_leaked() {
    let f: ReasoningFormat = "qwen3".parse().unwrap();
    let mut p = ReasoningParser::new(f, opts(true, false));
    let d = p.push("abc</thi");
    assert_eq!(d.reasoning, "abc");
    let d = p.push("nk>def");
    assert_eq!((d.reasoning.as_str(), d.content.as_str()), ("", "def"));
    // A held prefix that turns out not to be a marker is released.
    let mut p = ReasoningParser::new(f, opts(false, false));
    assert_eq!(p.push("a <thi").content, "a ");
    assert_eq!(p.push("s").content, "<this");
    assert_eq!(p.push("<").content, "");
    assert_eq!(p.finish().content, "<");
}
