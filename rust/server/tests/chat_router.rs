//! The chat route end to end against a scripted engine, without Python and without a socket.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use axum::http::StatusCode;
use common::Scripted;
use serde_json::{json, Value};
use std::sync::Arc;

fn app(tokens: Vec<&'static str>) -> (axum::Router, Arc<Scripted>) {
    common::router(Scripted::new(tokens, 3, 1), common::config())
}

async fn post(app: axum::Router, body: Value) -> (StatusCode, String) {
    common::post(app, "/v1/chat/completions", body).await
}

#[tokio::test]
async fn non_streaming_response_shape() {
    let (app, engine) = app(vec!["Hel", "lo", "!"]);
    let (status, body) = post(app, json!({"messages": [{"role": "user", "content": "hi"}]})).await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "Hello!");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["total_tokens"], 6);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
    assert_eq!(
        engine.requests.lock().unwrap()[0].text.as_deref(),
        Some("[user]hi\n[assistant]")
    );
}

#[tokio::test]
async fn streaming_sequence() {
    let (app, _) = app(vec!["a", "b"]);
    let (_, body) = post(
        app,
        json!({"messages": [{"role": "user", "content": "hi"}], "stream": true,
               "stream_options": {"include_usage": true}}),
    )
    .await;
    let data: Vec<&str> = body.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(*data.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"].get(0)?["delta"]["content"].as_str())
        .collect::<String>();
    assert_eq!(text, "ab");
    assert_eq!(chunks[chunks.len() - 2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[chunks.len() - 1]["choices"], json!([]));
    assert_eq!(chunks[chunks.len() - 1]["usage"]["completion_tokens"], 2);
}

#[tokio::test]
async fn stop_string_cuts_and_aborts() {
    let (app, engine) = app(vec!["one ", "tw", "o three", " four"]);
    let (_, body) = post(
        app,
        json!({"messages": [{"role": "user", "content": "hi"}], "stop": ["two"]}),
    )
    .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "one ");
    assert_eq!(v["choices"][0]["matched_stop"], "two");
    assert_eq!(engine.aborted.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn bad_request_shape() {
    let (app, _) = app(vec!["x"]);
    let (status, body) = post(app, json!({"messages": [{"role": "robot", "content": "hi"}]})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["param"], "messages[0].role");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(v["error"].get("code").is_some());
}
