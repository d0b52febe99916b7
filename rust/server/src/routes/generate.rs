//! sglang-native `POST /generate`: a raw prompt (`text` or `input_ids`) with sglang's
//! `sampling_params`, answered in sglang's shape (`text` + `meta_info`). Streams send the
//! cumulative text in every chunk, as sglang does by default, then `data: [DONE]`. A client's
//! `rid` labels the answer (`meta_info.id`); the engine request runs under a server-made id.

use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use serde_json::{json, Map, Value};
use smgpy_protocol::common::{FinishReason, MatchedStop};
use smgpy_protocol::generate::{GenerateBody, GeneratePrompt};

use crate::driver::{Counts, Finish, Step};
use crate::engine::GenerateRequest;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::pipeline::PipelineSpec;
use crate::routes::start_choices;
use crate::sse;
use crate::state::AppState;
use crate::wire::{respond, Out, WireFormat};

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
    let wire = Generate {
        rid,
        logprobs: body.return_logprob,
        started: Instant::now(),
    };
    respond(&state, wire, vec![driver], body.stream).await
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

/// sglang's answer: `{"text", "meta_info"}`, a stream repeating the text so far in each chunk.
struct Generate {
    /// The client's label, or the engine request's id.
    rid: String,
    logprobs: bool,
    started: Instant,
}

impl Generate {
    fn meta(&self, c: Counts, finish: Option<&Finish>) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.rid));
        m.insert("finish_reason".into(), finish_json(finish, c.completion));
        m.insert("prompt_tokens".into(), json!(c.prompt));
        m.insert("completion_tokens".into(), json!(c.completion));
        m.insert("cached_tokens".into(), json!(c.cached));
        m.insert("e2e_latency".into(), json!(self.started.elapsed().as_secs_f64()));
        m
    }
}

/// The text so far; when collecting, the logprobs and the finish too.
#[derive(Default)]
struct GenerateChoice {
    text: String,
    logprobs: Vec<Value>,
    finish: Option<Finish>,
}

impl WireFormat for Generate {
    type Choice = GenerateChoice;
    type Done = Value;
    type Body = Value;

    fn start(&self, _: u32, _: Out<'_>) -> GenerateChoice {
        GenerateChoice::default()
    }

    fn step(&self, c: &mut GenerateChoice, step: Step, counts: Counts, out: Out<'_>) {
        if out.is_some() && step.piece.content.is_empty() && step.finish.is_none() {
            return;
        }
        c.text.push_str(&step.piece.content);
        match out {
            Some(out) => {
                let chunk = json!({"text": c.text, "meta_info": self.meta(counts, step.finish.as_ref())});
                out.push(sse::data(&chunk));
            }
            None => {
                if self.logprobs {
                    let lps = step.logprobs.iter().map(|t| json!([t.logprob, t.token_id, t.token]));
                    c.logprobs.extend(lps);
                }
                if step.finish.is_some() {
                    c.finish = step.finish;
                }
            }
        }
    }

    fn error(&self, _: &mut GenerateChoice, error: &ApiError, _: Counts) -> Vec<Bytes> {
        vec![sse::error(error)]
    }

    fn done(&self, c: GenerateChoice, _: u32, counts: Counts) -> Value {
        let mut m = self.meta(counts, c.finish.as_ref());
        if self.logprobs {
            m.insert("output_token_logprobs".into(), Value::Array(c.logprobs));
        }
        json!({"text": c.text, "meta_info": m})
    }

    fn body(&self, done: Vec<Value>) -> (Value, u32, u32) {
        let out = done.into_iter().next().unwrap_or(Value::Null);
        let count = |k: &str| u32::try_from(out["meta_info"][k].as_u64().unwrap_or(0)).unwrap_or(u32::MAX);
        let (p, c) = (count("prompt_tokens"), count("completion_tokens"));
        (out, p, c)
    }

    /// `[DONE]`, unless the stream ended in an error.
    fn finish(&self, _: &[(u32, Counts)], failed: bool) -> Vec<Bytes> {
        if failed {
            Vec::new()
        } else {
            vec![sse::done()]
        }
    }
}
