//! `GET /health`, `GET /live`, `GET /v1/models`, `GET /metrics`.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::error::ApiError;
use crate::extract::ApiPath;
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

fn model_card(state: &AppState) -> Value {
    let cfg = state.config();
    let mut card = json!({
        "id": cfg.model_name,
        "object": "model",
        "created": state.0.started,
        "owned_by": "smgpy",
        "root": state.public_model_path(),
    });
    // Routers parse `max_model_len` as an integer: leave it out rather than send null.
    if let (Some(c), Some(m)) = (cfg.context_length, card.as_object_mut()) {
        m.insert("max_model_len".into(), json!(c));
    }
    card
}

/// The embedding model's card, when it is served under a name of its own.
fn embedding_card(state: &AppState) -> Option<Value> {
    let cfg = state.config();
    let emb = cfg.embedding.as_ref().filter(|e| e.model_name != cfg.model_name)?;
    Some(json!({
        "id": emb.model_name,
        "object": "model",
        "created": state.0.started,
        "owned_by": "smgpy",
        "root": emb.model_name,
    }))
}

pub async fn models(State(state): State<AppState>) -> impl IntoResponse {
    let mut data = vec![model_card(&state)];
    data.extend(embedding_card(&state));
    Json(json!({"object": "list", "data": data}))
}

/// `GET /v1/models/{id}`: the served model under its name; any other name is a 404.
pub async fn model(State(state): State<AppState>, ApiPath(id): ApiPath<String>) -> Result<Json<Value>, ApiError> {
    if id == state.config().model_name {
        Ok(Json(model_card(&state)))
    } else if let Some(card) = embedding_card(&state).filter(|c| c["id"] == id.as_str()) {
        Ok(Json(card))
    } else {
        Err(ApiError::NotFound(format!(
            "model `{id}` is not served here; this server serves `{}`",
            state.config().model_name
        )))
    }
}

pub async fn metrics(State(state): State<AppState>) -> Response {
    let waiting = super::loads::engine_load(&state)
        .await
        .ok()
        .and_then(|l| l.get("num_waiting_reqs").and_then(Value::as_u64));
    let cfg = state.config();
    let mut labels = vec![("model", cfg.model_name.as_str())];
    if let Some(w) = &cfg.worker_id {
        labels.push(("worker_id", w.as_str()));
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.0.metrics.render(waiting, &labels),
    )
        .into_response()
}

/// Unknown paths: a 404 in the shape of the API the path belongs to.
pub async fn not_found(uri: axum::http::Uri) -> Response {
    let e = ApiError::NotFound(format!("no route `{}` on this server", uri.path()));
    if crate::layers::is_anthropic(uri.path()) {
        e.into_anthropic()
    } else {
        e.into_response()
    }
}

/// Known paths with another method: 405 in the API's shape.
pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    let e = ApiError::MethodNotAllowed(format!("`{}` does not accept {method}", uri.path()));
    if crate::layers::is_anthropic(uri.path()) {
        e.into_anthropic()
    } else {
        e.into_response()
    }
}
