//! The chat route end to end against a scripted engine, without Python and without a socket.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use smgpy_server::engine::{Abort, EngineFinish, EngineStream, GenerateRequest};
use smgpy_server::{AppState, Engine, EngineError, EngineEvent, EngineOutput, ServerConfig};
use tokio::sync::mpsc;
use tower::ServiceExt;

/// Sends `tokens` as deltas; records requests and aborts.
struct Scripted {
    tokens: Vec<&'static str>,
    requests: Mutex<Vec<GenerateRequest>>,
    aborted: Arc<Mutex<Vec<String>>>,
}

struct RecordAbort(Arc<Mutex<Vec<String>>>, String);
impl Abort for RecordAbort {
    fn abort(self: Box<Self>) {
        self.0.lock().unwrap().push(self.1);
    }
}

impl Engine for Scripted {
    fn generate(&self, req: GenerateRequest) -> Result<EngineStream, EngineError> {
        let (tx, rx) = mpsc::channel(1024);
        let n = self.tokens.len();
        for (i, t) in self.tokens.iter().enumerate() {
            let out = EngineOutput {
                text_delta: (*t).to_string(),
                token_ids: vec![i as i64],
                prompt_tokens: Some(3),
                completion_tokens: Some(i as u32 + 1),
                cached_tokens: Some(1),
                finish: (i + 1 == n).then_some(EngineFinish::Stop { matched: None }),
                logprobs: Vec::new(),
            };
            tx.try_send(EngineEvent::Output(out)).unwrap();
        }
        let rid = req.rid.clone();
        self.requests.lock().unwrap().push(req);
        Ok(EngineStream::new(rx, Box::new(RecordAbort(self.aborted.clone(), rid))))
    }
}

fn app(tokens: Vec<&'static str>) -> (axum::Router, Arc<Scripted>) {
    let engine = Arc::new(Scripted {
        tokens,
        requests: Mutex::new(Vec::new()),
        aborted: Arc::default(),
    });
    let template = smgpy_template::ChatTemplate::new(
        "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}\n{% endfor %}[assistant]",
        serde_json::Map::new(),
    )
    .unwrap();
    let config = ServerConfig {
        model_name: "m".into(),
        chat_template: Some(template),
        ..ServerConfig::default()
    };
    (smgpy_server::router(AppState::new(engine.clone(), config)), engine)
}

async fn post(app: axum::Router, body: Value) -> (StatusCode, String) {
    let req = Request::post("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = app.oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
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
