//! Text around tool calls in Chat Completions (docs/parsers.md): whitespace between parallel calls
//! is not content, streamed or not, and forced `tool_choice` output cut off never leaks the
//! wrapper JSON into `content`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use axum::http::StatusCode;
use common::Scripted;
use serde_json::{json, Value};

fn app(tokens: Vec<&'static str>) -> axum::Router {
    let config = smgpy_server::ServerConfig {
        tool_format: Some(smgpy_parsers::ToolFormat::Hermes),
        ..common::config()
    };
    common::router(Scripted::new(tokens, 3, 1), config).0
}

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {}}}},
        {"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}},
    ])
}

fn body(extra: Value) -> Value {
    let mut b = json!({"messages": [{"role": "user", "content": "hi"}], "tools": tools()});
    b.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    b
}

/// Two Hermes blocks separated by a newline, token by token as a model writes them.
const TWO_CALLS: &[&str] = &[
    "<tool_call>",
    "\n{\"name\": \"a\", \"arguments\": {}}\n",
    "</tool_call>",
    "\n",
    "<tool_call>",
    "\n{\"name\": \"b\", \"arguments\": {\"x\": 1}}\n",
    "</tool_call>",
    "\n",
];

#[tokio::test]
async fn whitespace_between_parallel_calls_is_not_content() {
    let (status, text) = common::post(app(TWO_CALLS.to_vec()), "/v1/chat/completions", body(json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    let message = &v["choices"][0]["message"];
    // openai-agents would add an empty message item for `"\n"`; LangChain's content would be it.
    assert_eq!(message["content"], Value::Null, "{message}");
    assert_eq!(message["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(message["tool_calls"][1]["function"]["arguments"], r#"{"x":1}"#);

    let (_, text) = common::post(
        app(TWO_CALLS.to_vec()),
        "/v1/chat/completions",
        body(json!({"stream": true})),
    )
    .await;
    let contents: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter_map(|d| {
            let c: Value = serde_json::from_str(d).unwrap();
            c["choices"].get(0)?["delta"]["content"].as_str().map(str::to_owned)
        })
        .collect();
    // Only the role chunk's empty content: no `{"content": "\n"}` delta between the calls.
    assert!(contents.iter().all(String::is_empty), "{contents:?}");
}

#[tokio::test]
async fn text_before_the_calls_is_content() {
    let mut tokens = vec!["Let me check.", "\n"];
    tokens.extend_from_slice(TWO_CALLS);
    let (_, text) = common::post(app(tokens), "/v1/chat/completions", body(json!({}))).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "Let me check.\n");
}

#[tokio::test]
async fn forced_required_output_cut_off_leaks_no_wrapper() {
    // The JSON form `tool_choice: "required"` holds the output to, cut by max_tokens before the
    // call's arguments began, and inside them.
    for (tokens, calls) in [
        (vec!["[\n{\n    \"name\": \"b", "\",\n    \"parame"], 0),
        (vec!["[\n{\n    \"name\": \"b\",\n    \"parameters\": {\"x\": ", "1"], 1),
    ] {
        for stream in [false, true] {
            let (status, text) = common::post(
                app(tokens.clone()),
                "/v1/chat/completions",
                body(json!({"tool_choice": "required", "stream": stream})),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{text}");
            assert!(!text.contains("parame"), "{text}");
            assert!(!text.contains(r#"\"name\""#), "{text}");
            if !stream {
                let v: Value = serde_json::from_str(&text).unwrap();
                let message = &v["choices"][0]["message"];
                assert!(message["content"].as_str().unwrap_or_default().is_empty(), "{message}");
                assert_eq!(message["tool_calls"].as_array().map_or(0, Vec::len), calls, "{message}");
            }
        }
    }
}
