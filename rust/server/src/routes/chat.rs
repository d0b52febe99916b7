//! `POST /v1/chat/completions`.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use serde_json::{Map, Value};
use smgpy_protocol::chat::{
    ChatCompletionChunk, ChatCompletionRequest, ChatCompletionResponse, Choice, ChoiceLogprobs, ChunkChoice, Delta,
    FunctionChunk, FunctionOut, ResponseMessage, ToolCallChunk, ToolCallOut,
};
use smgpy_protocol::common::{TokenLogprob, Usage};
use smgpy_template::RenderArgs;

use crate::driver::{chat_logprobs, sum_counts, Counts, Finish, Step};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::prompt;
use crate::routes::prelude::{self, Turn};
use crate::routes::start_choices;
use crate::sse;
use crate::state::{unix_now, AppState};
use crate::wire::{respond, Out, WireFormat};

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
        RenderArgs {
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
    let (mut base, spec) = prepared.into_request(id.clone(), images, req.stream);
    base.return_logprob = req.logprobs;
    base.top_logprobs_num = req.top_logprobs.unwrap_or(0);
    base.prompt_cache_key = req.prompt_cache_key.clone();
    let max_param = if req.max_completion_tokens.is_some() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let drivers = start_choices(&state, base, &spec, "messages", max_param).await?;
    let wire = Chat {
        id,
        model: req.model.clone().unwrap_or_else(|| state.config().model_name.clone()),
        created: unix_now(),
        fingerprint: state.0.fingerprint.clone(),
        logprobs: req.logprobs,
        include_usage: req.stream_options.as_ref().is_some_and(|o| o.include_usage),
    };
    respond(&state, wire, drivers, req.stream).await
}

/// The Chat Completions wire format: `chat.completion`, or `chat.completion.chunk` events.
struct Chat {
    id: String,
    model: String,
    created: u64,
    fingerprint: String,
    logprobs: bool,
    include_usage: bool,
}

impl Chat {
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

    /// One chunk of choice `index` with `delta` and no finish.
    fn delta_event(&self, index: u32, delta: Delta<'_>, logprobs: Option<ChoiceLogprobs>) -> Bytes {
        let c = self.chunk(
            vec![ChunkChoice {
                index,
                delta,
                logprobs,
                finish_reason: None,
                matched_stop: None,
            }],
            None,
        );
        sse::data(&c)
    }
}

fn usage_of(counts: impl Iterator<Item = Counts> + Clone) -> Usage {
    let prompt = counts.clone().map(|c| c.prompt).max().unwrap_or(0);
    let cached = counts.clone().map(|c| c.cached).max().unwrap_or(0);
    Usage::new(prompt, sum_counts(counts.clone().map(|c| c.completion)), cached)
        .with_reasoning(sum_counts(counts.map(|c| c.reasoning)))
}

/// One choice: when streaming, the bytes before a content-only chunk's text; when collecting, the
/// message so far.
#[derive(Default)]
struct ChatChoice {
    index: u32,
    prefix: Vec<u8>,
    content: String,
    reasoning: String,
    calls: Vec<ToolCallOut>,
    logprobs: Vec<TokenLogprob>,
    finish: Option<Finish>,
}

impl WireFormat for Chat {
    type Choice = ChatChoice;
    type Done = (Choice, Counts);
    type Body = ChatCompletionResponse;

    /// Streaming: the role chunk.
    fn start(&self, index: u32, out: Out<'_>) -> ChatChoice {
        let Some(out) = out else {
            return ChatChoice {
                index,
                ..ChatChoice::default()
            };
        };
        let delta = Delta {
            role: Some("assistant"),
            content: Some(""),
            ..Delta::default()
        };
        out.push(self.delta_event(index, delta, None));
        ChatChoice {
            index,
            prefix: self.content_prefix(index),
            ..ChatChoice::default()
        }
    }

    /// Streaming: up to two chunks, the delta and, at the end, the finish chunk.
    fn step(&self, choice: &mut ChatChoice, step: Step, _: Counts, out: Out<'_>) {
        let Some(out) = out else {
            return collect_step(choice, step, self.logprobs);
        };
        let Step {
            piece,
            call_ids,
            logprobs: lps,
            finish,
            ..
        } = step;
        let index = choice.index;
        let content_only = piece.reasoning.is_empty() && piece.calls.is_empty() && !self.logprobs;
        if content_only && !piece.content.is_empty() {
            out.push(self.content_event(&choice.prefix, &piece.content));
        } else if !piece.is_empty() || (self.logprobs && !lps.is_empty()) {
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
                content: Some(piece.content.as_str()).filter(|c| !c.is_empty()),
                reasoning_content: Some(piece.reasoning.as_str()).filter(|r| !r.is_empty()),
                tool_calls,
            };
            let lp = self.logprobs.then(|| ChoiceLogprobs {
                content: chat_logprobs(&lps),
            });
            out.push(self.delta_event(index, delta, lp));
        }
        if let Some(f) = finish {
            let c = self.chunk(
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
    }

    fn error(&self, _: &mut ChatChoice, error: &ApiError, _: Counts) -> Vec<Bytes> {
        vec![sse::error(error)]
    }

    fn done(&self, c: ChatChoice, index: u32, counts: Counts) -> (Choice, Counts) {
        let (finish_reason, matched_stop) = c.finish.map_or((None, None), |f| (Some(f.reason), f.matched));
        let message = ResponseMessage {
            role: "assistant",
            content: if c.content.is_empty() && !c.calls.is_empty() {
                None
            } else {
                Some(c.content)
            },
            reasoning_content: Some(c.reasoning).filter(|r| !r.is_empty()),
            tool_calls: c.calls,
        };
        let logprobs = self.logprobs.then_some(ChoiceLogprobs { content: c.logprobs });
        let choice = Choice {
            index,
            message,
            logprobs,
            finish_reason,
            matched_stop,
        };
        (choice, counts)
    }

    fn body(&self, done: Vec<(Choice, Counts)>) -> (ChatCompletionResponse, u32, u32) {
        let usage = usage_of(done.iter().map(|(_, c)| *c));
        let (prompt, completion) = (usage.prompt_tokens, usage.completion_tokens);
        let resp = ChatCompletionResponse {
            id: self.id.clone(),
            object: "chat.completion",
            created: self.created,
            model: self.model.clone(),
            system_fingerprint: self.fingerprint.clone(),
            choices: done.into_iter().map(|(choice, _)| choice).collect(),
            usage: Some(usage),
        };
        (resp, prompt, completion)
    }

    /// The usage chunk (`stream_options.include_usage`), then `[DONE]`.
    fn finish(&self, ended: &[(u32, Counts)], _: bool) -> Vec<Bytes> {
        let mut events = Vec::with_capacity(2);
        if self.include_usage {
            let usage = usage_of(ended.iter().map(|(_, c)| *c));
            events.push(sse::data(&self.chunk(Vec::new(), Some(usage))));
        }
        events.push(sse::done());
        events
    }
}

/// A step of a collected choice: its text, reasoning, calls and logprobs appended.
fn collect_step(c: &mut ChatChoice, step: Step, logprobs: bool) {
    c.content.push_str(&step.piece.content);
    c.reasoning.push_str(&step.piece.reasoning);
    for (call, id) in step.piece.calls.iter().zip(step.call_ids) {
        match (c.calls.get_mut(call.index), id) {
            (Some(out), _) => out.function.arguments.push_str(&call.arguments),
            (None, Some(id)) => c.calls.push(ToolCallOut {
                id,
                kind: "function",
                function: FunctionOut {
                    name: call.name.clone().unwrap_or_default(),
                    arguments: call.arguments.clone(),
                },
            }),
            (None, None) => {}
        }
    }
    if logprobs {
        c.logprobs.extend(chat_logprobs(&step.logprobs));
    }
    if step.finish.is_some() {
        c.finish = step.finish;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_fast_path_matches_serde() {
        let ctx = Chat {
            id: "chatcmpl-\"x\"".into(),
            model: "m/ü".into(),
            created: 7,
            fingerprint: "fp".into(),
            logprobs: false,
            include_usage: false,
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
