#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use smgpy_template::{ChatTemplate, DateTime, RenderArgs, TemplateError};

fn tokens() -> Map<String, Value> {
    json!({"bos_token": "<s>", "eos_token": "</s>"})
        .as_object()
        .unwrap()
        .clone()
}

fn render(src: &str, messages: Value) -> Result<String, TemplateError> {
    let t = ChatTemplate::new(src, tokens()).unwrap();
    t.render(&RenderArgs {
        messages: messages.as_array().unwrap().clone(),
        ..RenderArgs::default()
    })
}

#[test]
fn is_send_sync_and_cheap_to_clone() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<ChatTemplate>();
}

#[test]
fn renders_from_many_threads() {
    let t = ChatTemplate::new("{% for m in messages %}{{ m.content }}{% endfor %}", tokens()).unwrap();
    std::thread::scope(|s| {
        for i in 0..4 {
            let t = t.clone();
            s.spawn(move || {
                let args = RenderArgs {
                    messages: vec![json!({"role": "user", "content": format!("m{i}")})],
                    ..RenderArgs::default()
                };
                assert_eq!(t.render(&args).unwrap(), format!("m{i}"));
            });
        }
    });
}

#[test]
fn raise_exception_surfaces_its_message() {
    let err = render("{{ raise_exception('Conversation roles must alternate') }}", json!([])).unwrap_err();
    match err {
        TemplateError::Raised { message } => assert_eq!(message, "Conversation roles must alternate"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn syntax_errors_carry_line_and_reason() {
    let err = ChatTemplate::new("line one\n{% if x %}\n{% endfor %}", Map::new()).unwrap_err();
    match err {
        TemplateError::Syntax { line, reason, .. } => {
            assert_eq!(line, 3);
            assert!(!reason.is_empty());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn other_failures_are_render_errors() {
    let err = render(
        "{{ messages[0].content.nope.deeper }}",
        json!([{"role": "user", "content": "x"}]),
    )
    .unwrap_err();
    assert!(matches!(err, TemplateError::Render { .. }), "{err:?}");
}

#[test]
fn none_keys_are_dropped_and_reasoning_aliased() {
    let src = "{% for m in messages %}{{ m.content is defined }}|{{ m.thinking }}|{{ m.reasoning_content }}|{{ m|list|join(',') }};{% endfor %}";
    let out = render(src, json!([{"role": "assistant", "content": null, "reasoning": "r"}])).unwrap();
    assert_eq!(out, "False|r|r|thinking,role,reasoning,reasoning_content;");
}

#[test]
fn tools_is_defined_but_none_when_absent() {
    let out = render("{{ tools is defined }} {{ tools is none }} {{ tools }}", json!([])).unwrap();
    assert_eq!(out, "True True None");
    let err = render("{% for t in tools %}{% endfor %}", json!([])).unwrap_err();
    assert!(matches!(err, TemplateError::Render { .. }));
}

#[test]
fn python_values_print_like_python() {
    let out = render(
        "{{ messages[0].content }} {{ messages[0].x }} {{ messages[0].n|tojson }} {{ messages[0].b }}",
        json!([{"content": [{"type": "text", "text": "a"}], "x": 1e-7, "n": {"big": 12345678901234_i64, "neg": -0.0}, "b": true}]),
    )
    .unwrap();
    assert_eq!(
        out,
        "[{'type': 'text', 'text': 'a'}] 1e-07 {\"big\": 12345678901234, \"neg\": -0.0} True"
    );
}

#[test]
fn python_string_methods() {
    let out = render(
        "{{ ' a b '.split()|join('|') }} {{ 'x,y'.split(',')[1] }} {{ '<think>x</think>y'.split('</think>')[-1].lstrip('\\n') }} {{ 'abc'.startswith(('z', 'a')) }} {{ 'ab'.upper() }} {{ {'k': 1}.get('z', 2) }}",
        json!([]),
    )
    .unwrap();
    assert_eq!(out, "a|b y y True AB 2");
}

#[test]
fn namespace_refuses_underscore_names_and_dict_works() {
    assert!(render("{% set ns = namespace(_x=1) %}", json!([])).is_err());
    assert_eq!(
        render("{{ dict(a=1, b='x')|tojson }}", json!([])).unwrap(),
        "{\"a\": 1, \"b\": \"x\"}"
    );
}

#[test]
fn generation_blocks_render_their_body() {
    assert_eq!(
        render("a{% generation %}b{% endgeneration %}c", json!([])).unwrap(),
        "abc"
    );
}

#[test]
fn strftime_now_can_be_frozen() {
    let t = ChatTemplate::new("{{ strftime_now('%d %b %Y') }}", Map::new()).unwrap();
    let t = t.with_now(DateTime::FIXTURE).unwrap();
    assert_eq!(t.render(&RenderArgs::default()).unwrap(), "15 Jan 2025");
}

#[test]
fn continue_final_message_cuts_after_the_message() {
    let t = ChatTemplate::new(
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}",
        Map::new(),
    )
    .unwrap();
    let args = RenderArgs {
        messages: vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": "Sure, "}),
        ],
        continue_final_message: true,
        ..RenderArgs::default()
    };
    assert_eq!(t.render(&args).unwrap(), "<user>hi</user><assistant>Sure, ");
}

/// The template that `dir` gives, rendered with no messages.
fn render_dir(dir: &std::path::Path) -> String {
    ChatTemplate::from_model_dir(dir)
        .unwrap()
        .render(&RenderArgs::default())
        .unwrap()
}

#[test]
fn model_dir_discovery_order_and_special_tokens() {
    let dir = std::env::temp_dir().join(format!("smgpy-template-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = json!({
        "bos_token": {"__type": "AddedToken", "content": "<|begin|>"},
        "eos_token": "<|end|>",
        "chat_template": [{"name": "default", "template": "D{{ bos_token }}"}, {"name": "tool_use", "template": "T{{ eos_token }}"}]
    });
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    assert_eq!(render_dir(&dir), "D<|begin|>");
    let t = ChatTemplate::from_model_dir(&dir).unwrap();
    assert_eq!(
        t.render(&RenderArgs {
            tools: Some(vec![]),
            ..RenderArgs::default()
        })
        .unwrap(),
        "T<|end|>"
    );

    std::fs::write(
        dir.join("chat_template.json"),
        json!({"chat_template": "J"}).to_string(),
    )
    .unwrap();
    assert_eq!(render_dir(&dir), "J");
    std::fs::write(dir.join("chat_template.jinja"), "F{{ eos_token }}\n").unwrap();
    assert_eq!(render_dir(&dir), "F<|end|>");
    std::fs::remove_dir_all(&dir).unwrap();

    let missing = std::env::temp_dir().join("smgpy-template-test-missing-dir");
    assert!(matches!(
        ChatTemplate::from_model_dir(&missing),
        Err(TemplateError::NotFound { .. })
    ));
}

#[test]
fn generation_prompt_is_found() {
    let t = ChatTemplate::new(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}",
        Map::new(),
    )
    .unwrap();
    assert_eq!(
        t.generation_prompt().as_deref(),
        Some("<|im_start|>assistant\n<think>\n")
    );
    assert!(!t.supports_tools());
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-z{}%<|>\\\\ ｜▁]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("(role|content|tool_calls|name|arguments|type|text)", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Real templates never panic, whatever the messages look like.
    #[test]
    fn never_panics(messages in prop::collection::vec(arb_json(), 0..4), tools in prop::option::of(prop::collection::vec(arb_json(), 0..2))) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/chat_templates");
        let mut sources = vec!["{% for m in messages %}{{ m.content|trim }}{{ m|tojson }}{% endfor %}".to_string()];
        for name in ["Qwen3-Coder.jinja", "tool_chat_template_llama3.1_json.jinja", "deepseek-ai-DeepSeek-V3.1.jinja", "GLM-4.6.jinja"] {
            if let Ok(s) = std::fs::read_to_string(root.join(name)) {
                sources.push(s);
            }
        }
        for src in sources {
            let t = ChatTemplate::new(&src, tokens()).unwrap();
            let _ = t.render(&RenderArgs { messages: messages.clone(), tools: tools.clone(), add_generation_prompt: true, ..RenderArgs::default() });
            let _ = smgpy_template::normalize_messages(messages.clone(), t.info());
        }
    }
}

#[test]
fn dict_items_are_tuples_as_in_python() {
    let msgs = json!([{"role": "user", "content": "hi"}]);
    let src = "{{ messages[0].items()|list }}|{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}\
               |{{ (messages[0]|items|first) }}|{{ (messages[0].items()|first)[1] }}|{{ messages[0].items()|list|tojson }}";
    assert_eq!(
        render(src, msgs).unwrap(),
        "[('role', 'user'), ('content', 'hi')]|role=user;content=hi;|('role', 'user')|user\
         |[[\"role\", \"user\"], [\"content\", \"hi\"]]"
    );
}

/// jinja2 3.1's filters at their edges, rendered through a message's content; the expected text is
/// what jinja2 (through transformers) renders (`tests/test_chat_template_filters.py` compares the
/// two engines directly on a longer list).
#[test]
fn filters_match_jinja2_at_their_edges() {
    let cases = [
        // A template that pipes a message ending in a newline through `indent(first=true)`.
        ("a\nb\n", "{{ m|indent(first=true) }}", "    a\n    b\n"),
        ("a\nb\n", "{{ m|indent }}", "a\n    b\n"),
        ("a\nb\n", "{{ m|indent(2, true, true) }}", "  a\n  b\n  "),
        ("line1\n\nline3", "{{ m|indent(blank=true) }}", "line1\n    \n    line3"),
        ("", "{{ m|indent(first=true) }}", "    "),
        ("\n", "{{ m|indent(first=true) }}", "    \n"),
        ("a\r\nb\u{2028}c", "{{ m|indent }}", "a\n    b\n    c"),
        ("a\nb\n", "{{ m|indent('> ', true) }}", "> a\n> b\n"),
        ("a\nb\n", "{{ (m|safe)|indent(first=true) }}", "    a\n    b\n"),
        (
            "x",
            "{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3.14159|round(1, 'ceil') }}",
            "2.0 4.0 2.67 3.2",
        ),
        (
            "x",
            "{{ '42abc'|int }} {{ '0x1A'|int(0, 16) }} {{ ' 4_2 '|int }} {{ 'abc'|float }}",
            "0 26 42 0.0",
        ),
        ("hello-world foo_bar", "{{ m|title }}", "Hello-World Foo_bar"),
        (
            "x",
            "{{ 'ab'|center(5) }}|{{ 'the quick brown fox'|truncate(9, leeway=0) }}",
            "  ab |the...",
        ),
        ("<b>a</b> &amp; b", "{{ m|striptags }} {{ m|wordcount }}", "a & b 5"),
    ];
    for (content, src, want) in cases {
        let src = format!("{{% for message in messages %}}{{% set m = message.content %}}{src}{{% endfor %}}");
        let got = render(&src, json!([{"role": "user", "content": content}])).unwrap();
        assert_eq!(got, want, "{src} on {content:?}");
    }
}
