//! `POST /v1/completions`: raw-prompt completions, batched (one choice group per prompt, in
//! order), streamed or not, with `echo` and completions-form logprobs. No chat template, no
//! reasoning or tool parsing: only stop strings apply, through the same pipeline as chat.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use serde_json::{Map, Value};
use smgpy_protocol::common::Usage;
use smgpy_protocol::completion::{CompletionChoice, CompletionLogprobs, CompletionRequest, CompletionResponse, Prompt};

use crate::driver::{Counts, Finish, Step};
use crate::engine::{GenerateRequest, TokenLogprobs};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::pipeline::PipelineSpec;
use crate::routes::start_choices;
use crate::sse;
use crate::state::{unix_now, AppState};
use crate::wire::{respond, Out, WireFormat};

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
    let wire = Completions {
        id,
        model: req.model.clone().unwrap_or_else(|| state.config().model_name.clone()),
        created: unix_now(),
        fingerprint: state.0.fingerprint.clone(),
        n,
        echoes,
        logprobs: req.logprobs.is_some(),
        include_usage: req.stream_options.as_ref().is_some_and(|o| o.include_usage),
    };
    respond(&state, wire, drivers, req.stream).await
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

/// The Completions wire format: `text_completion` objects, whole or as stream chunks.
struct Completions {
    id: String,
    model: String,
    created: u64,
    fingerprint: String,
    n: u32,
    echoes: Vec<String>,
    logprobs: bool,
    include_usage: bool,
}

impl Completions {
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
fn usage_of(counts: impl Iterator<Item = (u32, Counts)>, n: u32) -> Usage {
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

/// One choice: its text so far (echo included; when streaming only its length is used, as the
/// logprobs' text offset), and when collecting its logprobs and finish.
struct TextChoice {
    index: u32,
    text: String,
    offset: usize,
    logprobs: CompletionLogprobs,
    finish: Option<Finish>,
}

impl WireFormat for Completions {
    type Choice = TextChoice;
    type Done = (CompletionChoice, Counts);
    type Body = CompletionResponse;

    /// Streaming: the echo (if any), as a chunk of its own.
    fn start(&self, index: u32, out: Out<'_>) -> TextChoice {
        let echo = self.echo(index).to_string();
        let offset = echo.len();
        if let Some(out) = out.filter(|_| !echo.is_empty()) {
            let choice = CompletionChoice {
                index,
                text: echo.clone(),
                logprobs: None,
                finish_reason: None,
                matched_stop: None,
            };
            out.push(sse::data(&self.response(vec![choice], None)));
        }
        TextChoice {
            index,
            text: echo,
            offset,
            logprobs: CompletionLogprobs::default(),
            finish: None,
        }
    }

    fn step(&self, c: &mut TextChoice, step: Step, _: Counts, out: Out<'_>) {
        let Some(out) = out else {
            if self.logprobs {
                push_logprobs(&mut c.logprobs, &step.logprobs, c.text.len());
            }
            c.text.push_str(&step.piece.content);
            if step.finish.is_some() {
                c.finish = step.finish;
            }
            return;
        };
        if step.piece.content.is_empty() && step.finish.is_none() && (step.logprobs.is_empty() || !self.logprobs) {
            return;
        }
        let logprobs = self.logprobs.then(|| {
            let mut l = CompletionLogprobs::default();
            push_logprobs(&mut l, &step.logprobs, c.offset);
            l
        });
        c.offset += step.piece.content.len();
        let (finish_reason, matched_stop) = step.finish.map_or((None, None), |f| (Some(f.reason), f.matched));
        let choice = CompletionChoice {
            index: c.index,
            text: step.piece.content,
            logprobs,
            finish_reason,
            matched_stop,
        };
        out.push(sse::data(&self.response(vec![choice], None)));
    }

    fn error(&self, _: &mut TextChoice, error: &ApiError, _: Counts) -> Vec<Bytes> {
        vec![sse::error(error)]
    }

    fn done(&self, c: TextChoice, index: u32, counts: Counts) -> (CompletionChoice, Counts) {
        let (finish_reason, matched_stop) = c.finish.map_or((None, None), |f| (Some(f.reason), f.matched));
        let choice = CompletionChoice {
            index,
            text: c.text,
            logprobs: self.logprobs.then_some(c.logprobs),
            finish_reason,
            matched_stop,
        };
        (choice, counts)
    }

    fn body(&self, done: Vec<(CompletionChoice, Counts)>) -> (CompletionResponse, u32, u32) {
        let usage = usage_of(done.iter().map(|(c, counts)| (c.index, *counts)), self.n);
        let (prompt, completion) = (usage.prompt_tokens, usage.completion_tokens);
        let mut choices: Vec<CompletionChoice> = done.into_iter().map(|(c, _)| c).collect();
        choices.sort_by_key(|c| c.index);
        (self.response(choices, Some(usage)), prompt, completion)
    }

    /// The usage chunk (`stream_options.include_usage`), then `[DONE]`.
    fn finish(&self, ended: &[(u32, Counts)], _: bool) -> Vec<Bytes> {
        let mut events = Vec::with_capacity(2);
        if self.include_usage {
            let usage = usage_of(ended.iter().copied(), self.n);
            events.push(sse::data(&self.response(Vec::new(), Some(usage))));
        }
        events.push(sse::done());
        events
    }
}
