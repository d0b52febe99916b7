//! gpt-oss Harmony, first class: the reasoning parser alone, the tool-call parser alone, and the
//! two chained as the server chains them (reasoning first, with tool calls kept for the tool
//! parser). Every fixture is a real output transcribed from the test named in its comment, and
//! each is checked complete and streamed char by char (and the chain under two-way splits).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod reasoning_common;
mod tool_common;

use proptest::prelude::*;
use reasoning_common::stream_chars;
use smgpy_parsers::reasoning::{self, ReasoningFormat, ReasoningOptions, ReasoningParser};
use smgpy_parsers::tool::{parse_complete, ToolCallParser, ToolFormat, ToolParseResult};
use tool_common::{check_streaming, stream_through};

const A: &str = "<|channel|>analysis<|message|>";
const S: &str = "<|start|>assistant";
const F: &str = "<|channel|>final<|message|>";

/// The reasoning parser alone, complete and char by char: `(reasoning, content)`.
fn reason(text: &str) -> (String, String) {
    reason_with(text, false)
}

fn reason_with(text: &str, keep: bool) -> (String, String) {
    let f = ReasoningFormat::OpenaiGptoss;
    let mut whole = ReasoningParser::new(f, ReasoningOptions::default()).keep_tool_calls(keep);
    let mut full = whole.push(text);
    full.append(&whole.finish());
    let p = ReasoningParser::new(f, ReasoningOptions::default()).keep_tool_calls(keep);
    let (r, c) = stream_chars(p, text);
    assert_eq!(
        (&full.reasoning, &full.content),
        (&r, &c),
        "streamed != complete: {text:?}"
    );
    if !keep {
        let complete = reasoning::parse_complete(text, f, ReasoningOptions::default());
        assert_eq!((&complete.reasoning, &complete.content), (&r, &c));
    }
    (r, c)
}

/// The tool-call parser alone, complete (and streamed in every two-way split and char by char).
fn tools(text: &str) -> (String, Vec<(String, String)>) {
    check_streaming(text, ToolFormat::Harmony, None);
    let r = parse_complete(text, ToolFormat::Harmony, None);
    (
        r.normal_text,
        r.calls.into_iter().map(|c| (c.name, c.arguments)).collect(),
    )
}

/// Reasoning then tool calls, as the server's pipeline chains them, streamed in `pieces`.
fn chain(pieces: &[&str]) -> (String, String, Vec<(String, String)>) {
    let mut r = ReasoningParser::new(ReasoningFormat::OpenaiGptoss, ReasoningOptions::default()).keep_tool_calls(true);
    let mut reasoning = String::new();
    let mut content_pieces = Vec::new();
    for p in pieces {
        let d = r.push(p);
        reasoning += &d.reasoning;
        content_pieces.push(d.content);
    }
    let d = r.finish();
    reasoning += &d.reasoning;
    content_pieces.push(d.content);
    let refs: Vec<&str> = content_pieces.iter().map(String::as_str).collect();
    let out: ToolParseResult = stream_through(ToolCallParser::new(ToolFormat::Harmony, None), &refs);
    (
        reasoning,
        out.normal_text,
        out.calls.into_iter().map(|c| (c.name, c.arguments)).collect(),
    )
}

/// `chain` over the whole text at once, over every two-way split, char by char: all the same.
fn chained(text: &str) -> (String, String, Vec<(String, String)>) {
    let whole = chain(&[text]);
    for (i, _) in text.char_indices() {
        assert_eq!(chain(&[&text[..i], &text[i..]]), whole, "split at {i} of {text:?}");
    }
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(chain(&refs), whole, "char by char {text:?}");
    whole
}

fn call(name: &str, args: &str) -> (String, String) {
    (name.to_string(), args.to_string())
}

#[test]
fn reasoning_channels() {
    // (output, reasoning, content)
    let cases: Vec<(String, &str, &str)> = vec![
        // vllm-mlx tests/test_harmony_parsers.py::test_extract_analysis_and_final (a newline after
        // every token).
        ("<|channel|>analysis\n<|message|>Let me think step by step.\n<|end|>\n<|channel|>final\n<|message|>The answer is 42.\n<|return|>".into(), "Let me think step by step.", "The answer is 42."),
        // vllm-mlx ::test_multiple_analysis_blocks.
        ("<|channel|>analysis\n<|message|>First thought.\n<|end|>\n<|channel|>analysis\n<|message|>Second thought.\n<|end|>\n<|channel|>final\n<|message|>Result.\n<|return|>".into(), "First thought.Second thought.", "Result."),
        // vllm-mlx ::test_no_analysis_channel and ::test_analysis_only_no_final.
        ("<|channel|>final\n<|message|>Direct answer.\n<|return|>".into(), "", "Direct answer."),
        ("<|channel|>analysis\n<|message|>Just thinking...\n<|end|>".into(), "Just thinking...", ""),
        // vllm-mlx ::test_analysis_with_commentary_and_final: a tool call is nobody's text here.
        ("<|channel|>analysis\n<|message|>Need to call a tool.\n<|end|>\n<|channel|>commentary to=functions.search\n<|constrain|>json\n<|message|>{\"q\": \"test\"}\n<|call|>\n<|channel|>final\n<|message|>Found results.\n<|return|>".into(), "Need to call a tool.", "Found results."),
        // llama.cpp tests/test-chat.cpp GPT_OSS: a final message without `<|return|>` (a stop token).
        (format!("{A}I'm\nthinking<|end|>{S}{F}Hello, world!\nWhat's up?"), "I'm\nthinking", "Hello, world!\nWhat's up?"),
        // vLLM tests/reasoning/test_gptoss_reasoning_parser.py: `<|constrain|>` in a final header,
        // any case and spacing; a final header without `<|start|>assistant`.
        (format!("{A}This is reasoning<|end|>{S}<|channel|>final<|constrain|> JSON <|message|>This is the rest"), "This is reasoning", "This is the rest"),
        (format!("{A}This is reasoning<|end|><|channel|>final<|message|>This is the rest"), "This is reasoning", "This is the rest"),
        // SGLang test/srt/test_harmony_parser.py::test_consecutive_blocks_same_type and
        // ::test_parse_with_interspersed_text; whitespace inside a message is kept.
        (format!("{A}first reasoning<|end|>{A}second reasoning<|end|>"), "first reasoningsecond reasoning", ""),
        (format!("Some text {A}reasoning<|end|> more text {S}{F}answer<|return|> trailing text"), "reasoning", "Some text  more text answer trailing text"),
        (format!("{A}  content with spaces  <|end|>"), "  content with spaces  ", ""),
        // llama.cpp GPT_OSS: a commentary preamble is content.
        (format!("{A}I'm\nthinking<|end|>{S}<|channel|>commentary<|message|>Hello, world!\nWhat's up?<|end|>{S}<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{{\"arg1\": 1}}"), "I'm\nthinking", "Hello, world!\nWhat's up?"),
        // Plain text (no Harmony tokens at all) is content; the `<|start|>assistant` a rendered
        // conversation ends with is nothing.
        ("Just a regular response.".into(), "", "Just a regular response."),
        (format!("{F}Hi<|return|>{S}"), "", "Hi"),
    ];
    for (text, reasoning, content) in cases {
        assert_eq!(reason(&text), (reasoning.into(), content.into()), "{text:?}");
    }
}

#[test]
fn reasoning_hands_calls_to_the_tool_parser() {
    // llama.cpp GPT_OSS: output that starts mid-header, the prompt having ended with
    // `<|start|>assistant`.
    let mid = " to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 1}";
    assert_eq!(reason(mid), (String::new(), String::new()));
    assert_eq!(
        reason_with(mid, true),
        (
            String::new(),
            "<|start|>assistant to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 1}".into()
        )
    );
    // A built-in tool call and another role's message are nobody's text, kept or not.
    let builtin =
        format!("{A}x<|end|><|channel|>analysis to=browser.search<|message|>{{\"query\": \"SGLang\"}}<|call|>");
    assert_eq!(reason_with(&builtin, true), ("x".into(), String::new()));
}

#[test]
fn tool_parser_alone() {
    let sf = |args: &str| call("special_function", args);
    // llama.cpp tests/test-chat.cpp GPT_OSS (parse cases 12-14): output starting mid-header,
    // recipient in the role part, analysis channel, no `<|call|>` (a stop token).
    assert_eq!(
        tools(" to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 1}"),
        (String::new(), vec![sf(r#"{"arg1":1}"#)])
    );
    assert_eq!(
        tools(" to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{\"arg1\": 1}"),
        (String::new(), vec![sf(r#"{"arg1":1}"#)])
    );
    assert_eq!(
        tools(&format!("{A}I'm\nthinking<|end|><|start|>assistant to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{{\"arg1\": 1}}")),
        (String::new(), vec![sf(r#"{"arg1":1}"#)])
    );
    // llama.cpp GPT_OSS: a preamble is content, then the call.
    assert_eq!(
        tools(&format!("{A}I'm\nthinking<|end|>{S}<|channel|>commentary<|message|>Hello, world!\nWhat's up?<|end|>{S}<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{{\"arg1\": 1}}")),
        ("Hello, world!\nWhat's up?".into(), vec![sf(r#"{"arg1":1}"#)])
    );
    // vLLM tests/tool_parsers/test_openai_tool_parser.py::test_extract_tool_calls_with_content:
    // analysis, a call, then the final text.
    assert_eq!(
        tools(&format!("{A}User asks: \"What is the weather in Tokyo?\" based on their location.<|end|>{S}<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>{{\"location\": \"Tokyo\"}}<|call|>{S}{F}This tool call will get the weather.<|return|>")),
        ("This tool call will get the weather.".into(), vec![call("get_current_weather", r#"{"location":"Tokyo"}"#)])
    );
    // vLLM ::test_extract_tool_calls_multiple_tools, as harmony renders the six messages: JSON
    // with and without a content type, raw text kept raw, empty arguments.
    let six = format!(
        "{A}User asks.<|end|>\
         {S}<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>{{\"location\": \"Tokyo\"}}<|call|>\
         {S}<|channel|>commentary to=functions.get_user_location <|constrain|>json<|message|>{{\"location\": \"Tokyo\"}}<|call|>\
         {S}<|channel|>commentary to=functions.no_content_type<|message|>{{\"location\": \"Tokyo\"}}<|call|>\
         {S}<|channel|>commentary to=functions.not_json_no_content_type<|message|>foo<|call|>\
         {S}<|channel|>commentary to=functions.empty_args <|constrain|>json<|message|>{{}}<|call|>\
         {S}<|channel|>commentary to=functions.no_args <|constrain|>json<|message|><|call|>"
    );
    assert_eq!(
        tools(&six),
        (
            String::new(),
            vec![
                call("get_current_weather", r#"{"location":"Tokyo"}"#),
                call("get_user_location", r#"{"location":"Tokyo"}"#),
                call("no_content_type", r#"{"location":"Tokyo"}"#),
                call("not_json_no_content_type", "foo"),
                call("empty_args", "{}"),
                call("no_args", ""),
            ]
        )
    );
    // vllm-mlx tests/test_harmony_parsers.py (a newline after every token): several calls,
    // without `<|constrain|>`, raw malformed JSON, a call then the final text.
    assert_eq!(
        tools("<|start|>\n<|channel|>commentary to=functions.get_weather\n<|constrain|>json\n<|message|>{\"location\": \"SF\"}\n<|call|>\n<|channel|>commentary to=functions.get_time\n<|constrain|>json\n<|message|>{\"timezone\": \"PST\"}\n<|call|>"),
        // The newline between the calls is not content (docs/parsers.md, text around calls).
        (String::new(), vec![call("get_weather", r#"{"location":"SF"}"#), call("get_time", r#"{"timezone":"PST"}"#)])
    );
    assert_eq!(
        tools("<|channel|>commentary to=functions.simple_func\n<|message|>{\"arg\": \"value\"}\n<|call|>"),
        (String::new(), vec![call("simple_func", r#"{"arg":"value"}"#)])
    );
    assert_eq!(
        tools("<|channel|>commentary to=functions.broken_func\n<|constrain|>json\n<|message|>{invalid json here}\n<|call|>"),
        (String::new(), vec![call("broken_func", "{invalid json here}")])
    );
    assert_eq!(
        tools("<|channel|>commentary to=functions.search\n<|constrain|>json\n<|message|>{\"query\": \"python\"}\n<|call|>\n<|channel|>final\n<|message|>Here are the results.\n<|return|>"),
        ("\nHere are the results.\n".into(), vec![call("search", r#"{"query":"python"}"#)])
    );
    // openai/harmony src/tests.rs: test_simple_tool_call (a bare recipient, content type `code`,
    // no terminator) and test_tool_call_with_constrain_marker_adjacent.
    assert_eq!(
        tools(&format!("{A}User asks about the weather.<|end|>{S}<|channel|>analysis to=lookup_weather code<|message|>{{\"location\": \"Tokyo\"}}")),
        (String::new(), vec![call("lookup_weather", r#"{"location":"Tokyo"}"#)])
    );
    assert_eq!(
        tools("<|start|>assistant to=functions.get_weather<|channel|>commentary<|constrain|>json<|message|>{\"location\": \"Tokyo\"}<|end|>"),
        (String::new(), vec![call("get_weather", r#"{"location":"Tokyo"}"#)])
    );
    // sgl-router tests/tool_parser_gpt_oss.rs: namespaced recipients name the function by their
    // last part.
    assert_eq!(
        tools("<|channel|>commentary to=api.users.create<|constrain|>json<|message|>{\"name\": \"x\"}<|call|>"),
        (String::new(), vec![call("create", r#"{"name":"x"}"#)])
    );
    // SGLang test_harmony_parser.py::test_built_in_tool_call: a built-in tool is the server's,
    // not a client function (vLLM reports only `functions.` recipients).
    assert_eq!(
        tools("<|channel|>analysis to=browser.search<|message|>{\"query\": \"SGLang\"}<|call|>"),
        (String::new(), vec![])
    );
    // vLLM ::test_extract_tool_calls_no_tools; a rendered conversation's trailing `<|start|>assistant`.
    assert_eq!(
        tools(&format!("{F}This is a test<|return|>{S}")),
        ("This is a test".into(), vec![])
    );
}

#[test]
fn truncated_call_is_abandoned() {
    // llama.cpp GPT_OSS partial case: arguments cut off at `{"arg1`. The call is partial, with
    // its arguments as far as they were valid, in the complete parse as in the stream, and listed
    // as abandoned (docs/parsers.md, cut-off calls).
    let text = format!("{A}I'm\nthinking<|end|>{S}<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{{\"arg1\"");
    let (normal, calls) = tools(&text);
    assert_eq!(calls, [call("special_function", "{")]);
    assert!(!normal.contains("arg1"), "{normal:?}");
    let mut p = ToolCallParser::new(ToolFormat::Harmony, None);
    let mut d = p.push(&text);
    d.append(&p.finish());
    let streamed: Vec<_> = d
        .calls()
        .map(|c| (c.name.map(str::to_owned), c.arguments.to_owned()))
        .collect();
    assert_eq!(streamed, [(Some("special_function".to_string()), "{".to_string())]);
    assert_eq!(p.abandoned().calls, [0]);
}

#[test]
fn chained_as_the_server_chains_them() {
    let sf = || vec![call("special_function", r#"{"arg1":1}"#)];
    // llama.cpp GPT_OSS, parsed with reasoning extraction and tools together.
    assert_eq!(
        chained(&format!("{A}I'm\nthinking<|end|>{S}<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{{\"arg1\": 1}}")),
        ("I'm\nthinking".into(), String::new(), sf())
    );
    assert_eq!(
        chained(" to=functions.special_function<|channel|>commentary <|constrain|>json<|message|>{\"arg1\": 1}"),
        (String::new(), String::new(), sf())
    );
    assert_eq!(
        chained(&format!("{A}I'm\nthinking<|end|><|start|>assistant to=functions.special_function<|channel|>analysis <|constrain|>json<|message|>{{\"arg1\": 1}}")),
        ("I'm\nthinking".into(), String::new(), sf())
    );
    assert_eq!(
        chained(&format!("{A}I'm\nthinking<|end|>{S}<|channel|>commentary<|message|>Hello, world!\nWhat's up?<|end|>{S}<|channel|>commentary to=functions.special_function <|constrain|>json<|message|>{{\"arg1\": 1}}")),
        ("I'm\nthinking".into(), "Hello, world!\nWhat's up?".into(), sf())
    );
    // vLLM ::test_extract_tool_calls_with_content: analysis, call, final.
    assert_eq!(
        chained(&format!("{A}Weather needed.<|end|>{S}<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>{{\"location\": \"Tokyo\"}}<|call|>{S}{F}This tool call will get the weather.")),
        (
            "Weather needed.".into(),
            "This tool call will get the weather.".into(),
            vec![call("get_current_weather", r#"{"location":"Tokyo"}"#)]
        )
    );
}

/// One generated Harmony message: its header text (recipients, constrain marks, spacing vary),
/// its text, and what it is.
#[derive(Debug, Clone)]
enum Msg {
    Analysis(String),
    Final(String),
    Call(String, String),
}

fn msg() -> impl Strategy<Value = (Msg, String)> {
    let body = "[a-z é日\n]{0,12}".prop_map(|s| s.trim_end_matches('\n').to_string());
    let start = proptest::sample::select(vec![
        "",
        "<|start|>assistant",
        "\n<|start|>assistant",
        "<|start|>assistant\n",
    ]);
    let end = proptest::sample::select(vec!["<|end|>", "<|end|>\n", "\n<|end|>"]);
    prop_oneof![
        (
            start.clone(),
            proptest::sample::select(vec!["", "\n", " "]),
            body.clone(),
            end.clone()
        )
            .prop_map(|(s, sp, b, e)| {
                (
                    Msg::Analysis(b.clone()),
                    format!("{s}<|channel|>analysis{sp}<|message|>{b}{e}"),
                )
            }),
        (
            start.clone(),
            proptest::sample::select(vec!["", " <|constrain|>json", "<|constrain|> JSON "]),
            body,
            end
        )
            .prop_map(|(s, c, b, e)| {
                (
                    Msg::Final(b.clone()),
                    format!("{s}<|channel|>final{c}<|message|>{b}{e}"),
                )
            }),
        (
            start,
            "[a-z_]{1,8}",
            proptest::sample::select(vec![r#"{}"#, r#"{"a": 1}"#, r#"{"q": "x <|end y", "n": [1.50, true]}"#]),
            proptest::sample::select(vec![0u8, 1, 2])
        )
            .prop_map(|(s, name, args, form)| {
                let header = match form {
                    0 => format!("{s}<|channel|>commentary to=functions.{name} <|constrain|>json"),
                    // The recipient in the role part needs the role (mid-role text is only the start
                    // of an output, which the fixtures cover).
                    1 => format!(
                        "{} to=functions.{name}<|channel|>commentary json",
                        if s.is_empty() { "<|start|>assistant" } else { s }
                    ),
                    _ => format!("{s}<|channel|>commentary to=functions.{name}<|constrain|>json"),
                };
                let compact = serde_json::to_string(&serde_json::from_str::<serde_json::Value>(args).unwrap()).unwrap();
                (Msg::Call(name, compact), format!("{header}<|message|>{args}<|call|>"))
            }),
    ]
}

proptest! {
    /// A run of messages, chained and cut anywhere: reasoning is the analysis texts, content the
    /// final texts, calls the call messages, in order.
    #[test]
    fn messages_are_routed(msgs in proptest::collection::vec(msg(), 0..5), cut in any::<prop::sample::Index>()) {
        let text: String = msgs.iter().map(|(_, t)| t.as_str()).collect();
        let (mut r, mut c, mut calls) = (String::new(), String::new(), Vec::new());
        for (m, _) in &msgs {
            match m {
                Msg::Analysis(b) => r += b,
                Msg::Final(b) => c += b,
                Msg::Call(n, a) => calls.push((n.clone(), a.clone())),
            }
        }
        let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
        let at = bounds[cut.index(bounds.len())];
        let got = chain(&[&text[..at], &text[at..]]);
        prop_assert_eq!(got.clone(), chain(&[&text]));
        prop_assert_eq!((got.0, got.1.trim().to_string(), got.2), (r, c.trim().to_string(), calls), "{:?}", text);
    }
}
