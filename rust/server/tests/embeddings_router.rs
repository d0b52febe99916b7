//! `/v1/embeddings` through the router with a fake engine, no socket and no Python.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use smgpy_server::engine::{EmbedReply, EmbedRequest, EngineStream, GenerateRequest};
use smgpy_server::routes::embeddings::EmbeddingConfig;
use smgpy_server::{AppState, Embeddings, Engine, EngineError, ServerConfig};
use tower::ServiceExt;

/// Answers every input with `[3, 4, 0, 0]` (unit length after a cut to 2: `[0.6, 0.8]`).
struct Fixed;

impl Engine for Fixed {
    fn generate(&self, _req: GenerateRequest) -> Result<EngineStream, EngineError> {
        Err(EngineError::BadRequest("embeddings only".into()))
    }

    fn embed(&self, req: EmbedRequest) -> Result<EmbedReply, EngineError> {
        let n = req
            .input_ids
            .map(|v| v.len())
            .or(req.text.map(|t| t.len()))
            .unwrap_or(0);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let data = (0..n).flat_map(|_| [3.0, 4.0, 0.0, 0.0]).collect();
        tx.send(Ok(Embeddings {
            dim: 4,
            data,
            prompt_tokens: Some(7),
        }))
        .unwrap();
        Ok(rx)
    }
}

async fn post(config: ServerConfig, body: Value) -> (StatusCode, Value) {
    let app = smgpy_server::router(AppState::new(Arc::new(Fixed), config).unwrap());
    let req = Request::post("/v1/embeddings")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = app.oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

fn config(matryoshka: Vec<u32>) -> ServerConfig {
    ServerConfig {
        model_name: "chat".into(),
        embedding: Some(EmbeddingConfig {
            model_name: "emb".into(),
            dimensions: Some(4),
            matryoshka_dimensions: matryoshka,
            max_input_tokens: Some(3),
            tokenizer: None,
        }),
        ..ServerConfig::default()
    }
}

#[tokio::test]
async fn answers_in_openais_shape() {
    let (status, body) = post(config(vec![]), json!({"input": ["a", "b"]})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["object"], "list");
    assert_eq!(body["model"], "emb");
    assert_eq!(
        body["data"][1],
        json!({"object": "embedding", "index": 1, "embedding": [3.0, 4.0, 0.0, 0.0]})
    );
    assert_eq!(body["usage"], json!({"prompt_tokens": 7, "total_tokens": 7}));
}

#[tokio::test]
async fn base64_and_matryoshka_cuts() {
    let (_, body) = post(
        config(vec![2]),
        json!({"input": "a", "dimensions": 2, "encoding_format": "base64"}),
    )
    .await;
    let b64 = body["data"][0]["embedding"].as_str().unwrap();
    // [0.6, 0.8] as little-endian f32.
    assert_eq!(b64, smgpy_protocol::embeddings::base64_f32(&[0.6, 0.8]));
    let (status, body) = post(config(vec![]), json!({"input": "a", "dimensions": 2})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["param"], "dimensions");
}

#[tokio::test]
async fn over_length_ids_and_no_embedding_model_are_400s() {
    let (status, body) = post(config(vec![]), json!({"input": [[1], [1, 2, 3, 4]]})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["param"], "input[1]");
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    let (status, body) = post(ServerConfig::default(), json!({"input": "a"})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["param"], "model");
}
