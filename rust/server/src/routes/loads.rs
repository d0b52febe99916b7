//! `GET /v1/loads`: running/waiting requests and KV-cache usage, in the shape SGLang workers
//! answer and the SMG router parses (`loads[]` per data-parallel rank plus an `aggregate`).
//!
//! SMG deserialises this strictly: `timestamp` and `version` are strings, counts are JSON
//! integers (a `12.0` or a `null` makes the whole answer unreadable, and SMG then stops polling
//! the worker for good), `token_usage` is a fraction. The engine's `get_load()` dict is merged in
//! with those types enforced.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::Json;
use serde_json::{json, Map, Value};
use smgpy_template::DateTime;

use crate::error::ApiError;
use crate::state::AppState;

/// Per-rank fields SMG reads as integers.
const INTEGER_FIELDS: &[&str] = &[
    "dp_rank",
    "num_running_reqs",
    "num_waiting_reqs",
    "num_waiting_uncached_tokens",
    "num_total_reqs",
    "num_used_tokens",
    "max_total_num_tokens",
    "max_running_requests",
];
/// Per-rank fields SMG reads as floats.
const FLOAT_FIELDS: &[&str] = &["token_usage", "gen_throughput", "cache_hit_rate", "utilization"];

pub async fn loads(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let load = engine_load(&state).await?;
    let m = &state.0.metrics;
    let running = m.running.load(Ordering::Relaxed);
    let throughput = m.throughput.per_second();
    Ok(Json(shape(load, running, throughput, &state)))
}

/// The engine's `get_load()` (Python: kept off the async workers, which must not wait for the GIL).
pub async fn engine_load(state: &AppState) -> Result<Map<String, Value>, ApiError> {
    let engine = state.0.engine.clone();
    Ok(tokio::task::spawn_blocking(move || engine.load())
        .await
        .map_err(|e| ApiError::Internal(format!("load task failed: {e}")))?
        .unwrap_or_default())
}

/// One rank entry from the engine's `get_load()` dict, filling what it does not report.
fn shape(engine: Map<String, Value>, running: u64, throughput: f64, state: &AppState) -> Value {
    let cfg = state.config();
    let mut rank = Map::new();
    rank.insert("dp_rank".into(), json!(0));
    rank.insert("num_running_reqs".into(), json!(running));
    rank.insert("num_waiting_reqs".into(), json!(0));
    rank.insert("num_waiting_uncached_tokens".into(), json!(0));
    rank.insert("num_used_tokens".into(), json!(0));
    rank.insert(
        "max_total_num_tokens".into(),
        json!(cfg.max_total_num_tokens.unwrap_or(0)),
    );
    rank.insert("token_usage".into(), json!(0.0));
    rank.insert("gen_throughput".into(), json!(throughput));
    rank.insert("cache_hit_rate".into(), json!(0.0));
    if let Some(n) = cfg.max_running_requests {
        rank.insert("max_running_requests".into(), json!(n));
    }
    for (k, v) in engine {
        if let Some(v) = typed(&k, v) {
            rank.insert(k, v);
        }
    }
    let total = {
        let int = |k: &str| rank.get(k).and_then(Value::as_i64).unwrap_or(0);
        int("num_running_reqs") + int("num_waiting_reqs")
    };
    rank.insert("num_total_reqs".into(), json!(total));
    let int = |k: &str| rank.get(k).and_then(Value::as_i64).unwrap_or(0);
    let float = |k: &str| rank.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let aggregate = json!({
        "total_running_reqs": int("num_running_reqs"),
        "total_waiting_reqs": int("num_waiting_reqs"),
        "total_reqs": int("num_running_reqs") + int("num_waiting_reqs"),
        "total_used_tokens": int("num_used_tokens"),
        "avg_token_usage": float("token_usage"),
        "avg_throughput": float("gen_throughput"),
        "avg_utilization": float("utilization"),
    });
    json!({
        "timestamp": rfc3339_now(),
        "version": env!("CARGO_PKG_VERSION"),
        "dp_rank_count": 1,
        "loads": [Value::Object(rank)],
        "aggregate": aggregate,
    })
}

/// `v` with the type SMG expects for key `k`, or None to leave it out (nulls, wrong types).
fn typed(k: &str, v: Value) -> Option<Value> {
    if v.is_null() {
        return None;
    }
    if INTEGER_FIELDS.contains(&k) {
        let f = v.as_f64()?;
        return (f.is_finite() && f >= 0.0).then(|| json!(f.round() as i64));
    }
    if FLOAT_FIELDS.contains(&k) {
        let f = v.as_f64().filter(|f| f.is_finite() && *f >= 0.0)?;
        return Some(json!(if k == "token_usage" { f.min(1.0) } else { f }));
    }
    Some(v)
}

/// The current UTC time as RFC 3339 (`2026-11-25T09:30:00.123456+00:00`), as SGLang writes it.
pub fn rfc3339_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(now.as_secs(), now.subsec_micros())
}

/// `secs` since the Unix epoch, in UTC; the calendar date is the template clock's
/// ([`DateTime::from_unix`]), so the server has one date conversion.
fn rfc3339(secs: u64, micros: u32) -> String {
    let t = DateTime::from_unix(i64::try_from(secs).unwrap_or(i64::MAX));
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{micros:06}+00:00",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_values_are_typed_for_the_router() {
        assert_eq!(typed("num_waiting_reqs", json!(3.0)), Some(json!(3)));
        assert_eq!(typed("num_waiting_reqs", json!(null)), None);
        assert_eq!(typed("num_waiting_reqs", json!("x")), None);
        assert_eq!(typed("token_usage", json!(25.0)), Some(json!(1.0)));
        assert_eq!(typed("token_usage", json!(0.25)), Some(json!(0.25)));
        assert_eq!(typed("prefix_cache_bytes", json!(7)), Some(json!(7)));
    }

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000000+00:00");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.000005+00:00");
        assert_eq!(rfc3339(1_795_600_000, 0), "2026-11-25T09:46:40.000000+00:00");
    }
}
