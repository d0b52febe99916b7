//! `GET /health`, `GET /v1/models`, `GET /metrics`, `GET /v1/loads`.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;

use crate::state::AppState;

pub async fn health() -> impl IntoResponse {
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
