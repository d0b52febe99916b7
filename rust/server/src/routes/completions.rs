//! `POST /v1/completions`: raw-prompt completions, batched (one choice group per prompt, in
//! order), streamed or not, with `echo` and completions-form logprobs. No chat template, no
//! reasoning or tool parsing: only stop strings apply, through the same pipeline as chat.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream::{self, BoxStream, StreamExt};
use serde_json::{Map, Value};
use smgpy_protocol::common::Usage;
use smgpy_protocol::completion::{CompletionChoice, CompletionLogprobs, CompletionRequest, CompletionResponse, Prompt};

use crate::driver::{ChoiceDriver, Counts};
use crate::engine::{GenerateRequest, TokenLogprobs};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::layers::with_tokens;
use crate::pipeline::PipelineSpec;
use crate::routes::start_choices;
use crate::sse;
use crate::state::{unix_now, AppState};

/// Most choices one request may start (prompts times `n`): a small body of many short prompts
/// must not start thousands of engine requests.
pub const MAX_BATCH_CHOICES: usize = 256;

pub async fn completions(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<CompletionRequest>,
) -> Result<Response, ApiError> {
    let prompts = req.validate()?;
    let sampling = req.sampling();
    let n = sampling.n.unwrap_or(1).max(1);
    if prompts.len().saturating_mul(n as usize) > MAX_BATCH_CHOICES {
        return Err(ApiError::bad_request(
            Some("prompt"),
            format!(
                "this request asks for {} prompts times n = {n} choices; one request may start at most \
                 {MAX_BATCH_CHOICES}: send the prompts in several requests",
                prompts.len()
            ),
        ));
    }
    let spec = PipelineSpec {
        stops: crate::pipeline::stop_set(&sampling.stop, "stop")?,
        include_stop: req.include_stop_str_in_output,
        reasoning: None,
        tools: None,
    };
    let id = state.new_id("cmpl");
    // A single token-id prompt is `prompt: [ids]`; a batch is `prompt: [[ids], ...]`.
    let single = prompts.len() == 1;
    let mut bases = Vec::with_capacity(prompts.len());
    for (p, prompt) in prompts.iter().enumerate() {
        let (text, input_ids) = match prompt {
            Prompt::Text(t) => super::prompt_of(&state, t.clone()).await?,
            Prompt::Tokens(ids) => (None, Some(ids.clone())),
        };
        let base = GenerateRequest {
            rid: if p == 0 { id.clone() } else { format!("{id}-p{p}") },
            text,
            input_ids,
            image_data: Vec::new(),
            sampling: sampling.clone(),
            stream: req.stream,
            return_logprob: req.logprobs.is_some(),
            top_logprobs_num: req.logprobs.unwrap_or(0),
            ..GenerateRequest::default()
        };
        let param = if single {
            "prompt".to_string()
        } else {
            format!("prompt[{p}]")
        };
        // Every prompt of the batch is checked before any starts (or is decoded for `echo`).
        super::check_request(&state, &base, &param)?;
        bases.push((base, param));
    }
    let echoes = if req.echo {
        echo_texts(&state, &prompts).await?
    } else {
        vec![String::new(); prompts.len()]
    };
    let mut drivers = Vec::with_capacity(prompts.len() * n as usize);
    for (p, (base, param)) in bases.into_iter().enumerate() {
        for mut d in start_choices(&state, base, &spec, &param, "max_tokens").await? {
            d.index += p as u32 * n;
            drivers.push(d);
        }
    }
    let ctx = Arc::new(Ctx {
        id,
        model: req.model.clone().unwrap_or_else(|| state.config().model_name.clone()),
        created: unix_now(),
        fingerprint: state.0.fingerprint.clone(),
        n,
        echoes,
        logprobs: req.logprobs.is_some(),
    });
    if req.stream {
        let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
        Ok(stream_response(&state, ctx, drivers, include_usage))
    } else {
        let resp = collect(ctx, drivers).await?;
        let (p, c) = resp
            .usage
            .as_ref()
            .map_or((0, 0), |u| (u.prompt_tokens, u.completion_tokens));
        Ok(with_tokens(Json(resp).into_response(), p, c))
    }
}

/// The text `echo` prepends to each prompt's choices (token prompts are decoded).
async fn echo_texts(state: &AppState, prompts: &[Prompt]) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::with_capacity(prompts.len());
    for p in prompts {
        out.push(match p {
            Prompt::Text(t) => t.clone(),
            Prompt::Tokens(ids) => super::tokenize::decode(state, ids.clone(), "echo").await?,
        });
    }
    Ok(out)
}

/// What every choice and chunk of one response shares.
struct Ctx {
    id: String,
    model: String,
    created: u64,
    fingerprint: String,
    n: u32,
    echoes: Vec<String>,
    logprobs: bool,
}

impl Ctx {
    fn echo(&self, index: u32) -> &str {
        self.echoes
            .get((index / self.n) as usize)
            .map(String::as_str)
            .unwrap_or_default()
    }

    fn response(&self, choices: Vec<CompletionChoice>, usage: Option<Usage>) -> CompletionResponse {
        CompletionResponse {
            id: self.id.clone(),
            object: "text_completion",
            created: self.created,
            model: self.model.clone(),
            system_fingerprint: self.fingerprint.clone(),
            choices,
            usage,
        }
    }
}

/// Batch usage: prompt tokens count once per prompt (its `n` choices share it).
fn usage_of(counts: &[(u32, Counts)], n: u32) -> Usage {
    let mut per_prompt: std::collections::BTreeMap<u32, (u32, u32)> = std::collections::BTreeMap::new();
    let mut completion: u32 = 0;
    for (index, c) in counts {
        let e = per_prompt.entry(index / n).or_default();
        e.0 = e.0.max(c.prompt);
        e.1 = e.1.max(c.cached);
        completion = completion.saturating_add(c.completion);
    }
    let prompt = crate::driver::sum_counts(per_prompt.values().map(|v| v.0));
    let cached = crate::driver::sum_counts(per_prompt.values().map(|v| v.1));
    Usage::new(prompt, completion, cached)
}

/// Appends steps' logprobs in completions form; `offset` is the text length before them.
fn push_logprobs(into: &mut CompletionLogprobs, lps: &[TokenLogprobs], mut offset: usize) {
    for t in lps {
        let token = t.token.clone().unwrap_or_default();
        into.text_offset.push(offset);
        offset += token.len();
        into.tokens.push(token);
        into.token_logprobs.push(t.logprob);
        let mut top = Map::new();
        for (_, tok, lp) in &t.top {
            top.insert(tok.clone().unwrap_or_default(), Value::from(*lp));
        }
        into.top_logprobs.push(top);
    }
}

async fn collect(ctx: Arc<Ctx>, drivers: Vec<ChoiceDriver>) -> Result<CompletionResponse, ApiError> {
    let results = futures::future::join_all(drivers.into_iter().map(|d| collect_one(&ctx, d))).await;
    let mut choices = Vec::with_capacity(results.len());
    let mut counts = Vec::with_capacity(results.len());
    for r in results {
        let (choice, c) = r?;
        counts.push((choice.index, c));
        choices.push(choice);
    }
    choices.sort_by_key(|c| c.index);
    let usage = usage_of(&counts, ctx.n);
    Ok(ctx.response(choices, Some(usage)))
}

async fn collect_one(ctx: &Ctx, mut d: ChoiceDriver) -> Result<(CompletionChoice, Counts), ApiError> {
    let mut text = ctx.echo(d.index).to_string();
    let mut lps = CompletionLogprobs::default();
    let mut finish = None;
    while let Some(step) = d.next().await {
        if let Some(e) = step.error {
            return Err(e);
        }
        if ctx.logprobs {
            push_logprobs(&mut lps, &step.logprobs, text.len());
        }
        text.push_str(&step.piece.content);
        if step.finish.is_some() {
            finish = step.finish;
        }
    }
    let (finish_reason, matched_stop) = finish.map_or((None, None), |f| (Some(f.reason), f.matched));
    let logprobs = ctx.logprobs.then_some(lps);
    Ok((
        CompletionChoice {
            index: d.index,
            text,
            logprobs,
            finish_reason,
            matched_stop,
        },
        d.counts,
    ))
}

/// Chunks of one choice: the echo (if any), one chunk per visible step, the finish chunk.
fn choice_events(
    ctx: Arc<Ctx>,
    driver: ChoiceDriver,
    usage: Arc<Mutex<Vec<(u32, Counts)>>>,
) -> BoxStream<'static, Bytes> {
    let echo = ctx.echo(driver.index).to_string();
    let first: Vec<Bytes> = if echo.is_empty() {
        Vec::new()
    } else {
        let choice = CompletionChoice {
            index: driver.index,
            text: echo.clone(),
            logprobs: None,
            finish_reason: None,
            matched_stop: None,
        };
        vec![sse::data(&ctx.response(vec![choice], None))]
    };
    let rest = stream::unfold(Some((Box::new(driver), ctx, usage, echo.len())), |st| async move {
        let (mut d, ctx, usage, offset) = st?;
        loop {
            let Some(step) = d.next().await else {
                if let Ok(mut u) = usage.lock() {
                    u.push((d.index, d.counts));
                }
                return None;
            };
            if let Some(e) = step.error {
                return Some((vec![sse::error(&e)], None));
            }
            if step.piece.content.is_empty() && step.finish.is_none() && (step.logprobs.is_empty() || !ctx.logprobs) {
                continue;
            }
            let logprobs = ctx.logprobs.then(|| {
                let mut l = CompletionLogprobs::default();
                push_logprobs(&mut l, &step.logprobs, offset);
                l
            });
            let next_offset = offset + step.piece.content.len();
            let (finish_reason, matched_stop) = step.finish.map_or((None, None), |f| (Some(f.reason), f.matched));
            let choice = CompletionChoice {
                index: d.index,
                text: step.piece.content,
                logprobs,
                finish_reason,
                matched_stop,
            };
            let ev = sse::data(&ctx.response(vec![choice], None));
            return Some((vec![ev], Some((d, ctx, usage, next_offset))));
        }
    });
    stream::iter(first).chain(rest.flat_map(stream::iter)).boxed()
}

fn stream_response(state: &AppState, ctx: Arc<Ctx>, drivers: Vec<ChoiceDriver>, include_usage: bool) -> Response {
    let usage = Arc::new(Mutex::new(Vec::new()));
    let streams: Vec<_> = drivers
        .into_iter()
        .map(|d| choice_events(ctx.clone(), d, usage.clone()))
        .collect();
    let tail = stream::once(async move {
        let mut events = Vec::new();
        if include_usage {
            let counts = usage.lock().map(|u| u.clone()).unwrap_or_default();
            events.push(sse::data(&ctx.response(Vec::new(), Some(usage_of(&counts, ctx.n)))));
        }
        events.push(sse::done());
        events
    })
    .flat_map(stream::iter);
    sse::response(stream::select_all(streams).chain(tail), state.config().keep_alive)
}
