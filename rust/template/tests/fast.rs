//! The fast renderer against minijinja on every shared fixture template and conversation.
//!
//! `ChatTemplate::render` tries the fast renderer first and hands the input to minijinja when the fast
//! renderer does not implement something. Whenever the fast renderer completes, its output must equal
//! minijinja's byte for byte (and minijinja must not have failed on that input). The Python differential
//! test then checks the combined renderer against transformers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use smgpy_template::{ChatTemplate, DateTime, RenderArgs, Renderer, FAST_PATH_NOT_TAKEN};
use std::path::{Path, PathBuf};

fn fixtures() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures");
    if root.join("conversations.json").is_file() {
        return Some(root);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "shared fixtures missing at {}",
        root.display()
    );
    eprintln!("skipped: shared fixtures not found at {}", root.display());
    None
}

fn templates(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            templates(&path, out);
        } else if path.extension().is_some_and(|e| e == "jinja") {
            out.push(path);
        }
    }
}

fn tokens() -> Map<String, Value> {
    let v = json!({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"});
    v.as_object().cloned().unwrap_or_default()
}

#[test]
fn fast_renders_equal_minijinja_on_every_fixture() {
    let Some(root) = fixtures() else { return };
    let conversations: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(root.join("conversations.json")).unwrap()).unwrap();
    let mut paths = Vec::new();
    templates(&root.join("chat_templates"), &mut paths);
    paths.sort();
    let now = DateTime::FIXTURE;
    let (mut compiled, mut fast, mut handed_over, mut pairs) = (0, 0, 0, 0);
    let mut where_handed_over: std::collections::BTreeMap<String, usize> = Default::default();
    let mut unsupported: std::collections::BTreeMap<String, usize> = Default::default();
    let mut not_compiled = Vec::new();
    for path in &paths {
        let source = std::fs::read_to_string(path).unwrap();
        let Ok(template) = ChatTemplate::new(&source, tokens()).and_then(|t| t.with_now(now)) else {
            continue;
        };
        for what in template.fast_unsupported() {
            *unsupported.entry(what).or_default() += 1;
        }
        if template.has_fast_path() {
            compiled += 1;
        } else {
            not_compiled.push(path.file_name().unwrap().to_string_lossy().to_string());
        }
        let fast_before = fast;
        for conv in &conversations {
            pairs += 1;
            let args = RenderArgs {
                messages: conv["messages"].as_array().cloned().unwrap_or_default(),
                tools: conv["tools"].as_array().cloned(),
                add_generation_prompt: conv["add_generation_prompt"].as_bool().unwrap_or(false),
                kwargs: conv["kwargs"].as_object().cloned().unwrap_or_default(),
                ..RenderArgs::default()
            };
            let reference = template
                .render_with(&args, Renderer::Minijinja)
                .map_err(|e| e.to_string());
            let got = template
                .render_with(&args, Renderer::FastOnly)
                .map_err(|e| e.to_string());
            match got {
                Ok(text) => {
                    fast += 1;
                    assert_eq!(
                        Ok(&text),
                        reference.as_ref(),
                        "{} x {}: fast renderer differs from minijinja",
                        path.display(),
                        conv["name"]
                    );
                }
                Err(e) => {
                    assert!(e.contains(FAST_PATH_NOT_TAKEN), "{e}");
                    handed_over += 1;
                    let line = e
                        .rsplit(' ')
                        .next()
                        .unwrap_or_default()
                        .trim_end_matches(')')
                        .to_string();
                    *where_handed_over.entry(line).or_default() += 1;
                }
            }
            // What `render` returns is always minijinja's result.
            let auto = template.render(&args).map_err(|e| e.to_string());
            assert_eq!(auto, reference, "{} x {}", path.display(), conv["name"]);
        }
        if std::env::var_os("SMGPY_FAST_REPORT").is_some() {
            eprintln!(
                "{:>3}/{} fast  {}  {:?}",
                fast - fast_before,
                conversations.len(),
                path.file_name().unwrap_or_default().to_string_lossy(),
                template.fast_unsupported()
            );
        }
    }
    eprintln!(
        "fast renderer: {compiled}/{} templates compiled; {fast} of {pairs} renders fast, {handed_over} handed to minijinja; not compiled: {not_compiled:?}",
        paths.len()
    );
    eprintln!("hand-overs by fast/run.rs line: {where_handed_over:?}");
    eprintln!("unsupported constructs (templates using them): {unsupported:?}");
    assert_eq!(
        compiled,
        paths.len(),
        "every template compiles (unsupported parts hand over at run time)"
    );
    // Most renders that transformers completes should stay on the fast path; a drop means a regression.
    assert!(
        fast * 3 > pairs * 2,
        "only {fast} of {pairs} fixture renders took the fast path"
    );
}

/// Templates exercising each construct the fast renderer implements (and some it hands over).
const FEATURE_TEMPLATES: &[&str] = &[
    // Loops: every loop attribute, nested loops, break/continue, for-else, filtered loops, pairs.
    "{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ loop.index0 }},{{ loop.revindex }},{{ loop.revindex0 }},\
     {{ loop.first }},{{ loop.last }},{{ loop.previtem.role if loop.previtem is defined else '-' }},\
     {{ loop.nextitem.role if loop.nextitem is defined else '-' }}\
     {% for k, v in m|items %}[{{ k }}={{ v is string }}]{% if loop.index > 2 %}{% break %}{% endif %}{% endfor %}\
     {% if m.role == 'tool' %}{% continue %}{% endif %}|{% else %}empty{% endfor %}\
     {% for m in messages if m.role != 'system' %}{{ m.role[:3] }}{% endfor %}",
    // Scoping: sets inside loops stay there, namespaces carry out; macros see the top level.
    "{% set outer = 'o' %}{% set ns = namespace(n=0, last='') %}{% macro show(x, sep='-', upper=false) %}\
     {{ outer }}{{ sep }}{{ x|upper if upper else x }}{% endmacro %}\
     {% for m in messages %}{% set outer = 'in' %}{% set ns.n = ns.n + 1 %}{% set ns.last = m.role %}\
     {{ show(m.role) }}{{ show(m.role, sep='+', upper=true) }}{% endfor %}{{ outer }} {{ ns.n }} {{ ns.last }}\
     {% set text = show('t') %}{{ text|length }}\
     {% for m in messages %}{{ seen|default('first') }}>{% set seen = m.role %}{{ seen }};{% endfor %}{{ seen|default('gone') }}\
     {% set first = true %}{% for m in messages %}{% if not first %}, {% endif %}{{ m.role }}{% set first = false %}{% endfor %}\
     {% set block %}[{{ messages|length }}]{% endset %}{{ block }}{{ block|length }}\
     {% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}{% for m in messages[::2] %}{{ loop.index }}{% endfor %}\
     {% for m in messages[-2::-2] %}{{ m.role[-1] }}{% endfor %}{{ 'abcdef'[::-2] }}{{ 'abcdef'[1:-1:2] }}\
     {{ messages|selectattr('role', 'equalto', 'user')|list|length }}{{ messages|rejectattr('content')|list|length }}\
     {{ messages|map(attribute='role')|join(',') }}{{ messages|selectattr('name', 'defined')|map(attribute='name')|list }}\
     {% for k, v in messages[0]|dictsort %}{{ k }};{% endfor %}{% for k, v in messages[0]|dictsort(by='value', reverse=true) %}{{ k }};{% endfor %}",
    // Filters, tests and methods on every kind of value.
    "{% for m in messages %}{{ m.content|default('none', true)|string|trim|length }};\
     {{ m|tojson }};{{ m.content|tojson(indent=2) }};{{ m.get('name', 'anon') }};{{ m.get('nope') }};\
     {% if m.content is string %}{{ m.content.strip().split(' ')|join(',') }};{{ m.content.startswith('a') }};\
     {{ m.content.replace('a', 'b')|upper }};{{ m.content|lower|title }};{{ '</think>' in m.content }}{% endif %}\
     {{ m.content is mapping }}{{ m.content is sequence }}{{ m.content is iterable }}{{ m.content is none }}\
     {{ m.content is number }}{{ m.content is integer }}{{ m.content is float }}{{ m.content is boolean }}\
     {{ m.tool_calls is defined and m.tool_calls|length > 0 }}\
     {% if m.tool_calls %}{% for c in m.tool_calls %}{{ c.function.name ~ ':' ~ loop.index0 }}\
     {% for k, v in c.function.arguments|items %}{{ k }}={{ v|tojson }}{% endfor %}{% endfor %}{% endif %}|{% endfor %}\
     {{ messages|length }}{{ (messages|first).role }}{{ (messages|last).role }}{{ messages[-1].role }}{{ messages[1:]|length }}\
     {{ tools|tojson if tools else 'no tools' }}{{ 7 - 2 }}{{ 3 * 4 }}{{ 7 % 3 }}{{ -5 }}{{ {'a': 1, 'a': 2} }}",
    // Output of values in Python's form, Markup arithmetic, constant folding, `map(attribute=)`.
    "{{ [1, 2] + [3] }}{{ messages[0] }}{{ messages[0].content }}{{ none }}{{ true }}{{ 1.5 }}{{ [1, 'a', none] }}{{ 'x'|safe + '<y>' }}\
     {{ (messages|map(attribute='role')|list) }}{{ raise_exception('only when empty') if messages|length == 0 }}",
];

fn arb_text() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-zA-Z <>/{}'\"\\\\\n\t]{0,24}".prop_map(Value::from),
        Just(Value::from("  </think> after")),
        Just(Value::from("é ü 中文 ｜▁")),
        Just(Value::from("")),
    ]
}

fn arb_content() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => arb_text(),
        1 => Just(Value::Null),
        1 => prop::collection::vec(arb_text().prop_map(|t| json!({"type": "text", "text": t})), 0..3)
            .prop_map(Value::from),
    ]
}

fn arb_arguments() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"query": "q", "limit": 5, "ratio": 0.5, "tags": ["a", "b"], "deep": {"x": null}})),
        Just(json!({})),
        Just(Value::from("{\"city\": \"Paris\"}")),
    ]
}

fn arb_message() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["system", "user", "assistant", "tool", "ipython"]),
        arb_content(),
        prop::option::of(prop::collection::vec(
            (prop::sample::select(vec!["search", "get_weather"]), arb_arguments()).prop_map(|(name, arguments)| {
                json!({"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}})
            }),
            0..3,
        )),
        prop::option::of(prop::sample::select(vec!["bob", "c1"])),
    )
        .prop_map(|(role, content, tool_calls, name)| {
            let mut m = json!({"role": role, "content": content});
            if let Some(calls) = tool_calls {
                m["tool_calls"] = Value::from(calls);
            }
            if let Some(name) = name {
                m["name"] = Value::from(name);
            }
            m
        })
}

fn arb_tools() -> impl Strategy<Value = Option<Vec<Value>>> {
    prop::option::of(prop::collection::vec(
        prop::sample::select(vec!["search", "get_weather"]).prop_map(|name| {
            json!({"type": "function", "function": {"name": name, "description": " Does things. ",
                "parameters": {"type": "object", "properties": {"q": {"type": "string", "description": "query"},
                "n": {"type": "integer", "enum": [1, 2]}}, "required": ["q"]}}})
        }),
        0..3,
    ))
}

/// `PROPTEST_CASES` when set (for long fuzzing runs), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn fixture_sources() -> Vec<String> {
    let mut sources: Vec<String> = FEATURE_TEMPLATES.iter().map(|s| s.to_string()).collect();
    if let Some(root) = fixtures() {
        let dir = root.join("chat_templates");
        for name in [
            "Qwen3-Coder.jinja",
            "tool_chat_template_llama3.1_json.jinja",
            "llamacpp_edited/deepseek-ai-DeepSeek-V3.1.jinja",
            "GLM-4.6.jinja",
            "llamacpp_edited/moonshotai-Kimi-K2.jinja",
            "tool_chat_template_hermes.jinja",
        ] {
            if let Ok(s) = std::fs::read_to_string(dir.join(name)) {
                sources.push(s);
            }
        }
    }
    sources
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]
    /// For any conversation, a render the fast renderer completes equals minijinja's render.
    #[test]
    fn fast_render_equals_minijinja_for_any_conversation(
        messages in prop::collection::vec(arb_message(), 0..6),
        tools in arb_tools(),
        add_generation_prompt in any::<bool>(),
        enable_thinking in prop::option::of(any::<bool>()),
    ) {
        let mut kwargs = Map::new();
        if let Some(t) = enable_thinking {
            kwargs.insert("enable_thinking".into(), Value::from(t));
        }
        let args = RenderArgs { messages, tools, add_generation_prompt, kwargs, ..RenderArgs::default() };
        for source in fixture_sources() {
            let template = ChatTemplate::new(&source, tokens()).unwrap();
            let reference = template.render_with(&args, Renderer::Minijinja).map_err(|e| e.to_string());
            if let Ok(text) = template.render_with(&args, Renderer::FastOnly) {
                prop_assert_eq!(Ok(text), reference.clone(), "{}", &source[..source.len().min(80)]);
            }
            prop_assert_eq!(template.render(&args).map_err(|e| e.to_string()), reference);
        }
    }
}

#[test]
fn feature_templates_take_the_fast_path() {
    let messages: Vec<Value> = vec![
        json!({"role": "system", "content": "be brief"}),
        json!({"role": "user", "content": "a question </think> here"}),
        json!({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "search", "arguments": {"q": "x", "n": 2}}}]}),
        json!({"role": "tool", "content": "{\"r\": 1}", "name": "search"}),
        json!({"role": "assistant", "content": "done"}),
    ];
    let args = RenderArgs {
        messages,
        ..RenderArgs::default()
    };
    for (i, source) in FEATURE_TEMPLATES.iter().enumerate() {
        let template = ChatTemplate::new(source, tokens()).unwrap();
        let reference = template.render_with(&args, Renderer::Minijinja);
        let fast = template.render_with(&args, Renderer::FastOnly);
        assert_eq!(
            fast.unwrap_or_else(|e| panic!("feature template {i}: {e}")),
            reference.unwrap(),
            "feature template {i}"
        );
    }
}

#[test]
fn engine_panics_become_errors() {
    // minijinja indexes past the end when reversing an empty list; the render fails cleanly.
    let template = ChatTemplate::new("{% for m in messages[::-1] %}{{ m }}{% endfor %}", tokens()).unwrap();
    let err = template.render(&RenderArgs::default()).unwrap_err();
    assert!(err.to_string().contains("internal error"), "{err}");
}

/// Render each of `sources` with `args` and assert that the default renderer gives what minijinja
/// alone gives (the text or the error's message); with `fast_only`, also that the fast renderer,
/// where it renders at all, gives minijinja's text.
fn assert_renders_as_minijinja(sources: &[&str], args: &RenderArgs, fast_only: bool) {
    for source in sources {
        let template = ChatTemplate::new(source, tokens()).unwrap();
        let reference = template
            .render_with(args, Renderer::Minijinja)
            .map_err(|e| e.to_string());
        if fast_only {
            if let Ok(text) = template.render_with(args, Renderer::FastOnly) {
                assert_eq!(Ok(text), reference, "fast: {source}");
            }
        }
        assert_eq!(template.render(args).map_err(|e| e.to_string()), reference, "{source}");
    }
}

#[test]
fn recursive_macros_and_errors_match_minijinja() {
    let args = RenderArgs {
        messages: vec![json!({"role": "user", "content": "hi"})],
        ..RenderArgs::default()
    };
    let sources = [
        // Bounded recursion renders; unbounded recursion fails the same way as minijinja alone.
        "{% macro down(n) %}{{ n }}{% if n > 0 %}{{ down(n - 1) }}{% endif %}{% endmacro %}{{ down(5) }}",
        "{% macro forever(n) %}{{ forever(n + 1) }}{% endmacro %}{{ forever(0) }}",
        // raise_exception's message reaches the caller unchanged.
        "{% for m in messages %}{{ raise_exception('no ' ~ m.role ~ ' turns') }}{% endfor %}",
        // Errors in the middle of output: nothing of the partial fast render leaks.
        "{{ messages[0].content }}{{ messages[0].content.nosuchmethod() }}",
        "{{ undefined_name.attr }}",
    ];
    assert_renders_as_minijinja(&sources, &args, false);
    let raised = ChatTemplate::new(sources[2], tokens()).unwrap().render(&args);
    assert_eq!(raised.unwrap_err().to_string(), "no user turns");
}

#[test]
fn reviewed_corners_match_minijinja() {
    let args = RenderArgs {
        messages: vec![
            json!({"role": "user", "content": "hi", "score": 2.0}),
            json!({"role": "assistant", "content": "yo", "score": 3}),
        ],
        ..RenderArgs::default()
    };
    let sources = [
        // Macro arguments: an undefined argument takes its default; defaults bind last to first.
        "{% macro g(name='world') %}Hi {{ name }}{% endmacro %}{{ g(missing) }}{{ g('x') }}",
        "{% macro f(a, b=a) %}[{{ b }}]{% endmacro %}{{ f(1) }}{{ f(1, 2) }}",
        // Top-level names a macro reads where minijinja's closure does not see them.
        "{% set xs = [1, 2, 3] %}{% macro f() %}{{ xs[1:] }}{% endmacro %}{{ f() }}",
        "{% set p = 'A' %}{% macro f() %}{% set p = p ~ 'B' %}{{ p }}{% endmacro %}{{ f() }}",
        "{% set ns = namespace(n=0) %}{% macro b() %}{% set ns.n = 1 %}{% endmacro %}{{ b() }}{{ ns.n }}",
        "{% set greeting = 'hey' %}{% macro h(x) %}{{ greeting }} {{ x }}{% endmacro %}{{ h('you') }}",
        // Arithmetic keeps floats floats.
        "{{ messages[0].score - 1 }} {{ messages[1].score - 1 }} {{ 4.0 % 3 }} {{ messages[1].score * 2 }}",
        // for-else after a break in the first iteration; `loop` in a loop filter is the outer loop.
        "{% for x in [1, 2] %}{% break %}{% else %}E{% endfor %}",
        "{% for m in messages %}{% for x in [1, 2] if loop.first %}{{ x }}{% endfor %};{% endfor %}",
        // Namespaces: truth value and repeated keys.
        "{% set ns = namespace() %}{{ 'y' if ns else 'n' }}",
        "{% set ns = namespace({'a': 1}, a=2) %}{{ ns.a }}",
        // Constant folding as minijinja's compiler does it.
        "{{ 0 and 1 }} {{ 1 and 0 }} {{ '' or 'x' }} {{ not 0 }}",
        // range() and slices of built lists are iterables.
        "{{ range(3) is sequence }}{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}{{ ([1, 2, 3]|list)[1:] is sequence }}",
        // An absurd indent is an error, not an allocation failure.
        "{{ messages|tojson(indent=100000) }}",
    ];
    assert_renders_as_minijinja(&sources, &args, true);
}
