//! Each tool-call grammar accepts what the model's chat template writes for a call, and the
//! server's tool parser reads that text as the same calls: constrained output is read exactly
//! as free output is.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use smgpy_parsers::tool::{parse_complete, ToolDef};
use smgpy_parsers::ToolFormat;
use smgpy_structured::tools::{grammar, supports, Mode, ToolSpec};
use smgpy_structured::{GrammarMatcher, Source, Vocabulary};

fn weather() -> Value {
    json!({"type": "object", "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1}},
        "required": ["city", "unit"]})
}

fn clock() -> Value {
    json!({"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]})
}

/// One token per byte, and an end token.
fn vocab() -> Vocabulary {
    let mut tokens: Vec<Option<Vec<u8>>> = (0u8..=255).map(|b| Some(vec![b])).collect();
    tokens.push(Some(b"<|end|>".to_vec()));
    Vocabulary::new(tokens, &[256], vec![256], 257).unwrap()
}

fn matcher(lark: String) -> GrammarMatcher {
    vocab().compile(&Source::Grammar(lark)).unwrap().matcher()
}

/// Whether `text` is a complete output of the grammar.
fn accepts(m: &mut GrammarMatcher, text: &str) -> bool {
    for &b in text.as_bytes() {
        if !m.mask().unwrap().is_allowed(u32::from(b)) {
            return false;
        }
        m.accept(u32::from(b)).unwrap();
    }
    m.is_accepting()
}

fn specs<'a>(w: &'a Value, c: &'a Value) -> Vec<ToolSpec<'a>> {
    vec![
        ToolSpec {
            name: "get_weather",
            parameters: Some(w),
            strict: false,
        },
        ToolSpec {
            name: "get_time",
            parameters: Some(c),
            strict: false,
        },
    ]
}

/// The grammar of `format` in `mode` for the two tools of [`specs`]; `None` where the format has
/// none for that mode.
fn two_tools(format: ToolFormat, mode: Mode<'_>) -> Option<String> {
    let (w, c) = (weather(), clock());
    grammar(format, &specs(&w, &c), mode).unwrap()
}

fn defs() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "get_weather".into(),
            parameters: Some(weather()),
        },
        ToolDef {
            name: "get_time".into(),
            parameters: Some(clock()),
        },
    ]
}

/// `(format, two calls as the chat template writes them)`.
fn cases() -> Vec<(ToolFormat, String)> {
    let w = r#"{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}"#;
    let t = r#"{"name": "get_time", "arguments": {"timezone": "CET"}}"#;
    vec![
        (ToolFormat::Hermes, format!("<tool_call>\n{w}\n</tool_call>\n<tool_call>\n{t}\n</tool_call>")),
        (ToolFormat::LongCat, format!("<longcat_tool_call>{w}</longcat_tool_call>\n<longcat_tool_call>{t}</longcat_tool_call>")),
        (
            ToolFormat::Llama3Json,
            format!("{}; {}", w.replace("arguments", "parameters"), t.replace("arguments", "parameters")),
        ),
        (ToolFormat::Granite, format!("<|tool_call|>[{w}, {t}]")),
        (ToolFormat::Jamba, format!("<tool_calls>[{w}, {t}]</tool_calls>")),
        (ToolFormat::NemotronJson, format!("<TOOLCALL>[{w}, {t}]</TOOLCALL>")),
        (ToolFormat::Phi4Mini, format!("functools[{w}, {t}]")),
        (
            ToolFormat::Mistral,
            r#"[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "unit": "celsius"}[TOOL_CALLS]get_time[ARGS]{"timezone": "CET"}"#.into(),
        ),
        (
            ToolFormat::DeepSeekV31,
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\", \"unit\": \"celsius\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"timezone\": \"CET\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>".into(),
        ),
        (
            ToolFormat::Qwen3Coder,
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=get_time>\n<parameter=timezone>\nCET\n</parameter>\n</function>\n</tool_call>".into(),
        ),
    ]
}

#[test]
fn each_format_accepts_its_own_calls_and_the_parser_reads_them() {
    for (format, text) in cases() {
        assert!(supports(format), "{format:?}");
        let lark = two_tools(format, Mode::Required { parallel: true }).unwrap();
        assert!(
            accepts(&mut matcher(lark.clone()), &text),
            "{format:?} rejects\n{text}\n{lark}"
        );
        let parsed = parse_complete(&text, format, Some(defs()));
        let calls: Vec<(&str, Value)> = parsed
            .calls
            .iter()
            .map(|c| (c.name.as_str(), serde_json::from_str(&c.arguments).unwrap()))
            .collect();
        assert_eq!(
            calls,
            [
                ("get_weather", json!({"city": "Paris", "unit": "celsius"})),
                ("get_time", json!({"timezone": "CET"}))
            ],
            "{format:?}"
        );
        assert_eq!(parsed.normal_text.trim(), "", "{format:?}");
    }
}

#[test]
fn arguments_follow_each_tools_schema() {
    let lark = two_tools(ToolFormat::Hermes, Mode::Required { parallel: false }).unwrap();
    let bad_unit = r#"<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}}
</tool_call>"#;
    assert!(!accepts(&mut matcher(lark.clone()), bad_unit));
    let bad_days = r#"<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 0}}
</tool_call>"#;
    assert!(!accepts(&mut matcher(lark.clone()), bad_days));
    let unknown = r#"<tool_call>
{"name": "get_news", "arguments": {}}
</tool_call>"#;
    assert!(!accepts(&mut matcher(lark.clone()), unknown));
    // Not parallel: one call only.
    let (_, two) = &cases()[0];
    assert!(!accepts(&mut matcher(lark.clone()), two));
    // Nothing but the call: no text before it.
    assert!(!accepts(&mut matcher(lark), "Sure."));
}

#[test]
fn a_named_function_is_that_call_only() {
    let lark = two_tools(ToolFormat::Qwen3Coder, Mode::Named("get_time")).unwrap();
    let time = "<tool_call>\n<function=get_time>\n<parameter=timezone>\nCET\n</parameter>\n</function>\n</tool_call>";
    assert!(accepts(&mut matcher(lark.clone()), time));
    let weather = "<tool_call>\n<function=get_weather>\n";
    assert!(!accepts(&mut matcher(lark), weather));
    assert!(two_tools(ToolFormat::Hermes, Mode::Named("nope")).is_none());
}

#[test]
fn auto_leaves_text_free_until_a_call_opens() {
    let lark = two_tools(ToolFormat::Hermes, Mode::Auto { parallel: true }).unwrap();
    assert!(accepts(&mut matcher(lark.clone()), "Just text, no call."));
    let (_, calls) = &cases()[0];
    assert!(accepts(&mut matcher(lark.clone()), &format!("Let me check.\n{calls}")));
    // Once `<tool_call>` is written, the call is enforced.
    let mut m = matcher(lark);
    assert!(!accepts(&mut m, "Hm <tool_call>\nnot json"));
    // A format with no opening marker cannot wait for one.
    assert!(two_tools(ToolFormat::Llama3Json, Mode::Auto { parallel: true }).is_none());
}

#[test]
fn strict_tools_refuse_what_cannot_be_enforced() {
    let unique = json!({"type": "object", "properties": {"ids": {"type": "array", "uniqueItems": true}}});
    let strict = [ToolSpec {
        name: "f",
        parameters: Some(&unique),
        strict: true,
    }];
    let e = grammar(ToolFormat::Hermes, &strict, Mode::Required { parallel: true }).unwrap_err();
    assert!(e.to_string().contains("uniqueItems"), "{e}");
    // Not strict: the keyword is ignored, the rest still holds.
    let loose = [ToolSpec {
        strict: false,
        ..strict[0]
    }];
    assert!(grammar(ToolFormat::Hermes, &loose, Mode::Required { parallel: true })
        .unwrap()
        .is_some());
    // Formats without a grammar here keep the JSON form.
    assert!(!supports(ToolFormat::Json));
    assert!(grammar(ToolFormat::Json, &loose, Mode::Required { parallel: true })
        .unwrap()
        .is_none());
}

/// Arguments with a nested model, as pydantic and the agent SDKs write them: the model sits in
/// `$defs` and is referred to as `#/$defs/Stop` from the schema's root.
fn booking() -> Value {
    json!({
        "$defs": {"Stop": {"type": "object", "properties": {
            "city": {"type": "string"}, "nights": {"type": "integer"}}, "required": ["city", "nights"]}},
        "type": "object",
        "properties": {"stops": {"type": "array", "items": {"$ref": "#/$defs/Stop"}}},
        "required": ["stops"]})
}

/// `(format, one call to "book" as the chat template writes it)`, with `args` as the arguments.
fn booking_cases(args: &str) -> Vec<(ToolFormat, String)> {
    let call = format!(r#"{{"name": "book", "arguments": {args}}}"#);
    let stops = args.trim_start_matches(r#"{"stops": "#).trim_end_matches('}');
    vec![
        (ToolFormat::Hermes, format!("<tool_call>\n{call}\n</tool_call>")),
        (ToolFormat::LongCat, format!("<longcat_tool_call>{call}</longcat_tool_call>")),
        (ToolFormat::Llama3Json, call.replace("arguments", "parameters")),
        (ToolFormat::Granite, format!("<|tool_call|>[{call}]")),
        (ToolFormat::Jamba, format!("<tool_calls>[{call}]</tool_calls>")),
        (ToolFormat::NemotronJson, format!("<TOOLCALL>[{call}]</TOOLCALL>")),
        (ToolFormat::Phi4Mini, format!("functools[{call}]")),
        (ToolFormat::Mistral, format!("[TOOL_CALLS]book[ARGS]{args}")),
        (
            ToolFormat::Mistral,
            format!(r#"[TOOL_CALLS][{{"name": "book", "arguments": {args}, "id": "a1b2c3d4e"}}]"#),
        ),
        (
            ToolFormat::DeepSeekV31,
            format!("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>book<｜tool▁sep｜>{args}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
        ),
        (
            ToolFormat::Qwen3Coder,
            format!("<tool_call>\n<function=book>\n<parameter=stops>\n{stops}\n</parameter>\n</function>\n</tool_call>"),
        ),
    ]
}

#[test]
fn nested_models_in_defs_are_enforced_in_every_format_and_mode() {
    let b = booking();
    let tools = [ToolSpec {
        name: "book",
        parameters: Some(&b),
        strict: true,
    }];
    let good = booking_cases(r#"{"stops": [{"city": "Paris", "nights": 2}]}"#);
    let bad = booking_cases(r#"{"stops": [{"city": "Paris", "nights": "two"}]}"#);
    for ((format, text), (_, wrong)) in good.into_iter().zip(bad) {
        for mode in [
            Mode::Required { parallel: false },
            Mode::Named("book"),
            Mode::Auto { parallel: false },
        ] {
            let Some(lark) = grammar(format, &tools, mode).unwrap() else {
                assert!(matches!(mode, Mode::Auto { .. }), "{format:?} {mode:?}");
                continue;
            };
            assert!(
                accepts(&mut matcher(lark.clone()), &text),
                "{format:?} {mode:?} rejects\n{text}\n{lark}"
            );
            assert!(
                !accepts(&mut matcher(lark), &wrong),
                "{format:?} {mode:?} accepts\n{wrong}"
            );
        }
    }
}
