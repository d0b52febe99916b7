//! sglang-native `POST /generate`: a raw prompt (`text` or `input_ids`) with sglang's
//! `sampling_params`, answered in sglang's shape (`text` + `meta_info`). Streams send the
//! cumulative text in every chunk, as sglang does by default, then `data: [DONE]`. A client's
//! `rid` labels the answer (`meta_info.id`); the engine request runs under a server-made id.

use std::time::Instant;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream::{self, StreamExt};
use serde_json::{json, Value};
use smgpy_protocol::common::{FinishReason, MatchedStop};
use smgpy_protocol::generate::{GenerateBody, GeneratePrompt};

use crate::driver::{ChoiceDriver, Finish};
use crate::engine::GenerateRequest;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::layers::with_tokens;
use crate::pipeline::PipelineSpec;
use crate::routes::start_choices;
use crate::sse;
use crate::state::AppState;

pub async fn generate(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<GenerateBody>,
) -> Result<Response, ApiError> {
    let prompt = body.validate()?;
    let sampling = body.sampling();
    let spec = PipelineSpec {
        stops: crate::pipeline::stop_set(&sampling.stop, "stop")?,
        ..PipelineSpec::default()
    };
    let (text, input_ids) = match prompt {
        GeneratePrompt::Text(t) => super::prompt_of(&state, t).await?,
        GeneratePrompt::Ids(ids) => (None, Some(ids)),
    };
    // The engine request's id is always the server's own: a client's `rid` is only a label
    // echoed in `meta_info.id`, so no client can name (and abort) another client's request.
    let engine_rid = state.new_id("gen");
    let rid = match body.rid.clone() {
        Some(label) => {
            tracing::debug!(rid = %engine_rid, label = %crate::logging::escape(&label), "request labelled by the client");
            label
        }
        None => engine_rid.clone(),
    };
    let req = GenerateRequest {
        rid: engine_rid,
        text,
        input_ids,
        image_data: Vec::new(),
        sampling,
        stream: body.stream,
        return_logprob: body.return_logprob,
        top_logprobs_num: body.top_logprobs_num.unwrap_or(0),
        ..GenerateRequest::default()
    };
    let driver = start_choices(&state, req, &spec, "input_ids", "sampling_params.max_new_tokens")
        .await?
        .pop()
        .ok_or_else(|| ApiError::Internal("no generation was started".into()))?;
    if body.stream {
        Ok(stream_response(&state, rid, driver))
    } else {
        let out = collect(rid, driver, body.return_logprob).await?;
        let count = |k: &str| u32::try_from(out["meta_info"][k].as_u64().unwrap_or(0)).unwrap_or(u32::MAX);
        let (p, c) = (count("prompt_tokens"), count("completion_tokens"));
        Ok(with_tokens(Json(out).into_response(), p, c))
    }
}

/// sglang's `finish_reason` object.
fn finish_json(f: Option<&Finish>, completion_tokens: u32) -> Value {
    match f {
        None => Value::Null,
        Some(f) => match f.reason {
            FinishReason::Length => json!({"type": "length", "length": completion_tokens}),
            FinishReason::Stop | FinishReason::ToolCalls => {
                let matched = match &f.matched {
                    Some(MatchedStop::Text(s)) => json!(s),
                    Some(MatchedStop::Token(t)) => json!(t),
                    None => Value::Null,
                };
                json!({"type": "stop", "matched": matched})
            }
        },
    }
}

fn meta(rid: &str, d: &ChoiceDriver, finish: Option<&Finish>, started: Instant) -> serde_json::Map<String, Value> {
    let c = d.counts;
    let mut m = serde_json::Map::new();
    m.insert("id".into(), json!(rid));
    m.insert("finish_reason".into(), finish_json(finish, c.completion));
    m.insert("prompt_tokens".into(), json!(c.prompt));
    m.insert("completion_tokens".into(), json!(c.completion));
    m.insert("cached_tokens".into(), json!(c.cached));
    m.insert("e2e_latency".into(), json!(started.elapsed().as_secs_f64()));
    m
}

async fn collect(rid: String, mut d: ChoiceDriver, logprobs: bool) -> Result<Value, ApiError> {
    let started = Instant::now();
    let mut text = String::new();
    let mut lps = Vec::new();
    let mut finish = None;
    while let Some(step) = d.next().await {
        if let Some(e) = step.error {
            return Err(e);
        }
        text.push_str(&step.piece.content);
        if logprobs {
            lps.extend(step.logprobs.iter().map(|t| json!([t.logprob, t.token_id, t.token])));
        }
        if step.finish.is_some() {
            finish = step.finish;
        }
    }
    let mut m = meta(&rid, &d, finish.as_ref(), started);
    if logprobs {
        m.insert("output_token_logprobs".into(), Value::Array(lps));
    }
    Ok(json!({"text": text, "meta_info": m}))
}

fn stream_response(state: &AppState, rid: String, driver: ChoiceDriver) -> Response {
    let started = Instant::now();
    let events = stream::unfold(Some((Box::new(driver), String::new())), move |st| {
        let rid = rid.clone();
        async move {
            let (mut d, mut text) = st?;
            loop {
                let Some(step) = d.next().await else {
                    return Some((vec![sse::done()], None));
                };
                if let Some(e) = step.error {
                    return Some((vec![sse::error(&e)], None));
                }
                if step.piece.content.is_empty() && step.finish.is_none() {
                    continue;
                }
                text.push_str(&step.piece.content);
                let chunk = json!({"text": text, "meta_info": meta(&rid, &d, step.finish.as_ref(), started)});
                return Some((vec![sse::data(&chunk)], Some((d, text))));
            }
        }
    })
    .flat_map(stream::iter);
    sse::response(events, state.config().keep_alive)
}
