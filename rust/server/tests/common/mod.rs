//! What the router tests share: a scripted engine, an app around it, and requests through
//! `oneshot` (no Python, no socket).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use smgpy_server::engine::{Abort, EngineFinish, EngineStream, GenerateRequest};
use smgpy_server::{AppState, Engine, EngineError, EngineEvent, EngineOutput, ServerConfig};
use tokio::sync::mpsc;
use tower::ServiceExt;

/// Sends `tokens` as deltas, each reporting `prompt_tokens` and `cached_tokens`; records
/// requests and aborts.
pub struct Scripted {
    tokens: Vec<&'static str>,
    prompt_tokens: u32,
    cached_tokens: u32,
    /// After the tokens, fail with this instead of finishing.
    pub fail_with: Option<&'static str>,
    pub requests: Mutex<Vec<GenerateRequest>>,
    pub aborted: Arc<Mutex<Vec<String>>>,
}

impl Scripted {
    pub fn new(tokens: Vec<&'static str>, prompt_tokens: u32, cached_tokens: u32) -> Self {
        Self {
            tokens,
            prompt_tokens,
            cached_tokens,
            fail_with: None,
            requests: Mutex::new(Vec::new()),
            aborted: Arc::default(),
        }
    }
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
                prompt_tokens: Some(self.prompt_tokens),
                completion_tokens: Some(i as u32 + 1),
                cached_tokens: Some(self.cached_tokens),
                finish: (i + 1 == n && self.fail_with.is_none()).then_some(EngineFinish::Stop { matched: None }),
                logprobs: Vec::new(),
            };
            tx.try_send(EngineEvent::Output(out)).unwrap();
        }
        if let Some(message) = self.fail_with {
            tx.try_send(EngineEvent::Error(EngineError::Internal(message.into())))
                .unwrap();
        }
        let rid = req.rid.clone();
        self.requests.lock().unwrap().push(req);
        Ok(EngineStream::new(rx, Box::new(RecordAbort(self.aborted.clone(), rid))))
    }
}

/// Model `m` with a template that renders each message as `[role]content` and ends with
/// `[assistant]`.
pub fn config() -> ServerConfig {
    let template = smgpy_template::ChatTemplate::new(
        "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}\n{% endfor %}[assistant]",
        serde_json::Map::new(),
    )
    .unwrap();
    ServerConfig {
        model_name: "m".into(),
        chat_template: Some(template),
        ..ServerConfig::default()
    }
}

/// The router serving `engine` with `config`, and the engine to look at afterwards.
pub fn router(engine: Scripted, config: ServerConfig) -> (axum::Router, Arc<Scripted>) {
    let engine = Arc::new(engine);
    (
        smgpy_server::router(AppState::new(engine.clone(), config).unwrap()),
        engine,
    )
}

/// Sends `req` and returns the status and the body as text.
pub async fn respond(app: axum::Router, req: Request<Body>) -> (StatusCode, String) {
    let resp = app.oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// POSTs `body` as JSON to `path`.
pub async fn post(app: axum::Router, path: &str, body: Value) -> (StatusCode, String) {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    respond(app, req).await
}
