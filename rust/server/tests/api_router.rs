//! Completions, messages, responses, generate and auth through `router()` with `oneshot`:
//! a scripted engine, no Python, no socket.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::Scripted;
use serde_json::{json, Value};
use std::sync::Arc;

/// An engine answering every request with `tokens` (5 prompt tokens, 2 of them cached), behind
/// `api_key` when given.
fn app_with(tokens: Vec<&'static str>, api_key: Option<&str>) -> (axum::Router, Arc<Scripted>) {
    let config = smgpy_server::ServerConfig {
        api_key: api_key.map(str::to_string),
        ..common::config()
    };
    common::router(Scripted::new(tokens, 5, 2), config)
}

async fn call(
    app: &axum::Router,
    method: &str,
    path: &str,
    body: Option<Value>,
    key: Option<&str>,
) -> (StatusCode, String) {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    if let Some(k) = key {
        req = req.header("x-api-key", k);
    }
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    common::respond(app.clone(), req.body(body).unwrap()).await
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap()
}

#[tokio::test]
async fn completions_batch_keeps_prompt_order() {
    let (app, engine) = app_with(vec!["a", "b"], None);
    let (status, body) = call(
        &app,
        "POST",
        "/v1/completions",
        Some(json!({"prompt": ["x", "y"], "echo": true})),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v = json_of(&body);
    assert_eq!(v["choices"][0]["text"], "xab");
    assert_eq!(v["choices"][1]["text"], "yab");
    assert_eq!(v["usage"]["prompt_tokens"], 10);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
    assert_eq!(engine.requests.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn messages_stop_sequence_and_error_shape() {
    let (app, _) = app_with(vec!["hello ", "END", " more"], None);
    let body = json!({"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], "stop_sequences": ["END"]});
    let (status, text) = call(&app, "POST", "/v1/messages", Some(body), None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let v = json_of(&text);
    assert_eq!(v["content"][0]["text"], "hello ");
    assert_eq!(v["stop_reason"], "stop_sequence");
    assert_eq!(v["stop_sequence"], "END");
    assert_eq!(v["usage"]["cache_read_input_tokens"], 2);
    let (status, text) = call(&app, "POST", "/v1/messages", Some(json!({"messages": []})), None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(json_of(&text)["type"], "error");
}

#[tokio::test]
async fn responses_are_stored_and_chained() {
    let (app, engine) = app_with(vec!["ok"], None);
    let (status, text) = call(&app, "POST", "/v1/responses", Some(json!({"input": "first"})), None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let id = json_of(&text)["id"].as_str().unwrap().to_string();
    let (status, _) = call(
        &app,
        "POST",
        "/v1/responses",
        Some(json!({"input": "second", "previous_response_id": id})),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let prompt = engine.requests.lock().unwrap().last().unwrap().text.clone().unwrap();
    assert_eq!(prompt, "[user]first\n[assistant]ok\n[user]second\n[assistant]");
    let (status, text) = call(&app, "GET", &format!("/v1/responses/{id}"), None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json_of(&text)["usage"]["input_tokens_details"]["cached_tokens"], 2);
    let (status, _) = call(&app, "DELETE", &format!("/v1/responses/{id}"), None, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = call(&app, "GET", &format!("/v1/responses/{id}"), None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn generate_native_shape() {
    let (app, _) = app_with(vec!["a", "b"], None);
    let (status, text) = call(&app, "POST", "/generate", Some(json!({"text": "x"})), None).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let v = json_of(&text);
    assert_eq!(v["text"], "ab");
    assert_eq!(
        v["meta_info"]["finish_reason"],
        json!({"type": "stop", "matched": null})
    );
}

#[tokio::test]
async fn auth_guards_everything_but_health() {
    let (app, _) = app_with(vec!["a"], Some("k"));
    assert_eq!(call(&app, "GET", "/health", None, None).await.0, StatusCode::OK);
    let (status, text) = call(&app, "GET", "/v1/models", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(json_of(&text)["error"]["type"], "authentication_error");
    let (status, text) = call(&app, "POST", "/v1/messages", Some(json!({})), Some("bad")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(json_of(&text)["type"], "error");
    assert_eq!(call(&app, "GET", "/v1/models", None, Some("k")).await.0, StatusCode::OK);
}
