//! The routes a router reads from an SGLang-style worker, so smgpy runs behind the SMG gateway
//! (or anything that routes SGLang workers) with full metadata: `GET /server_info` and
//! `/model_info` (and their older `get_` names), `GET /health_generate` (a one-token generation
//! that proves the engine answers) and `POST /flush_cache`.
//!
//! Types follow what SMG parses: one field of the wrong type makes it drop the whole document.
//! `GET /version` is deliberately absent: SMG takes a worker that answers it for vLLM.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::engine::{EngineEvent, GenerateRequest};
use crate::error::ApiError;
use crate::state::AppState;

/// How long `/health_generate` waits for the engine's first output.
const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

pub async fn server_info(State(state): State<AppState>) -> Json<Value> {
    let cfg = state.config();
    let path = state.public_model_path();
    let mut info = json!({
        "model_path": path,
        "tokenizer_path": path,
        "served_model_name": cfg.model_name,
        "tp_size": 1,
        "dp_size": 1,
        "pp_size": 1,
        "is_embedding": false,
        "disaggregation_mode": "null",
        "load_balance_method": "round_robin",
        "version": env!("CARGO_PKG_VERSION"),
        "server": "smgpy",
    });
    let put = |info: &mut Value, k: &str, v: Value| {
        if let Some(m) = info.as_object_mut() {
            m.insert(k.to_string(), v);
        }
    };
    if let Some(c) = cfg.context_length {
        put(&mut info, "context_length", json!(c));
    }
    if let Some(n) = cfg.max_running_requests {
        put(&mut info, "max_running_requests", json!(n));
    }
    if let Some(n) = cfg.max_total_num_tokens {
        put(&mut info, "max_total_num_tokens", json!(n));
    }
    if let Some(w) = &cfg.worker_id {
        put(&mut info, "worker_id", json!(w));
    }
    Json(info)
}

pub async fn model_info(State(state): State<AppState>) -> Json<Value> {
    let path = state.public_model_path();
    Json(json!({
        "model_path": path,
        "tokenizer_path": path,
        "is_generation": true,
        "preferred_sampling_params": null,
        "weight_version": "default",
        "has_image_understanding": false,
        "has_audio_understanding": false,
    }))
}

/// 200 once the engine produced one token for a one-token request, 503 if it did not within
/// [`PROBE_TIMEOUT`] (or refused it). Unlike `/health`, this exercises the whole engine path.
pub async fn health_generate(State(state): State<AppState>) -> Response {
    let mut req = GenerateRequest {
        rid: state.new_id("health"),
        ..GenerateRequest::default()
    };
    if state.config().vocab_size.is_some() {
        req.input_ids = Some(vec![0]);
    } else {
        req.text = Some("ping".into());
    }
    req.sampling.max_new_tokens = Some(1);
    req.sampling.temperature = Some(0.0);
    let unhealthy = |why: String| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "unhealthy", "message": why})),
        )
            .into_response()
    };
    if let Err(why) = state.0.health.readiness() {
        return unhealthy(why.to_string());
    }
    let mut stream = match state.0.engine.generate(req) {
        Ok(s) => s,
        Err(e) => return unhealthy(e.to_string()),
    };
    match tokio::time::timeout(PROBE_TIMEOUT, stream.recv()).await {
        Ok(Some(EngineEvent::Output(_))) => Json(json!({"status": "ok"})).into_response(),
        Ok(Some(EngineEvent::Error(e))) => unhealthy(e.to_string()),
        Ok(None) => unhealthy("the engine ended the probe without output".into()),
        Err(_) => unhealthy(format!(
            "the engine produced nothing within {} seconds",
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

/// Drop the engine's cached prompt state (its prefix cache).
pub async fn flush_cache(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let engine = state.0.engine.clone();
    let flushed = tokio::task::spawn_blocking(move || engine.flush_cache())
        .await
        .map_err(|e| ApiError::Internal(format!("flush task failed: {e}")))??;
    let message = if flushed {
        "Cache flushed."
    } else {
        "This engine keeps no cache to flush."
    };
    Ok(Json(json!({"flushed": flushed, "message": message})))
}
