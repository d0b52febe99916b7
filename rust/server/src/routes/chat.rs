//! `POST /v1/chat/completions`.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream::{self, BoxStream, StreamExt};
use serde_json::{Map, Value};
use smgpy_protocol::chat::{
    ChatCompletionChunk, ChatCompletionRequest, ChatCompletionResponse, Choice, ChoiceLogprobs, ChunkChoice, Delta,
    FunctionChunk, FunctionOut, ResponseMessage, ToolCallChunk, ToolCallOut,
};
use smgpy_protocol::common::Usage;

use crate::driver::{chat_logprobs, sum_counts, ChoiceDriver, Counts, Step};
use crate::engine::GenerateRequest;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::layers::with_tokens;
use crate::prompt::{self, ChatPrompt};
use crate::routes::prelude::{self, Turn};
use crate::routes::start_choices;
use crate::sse;
use crate::state::{unix_now, AppState};

pub async fn chat_completions(
    State(state): State<AppState>,
    ApiJson(mut req): ApiJson<ChatCompletionRequest>,
) -> Result<Response, ApiError> {
    let tool_choice = req.validate()?;
    let images = super::image_data(&state, &smgpy_protocol::images::in_chat_messages(&req.messages))?;
    let mut kwargs: Map<String, Value> = req.chat_template_kwargs.clone().unwrap_or_default();
    if let Some(effort) = &req.reasoning_effort {
        kwargs
            .entry("reasoning_effort")
            .or_insert_with(|| Value::String(effort.clone()));
    }
    let text = prompt::render(
        &state,
        ChatPrompt {
            // Moved, not copied: nothing after rendering reads the conversation.
            messages: std::mem::take(&mut req.messages),
            tools: prompt::tools_for_template(req.tools.as_deref(), &tool_choice),
            documents: req.documents.clone(),
            add_generation_prompt: req.generation_prompt(),
            continue_final_message: req.continue_final_message,
            kwargs,
        },
    )?;
    let prepared = prelude::prepare(
        &state,
        Turn {
            rendered: text,
            sampling: req.sampling(),
            tools: req.tools.as_deref(),
            choice: &tool_choice,
            parallel: req.parallel_tool_calls.unwrap_or(true),
            tool_param: |i| format!("tools[{i}].function.parameters"),
            stop_param: "stop",
            include_stop: req.include_stop_str_in_output,
            separate_reasoning: req.separate_reasoning,
            has_images: !images.is_empty(),
        },
    )
    .await?;
    let id = state.new_id("chatcmpl");
    let base = GenerateRequest {
        rid: id.clone(),
        text: prepared.text,
        input_ids: prepared.input_ids,
        image_data: images,
        sampling: prepared.sampling,
        stream: req.stream,
        return_logprob: req.logprobs,
        top_logprobs_num: req.top_logprobs.unwrap_or(0),
        prompt_cache_key: req.prompt_cache_key.clone(),
        cache_breakpoints: Vec::new(),
        grammar: None,
    };
    let max_param = if req.max_completion_tokens.is_some() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let drivers = start_choices(&state, base, &prepared.spec, "messages", max_param).await?;
    let model = req.model.clone().unwrap_or_else(|| state.config().model_name.clone());
    let ctx = Arc::new(Ctx {
        id,
        model,
        created: unix_now(),
        fingerprint: state.0.fingerprint.clone(),
    });
    if req.stream {
        let include_usage = req.stream_options.as_ref().is_some_and(|o| o.include_usage);
        Ok(stream_response(&state, ctx, drivers, include_usage, req.logprobs))
    } else {
        let resp = collect(ctx, drivers, req.logprobs).await?;
        let (p, c) = (resp.usage.prompt_tokens, resp.usage.completion_tokens);
        Ok(with_tokens(Json(resp).into_response(), p, c))
    }
}

/// What every chunk of one response shares.
struct Ctx {
    id: String,
    model: String,
    created: u64,
    fingerprint: String,
}

impl Ctx {
    /// `data: ` + a content-only chunk, byte-identical to serialising the full
    /// [`ChatCompletionChunk`], but with the fixed fields escaped once per stream instead of once
    /// per token (the hot path of every streamed token).
    fn content_event(&self, prefix: &[u8], content: &str) -> Bytes {
        let mut buf = Vec::with_capacity(prefix.len() + content.len() + 64);
        buf.extend_from_slice(prefix);
        if serde_json::to_writer(&mut buf, content).is_err() {
            return sse::error(&ApiError::Internal("cannot encode a chunk".into()));
        }
        buf.extend_from_slice(br#"},"logprobs":null,"finish_reason":null}]}"#);
        buf.extend_from_slice(b"\n\n");
        Bytes::from(buf)
    }

    /// The bytes before the content string of a content-only chunk for choice `index`.
    fn content_prefix(&self, index: u32) -> Vec<u8> {
        let full = self.chunk(
            vec![ChunkChoice {
                index,
                delta: Delta {
                    content: Some("\u{0}"),
                    ..Delta::default()
                },
                logprobs: None,
                finish_reason: None,
                matched_stop: None,
            }],
            None,
        );
        let json = serde_json::to_string(&full).unwrap_or_default();
        let cut = json.find(r#""\u0000""#).unwrap_or(json.len());
        let mut out = b"data: ".to_vec();
        out.extend_from_slice(&json.as_bytes()[..cut]);
        out
    }

    fn chunk<'a>(&'a self, choices: Vec<ChunkChoice<'a>>, usage: Option<Usage>) -> ChatCompletionChunk<'a> {
        ChatCompletionChunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            system_fingerprint: &self.fingerprint,
            choices,
            usage,
        }
    }
}

fn usage_of(counts: &[Counts]) -> Usage {
    let prompt = counts.iter().map(|c| c.prompt).max().unwrap_or(0);
    let cached = counts.iter().map(|c| c.cached).max().unwrap_or(0);
    Usage::new(prompt, sum_counts(counts.iter().map(|c| c.completion)), cached)
        .with_reasoning(sum_counts(counts.iter().map(|c| c.reasoning)))
}

async fn collect(
    ctx: Arc<Ctx>,
    drivers: Vec<ChoiceDriver>,
    logprobs: bool,
) -> Result<ChatCompletionResponse, ApiError> {
    let results = futures::future::join_all(drivers.into_iter().map(|d| collect_one(d, logprobs))).await;
    let mut choices = Vec::with_capacity(results.len());
    let mut counts = Vec::with_capacity(results.len());
    for r in results {
        let (choice, c) = r?;
        choices.push(choice);
        counts.push(c);
    }
    Ok(ChatCompletionResponse {
        id: ctx.id.clone(),
        object: "chat.completion",
        created: ctx.created,
        model: ctx.model.clone(),
        system_fingerprint: ctx.fingerprint.clone(),
        choices,
        usage: usage_of(&counts),
    })
}

async fn collect_one(mut d: ChoiceDriver, logprobs: bool) -> Result<(Choice, Counts), ApiError> {
    let mut content = String::new();
    let mut reasoning = String::new();
    let mut calls: Vec<ToolCallOut> = Vec::new();
    let mut lps = Vec::new();
    let mut finish = None;
    while let Some(step) = d.next().await {
        if let Some(e) = step.error {
            return Err(e);
        }
        content.push_str(&step.piece.content);
        reasoning.push_str(&step.piece.reasoning);
        for (c, id) in step.piece.calls.iter().zip(step.call_ids) {
            match (calls.get_mut(c.index), id) {
                (Some(call), _) => call.function.arguments.push_str(&c.arguments),
                (None, Some(id)) => calls.push(ToolCallOut {
                    id,
                    kind: "function",
                    function: FunctionOut {
                        name: c.name.clone().unwrap_or_default(),
                        arguments: c.arguments.clone(),
                    },
                }),
                (None, None) => {}
            }
        }
        if logprobs {
            lps.extend(chat_logprobs(&step.logprobs));
        }
        if step.finish.is_some() {
            finish = step.finish;
        }
    }
    let (finish_reason, matched_stop) = match finish {
        Some(f) => (Some(f.reason), f.matched),
        None => (None, None),
    };
    let message = ResponseMessage {
        role: "assistant",
        content: if content.is_empty() && !calls.is_empty() {
            None
        } else {
            Some(content)
        },
        reasoning_content: if reasoning.is_empty() { None } else { Some(reasoning) },
        tool_calls: calls,
    };
    let logprobs = if logprobs {
        Some(ChoiceLogprobs { content: lps })
    } else {
        None
    };
    Ok((
        Choice {
            index: d.index,
            message,
            logprobs,
            finish_reason,
            matched_stop,
        },
        d.counts,
    ))
}

/// Events of one choice: the role chunk, one chunk per visible step, the finish chunk.
fn choice_events(
    ctx: Arc<Ctx>,
    driver: ChoiceDriver,
    usage: Arc<Mutex<Vec<Counts>>>,
    logprobs: bool,
) -> BoxStream<'static, Bytes> {
    let index = driver.index;
    let first = {
        let delta = Delta {
            role: Some("assistant"),
            content: Some(""),
            ..Delta::default()
        };
        let c = ctx.chunk(
            vec![ChunkChoice {
                index,
                delta,
                logprobs: None,
                finish_reason: None,
                matched_stop: None,
            }],
            None,
        );
        sse::data(&c)
    };
    let prefix = ctx.content_prefix(index);
    // Boxed: `unfold` moves its state in and out on every step, and a driver is large.
    let rest = stream::unfold(Some((Box::new(driver), ctx, usage, prefix)), move |st| async move {
        let (mut d, ctx, usage, prefix) = st?;
        loop {
            let Some(step) = d.next().await else {
                if let Ok(mut u) = usage.lock() {
                    u.push(d.counts);
                }
                return None;
            };
            if let Some(e) = step.error {
                return Some((vec![sse::error(&e)], None));
            }
            if step.piece.is_empty() && step.finish.is_none() && step.logprobs.is_empty() {
                continue;
            }
            let events = step_events(&ctx, &prefix, d.index, step, logprobs);
            return Some((events, Some((d, ctx, usage, prefix))));
        }
    });
    stream::once(async move { first })
        .chain(rest.flat_map(stream::iter))
        .boxed()
}

/// Up to two events per step: the content delta and, at the end, the finish chunk.
fn step_events(ctx: &Ctx, prefix: &[u8], index: u32, step: Step, logprobs: bool) -> Vec<Bytes> {
    let mut out = Vec::with_capacity(2);
    let Step {
        piece,
        call_ids,
        logprobs: lps,
        finish,
        ..
    } = step;
    let content_only = piece.reasoning.is_empty() && piece.calls.is_empty() && !logprobs;
    if content_only && !piece.content.is_empty() {
        out.push(ctx.content_event(prefix, &piece.content));
    } else if !piece.is_empty() || (logprobs && !lps.is_empty()) {
        let tool_calls = piece
            .calls
            .iter()
            .zip(&call_ids)
            .map(|(c, id)| ToolCallChunk {
                index: c.index,
                id: id.as_deref(),
                kind: id.as_ref().map(|_| "function"),
                function: FunctionChunk {
                    name: if id.is_some() { c.name.as_deref() } else { None },
                    arguments: &c.arguments,
                },
            })
            .collect();
        let delta = Delta {
            role: None,
            content: if piece.content.is_empty() {
                None
            } else {
                Some(&piece.content)
            },
            reasoning_content: if piece.reasoning.is_empty() {
                None
            } else {
                Some(&piece.reasoning)
            },
            tool_calls,
        };
        let lp = if logprobs {
            Some(ChoiceLogprobs {
                content: chat_logprobs(&lps),
            })
        } else {
            None
        };
        let c = ctx.chunk(
            vec![ChunkChoice {
                index,
                delta,
                logprobs: lp,
                finish_reason: None,
                matched_stop: None,
            }],
            None,
        );
        out.push(sse::data(&c));
    }
    if let Some(f) = finish {
        let c = ctx.chunk(
            vec![ChunkChoice {
                index,
                delta: Delta::default(),
                logprobs: None,
                finish_reason: Some(f.reason),
                matched_stop: f.matched,
            }],
            None,
        );
        out.push(sse::data(&c));
    }
    out
}

fn stream_response(
    state: &AppState,
    ctx: Arc<Ctx>,
    drivers: Vec<ChoiceDriver>,
    include_usage: bool,
    logprobs: bool,
) -> Response {
    let usage = Arc::new(Mutex::new(Vec::new()));
    let streams: Vec<_> = drivers
        .into_iter()
        .map(|d| choice_events(ctx.clone(), d, usage.clone(), logprobs))
        .collect();
    // One choice (the common case) skips the merge, which re-queues its stream on every item.
    let body = if streams.len() == 1 {
        streams.into_iter().next().unwrap_or_else(|| stream::empty().boxed())
    } else {
        stream::select_all(streams).boxed()
    };
    let tail = stream::once(async move {
        let mut events = Vec::new();
        if include_usage {
            let counts = usage.lock().map(|u| u.clone()).unwrap_or_default();
            events.push(sse::data(&ctx.chunk(Vec::new(), Some(usage_of(&counts)))));
        }
        events.push(sse::done());
        events
    })
    .flat_map(stream::iter);
    sse::response(body.chain(tail), state.config().keep_alive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_fast_path_matches_serde() {
        let ctx = Ctx {
            id: "chatcmpl-\"x\"".into(),
            model: "m/ü".into(),
            created: 7,
            fingerprint: "fp".into(),
        };
        for index in [0, 3] {
            for text in ["hi", "a \"quoted\"\nline ü 🎉 \u{1}", ""] {
                let prefix = ctx.content_prefix(index);
                let fast = ctx.content_event(&prefix, text);
                let delta = Delta {
                    content: Some(text),
                    ..Delta::default()
                };
                let choice = ChunkChoice {
                    index,
                    delta,
                    logprobs: None,
                    finish_reason: None,
                    matched_stop: None,
                };
                let slow = sse::data(&ctx.chunk(vec![choice], None));
                assert_eq!(fast, slow, "{}", String::from_utf8_lossy(&fast));
            }
        }
    }
}
