//! Structured output through the routes: the compile check (400s naming the field) and what
//! reaches the engine, for client constraints and forced tool calls.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use axum::http::StatusCode;
use common::Scripted;
use serde_json::{json, Value};
use std::sync::Arc;

fn app(tokens: Vec<&'static str>, lark: bool) -> (axum::Router, Arc<Scripted>) {
    let config = smgpy_server::ServerConfig {
        tool_format: Some(smgpy_parsers::ToolFormat::Hermes),
        lark_grammars: lark,
        ..common::config()
    };
    common::router(Scripted::new(tokens, 3, 1), config)
}

async fn post(app: axum::Router, path: &str, body: Value) -> (StatusCode, Value) {
    let (status, text) = common::post(app, path, body).await;
    (status, serde_json::from_str(&text).unwrap())
}

fn engine_param(engine: &Scripted) -> (&'static str, String) {
    let reqs = engine.requests.lock().unwrap();
    reqs[0].sampling.structured.as_ref().unwrap().constraint.engine_param()
}

const MSG: &str = r#"[{"role": "user", "content": "hi"}]"#;

fn messages() -> Value {
    serde_json::from_str(MSG).unwrap()
}

#[tokio::test]
async fn constraints_that_cannot_be_enforced_are_400s_naming_the_field() {
    let cases = [
        (
            "/v1/chat/completions",
            json!({"messages": messages(), "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": true}}}}),
            "response_format.json_schema.schema",
            "uniqueItems",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": messages(), "guided_regex": "a(b"}),
            "guided_regex",
            "regular expression",
        ),
        (
            "/v1/completions",
            json!({"prompt": "x", "structured_outputs": {"grammar": "start: nope"}}),
            "structured_outputs.grammar",
            "nope",
        ),
        (
            "/generate",
            json!({"text": "x", "sampling_params": {"json_schema": "{\"type\": \"strnig\"}"}}),
            "sampling_params.json_schema",
            "strnig",
        ),
        (
            "/v1/responses",
            json!({"input": "x", "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "strnig"}}}}),
            "text.format.schema",
            "strnig",
        ),
    ];
    for (path, body, param, needle) in cases {
        let (router, engine) = app(vec!["x"], true);
        let (status, v) = post(router, path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {v}");
        assert_eq!(v["error"]["param"], param, "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(needle), "{v}");
        assert!(engine.requests.lock().unwrap().is_empty());
    }
    let (router, _) = app(vec!["x"], true);
    let body = json!({"model": "m", "max_tokens": 5, "messages": messages(),
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "strnig"}}}});
    let (status, v) = post(router, "/v1/messages", body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(v["type"], "error");
    assert!(v["error"]["message"].as_str().unwrap().contains("strnig"), "{v}");
}

#[tokio::test]
async fn each_shape_reaches_the_engine_under_its_key() {
    let cases = [
        (
            json!({"structured_outputs": {"choice": ["a", "b"]}}),
            "regex",
            "(?:a|b)",
        ),
        (json!({"guided_grammar": "start: \"x\""}), "ebnf", "start: \"x\""),
        (
            json!({"response_format": {"type": "json_object"}}),
            "json_schema",
            r#"{"type":"object"}"#,
        ),
    ];
    for (extra, key, text) in cases {
        let (router, engine) = app(vec!["x"], false);
        let mut body = json!({"messages": messages()});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let (status, v) = post(router, "/v1/chat/completions", body).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(engine_param(&engine), (key, text.to_string()));
    }
    let (router, engine) = app(vec!["{}"], false);
    let body = json!({"model": "m", "max_tokens": 5, "messages": messages(),
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}});
    assert_eq!(post(router, "/v1/messages", body).await.0, StatusCode::OK);
    assert_eq!(
        engine_param(&engine),
        ("json_schema", r#"{"type":"object"}"#.to_string())
    );
}

#[tokio::test]
async fn forced_calls_are_the_models_own_format_with_a_lark_engine() {
    let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}]);
    let out = vec![
        "<tool_call>\n",
        r#"{"name": "f", "arguments": {"a": 1}}"#,
        "\n</tool_call>",
    ];
    let (router, engine) = app(out.clone(), true);
    let body = json!({"messages": messages(), "tools": tools, "tool_choice": "required"});
    let (status, v) = post(router, "/v1/chat/completions", body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"a":1}"#
    );
    let (key, grammar) = engine_param(&engine);
    assert_eq!(key, "ebnf");
    assert!(grammar.contains("\"<tool_call>\\n\""), "{grammar}");
    // An engine that only takes JSON Schemas gets the JSON form.
    let (router, engine) = app(vec![r#"[{"name": "f", "parameters": {"a": 1}}]"#], false);
    let (status, v) = post(router, "/v1/chat/completions", body).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(engine_param(&engine).0, "json_schema");
    assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "f");
}

#[tokio::test]
async fn forced_calls_to_tools_with_nested_models_refer_to_their_own_defs() {
    // Two tools whose parameters each keep a `Stop` of their own in `$defs`, referred to from
    // their root as `#/$defs/Stop` (pydantic's way); both sit inside the JSON form's list.
    let stop = |nights: &str| {
        json!({"$defs": {"Stop": {"type": "object", "properties": {"city": {"type": "string"}, nights: {"type": "integer"}}}},
            "type": "object", "properties": {"stops": {"type": "array", "items": {"$ref": "#/$defs/Stop"}}}})
    };
    let tools = json!([
        {"type": "function", "function": {"name": "book", "parameters": stop("nights")}},
        {"type": "function", "function": {"name": "plan", "parameters": stop("days")}},
    ]);
    let out = vec![r#"[{"name": "book", "parameters": {"stops": [{"city": "Paris", "nights": 2}]}}]"#];
    let body = json!({"messages": messages(), "tools": tools, "tool_choice": "required"});
    let (router, engine) = app(out, false);
    let (status, v) = post(router, "/v1/chat/completions", body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"stops":[{"city":"Paris","nights":2}]}"#
    );
    let (key, schema) = engine_param(&engine);
    assert_eq!(key, "json_schema");
    let schema: Value = serde_json::from_str(&schema).unwrap();
    let at = |i: usize| format!("#/items/anyOf/{i}/properties/parameters/$defs/Stop");
    assert_eq!(
        schema["items"]["anyOf"][0]["properties"]["parameters"]["properties"]["stops"]["items"]["$ref"],
        at(0)
    );
    assert_eq!(
        schema["items"]["anyOf"][1]["properties"]["parameters"]["properties"]["stops"]["items"]["$ref"],
        at(1)
    );
    // And in the model's own format, with an engine that takes Lark grammars.
    let out = vec![r#"<tool_call>{"name": "plan", "arguments": {"stops": [{"city": "Lyon", "days": 1}]}}</tool_call>"#];
    let (router, _) = app(out, true);
    let (status, v) = post(router, "/v1/chat/completions", body).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "plan");
}

/// Single bytes, then `<|end|>` (id 256) that ends the output.
fn byte_vocabulary() -> Arc<smgpy_structured::Vocabulary> {
    let mut tokens: Vec<Option<Vec<u8>>> = (0u8..=255).map(|b| Some(vec![b])).collect();
    tokens.push(Some(b"<|end|>".to_vec()));
    Arc::new(smgpy_structured::Vocabulary::new(tokens, &[256], vec![256], 257).unwrap())
}

#[tokio::test]
async fn with_the_engines_vocabulary_the_constraint_arrives_compiled_once() {
    let config = smgpy_server::ServerConfig {
        vocabulary: Some(byte_vocabulary()),
        ..common::config()
    };
    let (router, engine) = common::router(Scripted::new(vec!["x"], 3, 1), config.clone());
    let body = json!({"messages": messages(), "max_tokens": 5,
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}});
    let (status, v) = post(router, "/v1/chat/completions", body).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let grammar = engine.requests.lock().unwrap()[0]
        .grammar
        .clone()
        .expect("a compiled grammar");
    // The compiled grammar is the schema's: an object starts with `{`, never with `[`.
    let mut m = grammar.matcher();
    assert!(m.accept(u32::from(b'[')).is_err());
    let mut m = grammar.matcher();
    m.accept(u32::from(b'{')).unwrap();
    // No constraint, no grammar.
    let (router, engine) = common::router(Scripted::new(vec!["x"], 3, 1), config.clone());
    let (status, _) = post(router, "/v1/chat/completions", json!({"messages": messages()})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(engine.requests.lock().unwrap()[0].grammar.is_none());
    // Compiled against the model's tokens, a Lark grammar naming a special token the model does
    // not have is refused here, naming the field, instead of by the engine.
    let (router, engine) = common::router(Scripted::new(vec!["x"], 3, 1), config);
    let body = json!({"prompt": "x", "structured_outputs": {"grammar": "start: <|nope|> \"a\""}});
    let (status, v) = post(router, "/v1/completions", body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["param"], "structured_outputs.grammar", "{v}");
    assert!(engine.requests.lock().unwrap().is_empty());
}

#[tokio::test]
async fn without_a_vocabulary_the_engine_compiles_and_no_grammar_is_sent() {
    let (router, engine) = app(vec!["x"], true);
    let body = json!({"messages": messages(), "response_format": {"type": "json_object"}});
    let (status, _) = post(router, "/v1/chat/completions", body).await;
    assert_eq!(status, StatusCode::OK);
    let reqs = engine.requests.lock().unwrap();
    assert!(reqs[0].grammar.is_none());
    assert!(reqs[0].sampling.structured.is_some());
}
