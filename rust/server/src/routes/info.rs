//! `GET /health`, `GET /v1/models`, `GET /metrics`, `GET /v1/loads`.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::state::AppState;

/// Readiness: 200 when the server should be sent new requests; 503 while it drains or while
/// the engine's loop is stalled (see `health.rs`). Routers probe this path.
pub async fn health(State(state): State<AppState>) -> Response {
    match state.0.health.readiness() {
        Ok(()) => Json(json!({"status": "ok"})).into_response(),
        Err(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": why.status(), "message": why.to_string()})),
        )
            .into_response(),
    }
}

/// Liveness: 200 as long as the HTTP server answers, draining or not.
pub async fn live() -> impl IntoResponse {
    Json(json!({"status": "ok"}))
}

pub async fn models(State(state): State<AppState>) -> impl IntoResponse {
    let cfg = state.config();
    Json(json!({
        "object": "list",
        "data": [{
            "id": cfg.model_name,
            "object": "model",
            "created": state.0.started,
            "owned_by": "smgpy",
            "root": cfg.model_name,
            "max_model_len": cfg.context_length,
        }]
    }))
}

pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let waiting = state
        .0
        .engine
        .load()
        .and_then(|l| l.get("num_waiting_reqs").and_then(|v| v.as_u64()));
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.0.metrics.render(waiting),
    )
}
