//! `GET /v1/loads`: running/waiting requests and KV-cache usage, in the shape the SMG router
//! polls from sglang workers (`loads[]` per data-parallel rank plus an `aggregate`).

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Map, Value};

use crate::error::ApiError;
use crate::state::{unix_now, AppState};

pub async fn loads(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let engine = state.0.engine.clone();
    // The engine's `get_load` is Python: keep the GIL off the async workers.
    let load = tokio::task::spawn_blocking(move || engine.load())
        .await
        .map_err(|e| ApiError::Internal(format!("load task failed: {e}")))?
        .unwrap_or_default();
    let running = state.0.metrics.running.load(Ordering::Relaxed);
    Ok(Json(shape(load, running)))
}

/// One rank entry from the engine's `get_load()` dict, filling what it does not report.
fn shape(engine: Map<String, Value>, running: u64) -> Value {
    let mut rank = Map::new();
    rank.insert("dp_rank".into(), json!(0));
    rank.insert("num_running_reqs".into(), json!(running));
    rank.insert("num_waiting_reqs".into(), json!(0));
    rank.insert("num_used_tokens".into(), json!(0));
    rank.insert("token_usage".into(), json!(0.0));
    rank.extend(engine);
    let num = |k: &str| rank.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let aggregate = json!({
        "total_running_reqs": num("num_running_reqs") as u64,
        "total_waiting_reqs": num("num_waiting_reqs") as u64,
        "total_used_tokens": num("num_used_tokens") as u64,
        "avg_token_usage": num("token_usage"),
    });
    json!({
        "timestamp": unix_now(),
        "version": env!("CARGO_PKG_VERSION"),
        "dp_rank_count": 1,
        "loads": [Value::Object(rank)],
        "aggregate": aggregate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_values_win_and_gaps_are_filled() {
        let mut m = Map::new();
        m.insert("num_waiting_reqs".into(), json!(3));
        m.insert("token_usage".into(), json!(0.25));
        let v = shape(m, 2);
        assert_eq!(v["loads"][0]["num_running_reqs"], json!(2));
        assert_eq!(v["loads"][0]["num_waiting_reqs"], json!(3));
        assert_eq!(v["aggregate"]["total_waiting_reqs"], json!(3));
        assert_eq!(v["aggregate"]["avg_token_usage"], json!(0.25));
    }
}
