//! HTTP routes. Handlers are small: validate, render, start the engine, shape the output.

pub mod chat;
pub mod completions;
pub mod generate;
pub mod info;
pub mod loads;
pub mod messages;
pub mod openapi;
pub mod response_store;
pub mod responses;
pub mod tokenize;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::Event;

use crate::driver::ChoiceDriver;
use crate::engine::GenerateRequest;
use crate::error::ApiError;
use crate::pipeline::{Pipeline, PipelineSpec};
use crate::state::AppState;

/// The SSE stream terminator of the OpenAI API.
pub const DONE: &str = "[DONE]";

/// An error sent inside an open SSE stream: `data: {"error": {...}}`.
/// (Routes built on axum's `Sse`; `crate::sse` is the coalescing replacement.)
pub fn error_event(e: &ApiError) -> Event {
    if let ApiError::Internal(m) = e {
        tracing::error!(error = %m, "error in stream");
    }
    Event::default().data(e.openai_body().to_string())
}

/// How long a request waits for the engine's first event before its response is committed
/// (see [`ChoiceDriver::admit`]). Refusals arrive within microseconds; prefill usually takes longer.
const ADMISSION_WAIT: Duration = Duration::from_millis(500);

/// Start `n` engine requests (one per choice; they share the prompt, so a prefix-caching
/// engine prefills once). With a seed, choice `i` uses `seed + i` so the choices differ yet
/// stay reproducible.
pub async fn start_choices(
    state: &AppState,
    base: GenerateRequest,
    spec: &PipelineSpec,
) -> Result<Vec<ChoiceDriver>, ApiError> {
    crate::structured::check(&base.sampling).await?;
    let n = base.sampling.n.unwrap_or(1).max(1);
    let stops = Arc::new(spec.stops.clone());
    let mut drivers = Vec::with_capacity(n as usize);
    for i in 0..n {
        let mut req = base.clone();
        req.sampling.n = None;
        if n > 1 {
            req.rid = format!("{}-{i}", base.rid);
            req.sampling.seed = base.sampling.seed.map(|s| s.wrapping_add(i64::from(i)));
        }
        let pipeline = Pipeline::new(spec).map_err(|e| ApiError::bad_request(Some("stop"), e.to_string()))?;
        // Dropping the drivers started so far aborts their engine requests.
        let stream = state.0.engine.generate(req)?;
        drivers.push(ChoiceDriver::new(i, stream, pipeline, stops.clone(), state.clone()));
    }
    for d in &mut drivers {
        d.admit(ADMISSION_WAIT).await?;
    }
    Ok(drivers)
}

/// Run `fut` under the configured request timeout.
pub async fn with_timeout<T>(timeout: Option<Duration>, fut: impl Future<Output = T>) -> Result<T, ApiError> {
    match timeout {
        None => Ok(fut.await),
        Some(t) => tokio::time::timeout(t, fut)
            .await
            .map_err(|_| ApiError::Timeout(t.as_secs())),
    }
}
