//! Anthropic `POST /v1/messages` and `POST /v1/messages/count_tokens`. Every error on these
//! routes, body parse errors included, is answered in Anthropic's shape.
//!
//! One [`Blocks`] state machine turns pipeline steps into content blocks: the stream sends its
//! events, the non-streaming answer keeps only the final blocks, so both agree by construction.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream::{self, StreamExt};
use serde_json::{json, Value};
use smgpy_protocol::anthropic::{stop_reason, ChatForm, MessagesRequest, MessagesResponse, MessagesUsage};
use smgpy_protocol::common::MatchedStop;

use crate::driver::{ChoiceDriver, Counts, Finish, Step};
use crate::engine::GenerateRequest;
use crate::error::{AnthropicError, ApiError};
use crate::extract::ApiJson;
use crate::layers::with_tokens;
use crate::pipeline::PipelineSpec;
use crate::prompt::{self, ChatPrompt};
use crate::routes::{start_choices, tokenize, with_timeout};
use crate::sse;
use crate::state::AppState;

pub async fn messages(
    State(state): State<AppState>,
    body: Result<ApiJson<MessagesRequest>, ApiError>,
) -> Result<Response, AnthropicError> {
    let ApiJson(req) = body?;
    let form = req.validate(true)?;
    let text = render(&state, &form)?;
    let mut sampling = req.sampling();
    let parallel = !req
        .tool_choice
        .as_ref()
        .and_then(|c| c.get("disable_parallel_tool_use"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let plan = prompt::tool_plan(
        &state,
        prompt::ToolRequest {
            tools: form.tools.as_deref(),
            choice: &form.tool_choice,
            parallel,
            has_constraint: sampling.structured.is_some(),
            param: |i| format!("tools[{i}].input_schema"),
        },
    )?;
    let forced = plan.forced;
    if let Some(c) = plan.constraint {
        sampling.force(c, "tools");
    }
    let stops = sampling.stop.clone();
    let spec = PipelineSpec {
        stops: stops.clone(),
        include_stop: false,
        reasoning: if forced {
            None
        } else {
            prompt::reasoning_options(&state, &text)
        },
        tools: plan.stage,
    };
    let id = state.new_id("msg");
    let base = GenerateRequest {
        rid: id.clone(),
        text: Some(text),
        input_ids: None,
        sampling,
        stream: req.stream,
        return_logprob: false,
        top_logprobs_num: 0,
    };
    let mut drivers = start_choices(&state, base, &spec).await?;
    let driver = drivers
        .pop()
        .ok_or_else(|| ApiError::Internal("no generation was started".into()))?;
    let model = req.model.clone().unwrap_or_else(|| state.config().model_name.clone());
    let ctx = Arc::new(Ctx { id, model, stops });
    if req.stream {
        Ok(stream_response(&state, ctx, driver))
    } else {
        let resp = with_timeout(state.config().request_timeout, collect(ctx, driver)).await??;
        let u = resp.usage;
        Ok(with_tokens(
            Json(resp).into_response(),
            u.input_tokens + u.cache_read_input_tokens,
            u.output_tokens,
        ))
    }
}

pub async fn count_tokens(
    State(state): State<AppState>,
    body: Result<ApiJson<MessagesRequest>, ApiError>,
) -> Result<Json<Value>, AnthropicError> {
    let ApiJson(req) = body?;
    let form = req.validate(false)?;
    let text = render(&state, &form)?;
    let ids = tokenize::encode(&state, text, "/v1/messages/count_tokens").await?;
    Ok(Json(json!({ "input_tokens": ids.len() })))
}

fn render(state: &AppState, form: &ChatForm) -> Result<String, ApiError> {
    let mut kwargs = serde_json::Map::new();
    if let Some(on) = form.thinking {
        // The switch Qwen3-style templates read; other templates ignore unknown variables.
        kwargs.insert("enable_thinking".into(), Value::Bool(on));
    }
    prompt::render(
        state,
        ChatPrompt {
            messages: form.messages.clone(),
            tools: prompt::tools_for_template(form.tools.as_deref(), &form.tool_choice),
            documents: None,
            add_generation_prompt: true,
            continue_final_message: false,
            kwargs,
        },
    )
}

struct Ctx {
    id: String,
    model: String,
    stops: Vec<String>,
}

impl Ctx {
    fn message(&self, content: Vec<Value>, finish: Option<&Finish>, counts: Counts) -> MessagesResponse {
        let (reason, sequence) = match finish {
            Some(f) => {
                let (r, s) = stop_reason(f.reason, matched_text(f), &self.stops);
                (Some(r), s)
            }
            None => (None, None),
        };
        MessagesResponse {
            id: self.id.clone(),
            kind: "message",
            role: "assistant",
            model: self.model.clone(),
            content,
            stop_reason: reason,
            stop_sequence: sequence,
            usage: usage(counts),
        }
    }
}

fn matched_text(f: &Finish) -> Option<&str> {
    match &f.matched {
        Some(MatchedStop::Text(s)) => Some(s),
        _ => None,
    }
}

fn usage(c: Counts) -> MessagesUsage {
    MessagesUsage {
        input_tokens: c.prompt.saturating_sub(c.cached),
        output_tokens: c.completion,
        cache_read_input_tokens: c.cached,
        cache_creation_input_tokens: 0,
    }
}

enum Block {
    Thinking(String),
    Text(String),
    ToolUse { id: String, name: String, args: String },
}

impl Block {
    fn to_json(&self) -> Value {
        match self {
            Block::Thinking(t) => json!({"type": "thinking", "thinking": t, "signature": ""}),
            Block::Text(t) => json!({"type": "text", "text": t}),
            Block::ToolUse { id, name, args } => {
                // Arguments the model left as invalid JSON still yield an object, as the API promises.
                let input = serde_json::from_str::<Value>(args)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        }
    }

    fn start_json(&self) -> Value {
        match self {
            Block::Thinking(_) => json!({"type": "thinking", "thinking": "", "signature": ""}),
            Block::Text(_) => json!({"type": "text", "text": ""}),
            Block::ToolUse { id, name, .. } => json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
        }
    }
}

/// Content blocks built from pipeline steps, with the stream events each step produces.
#[derive(Default)]
struct Blocks {
    blocks: Vec<Block>,
    open: bool,
    /// Block index of each tool call, by the parser's call index.
    call_blocks: Vec<usize>,
}

impl Blocks {
    fn push(&mut self, step: &Step, out: &mut Vec<Bytes>) {
        let piece = &step.piece;
        if !piece.reasoning.is_empty() {
            if !matches!(self.blocks.last(), Some(Block::Thinking(_)) if self.open) {
                self.start(Block::Thinking(String::new()), out);
            }
            if let Some(Block::Thinking(t)) = self.blocks.last_mut() {
                t.push_str(&piece.reasoning);
            }
            self.delta(json!({"type": "thinking_delta", "thinking": piece.reasoning}), out);
        }
        if !piece.content.is_empty() {
            if !matches!(self.blocks.last(), Some(Block::Text(_)) if self.open) {
                self.start(Block::Text(String::new()), out);
            }
            if let Some(Block::Text(t)) = self.blocks.last_mut() {
                t.push_str(&piece.content);
            }
            self.delta(json!({"type": "text_delta", "text": piece.content}), out);
        }
        for (c, id) in piece.calls.iter().zip(&step.call_ids) {
            if let Some(id) = id {
                let name = c.name.clone().unwrap_or_default();
                self.start(
                    Block::ToolUse {
                        id: id.clone(),
                        name,
                        args: String::new(),
                    },
                    out,
                );
                self.call_blocks.push(self.blocks.len() - 1);
            }
            if c.arguments.is_empty() {
                continue;
            }
            let Some(&b) = self.call_blocks.get(c.index) else {
                continue;
            };
            if let Some(Block::ToolUse { args, .. }) = self.blocks.get_mut(b) {
                args.push_str(&c.arguments);
            }
            out.push(sse::named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": b,
                        "delta": {"type": "input_json_delta", "partial_json": c.arguments}}),
            ));
        }
    }

    fn start(&mut self, block: Block, out: &mut Vec<Bytes>) {
        self.close(out);
        out.push(sse::named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": self.blocks.len(), "content_block": block.start_json()}),
        ));
        self.blocks.push(block);
        self.open = true;
    }

    fn delta(&self, delta: Value, out: &mut Vec<Bytes>) {
        let index = self.blocks.len().saturating_sub(1);
        out.push(sse::named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
    }

    fn close(&mut self, out: &mut Vec<Bytes>) {
        if self.open {
            self.open = false;
            let index = self.blocks.len().saturating_sub(1);
            out.push(sse::named(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
    }

    fn content(&self) -> Vec<Value> {
        self.blocks.iter().map(Block::to_json).collect()
    }
}

async fn collect(ctx: Arc<Ctx>, mut d: ChoiceDriver) -> Result<MessagesResponse, ApiError> {
    let mut blocks = Blocks::default();
    let mut finish = None;
    let mut sink = Vec::new();
    while let Some(step) = d.next().await {
        if let Some(e) = step.error {
            return Err(e.into());
        }
        blocks.push(&step, &mut sink);
        sink.clear();
        if step.finish.is_some() {
            finish = step.finish;
        }
    }
    Ok(ctx.message(blocks.content(), finish.as_ref(), d.counts))
}

/// An error inside an open Anthropic stream.
fn error_event(e: ApiError) -> Bytes {
    if let ApiError::Internal(m) = &e {
        tracing::error!(error = %m, "error in stream");
    }
    sse::named("error", &e.anthropic_body())
}

struct StreamState {
    ctx: Arc<Ctx>,
    driver: ChoiceDriver,
    blocks: Blocks,
    started: bool,
}

/// `message_start`, `ping`, block events, `message_delta` (stop reason, usage), `message_stop`.
/// `message_start` waits for the first engine output so it can carry the prompt's token count.
fn stream_response(state: &AppState, ctx: Arc<Ctx>, driver: ChoiceDriver) -> Response {
    let st = StreamState {
        ctx,
        driver,
        blocks: Blocks::default(),
        started: false,
    };
    let events = stream::unfold(Some(st), |st| async move {
        let mut st = st?;
        loop {
            let step = st.driver.next().await?;
            let mut out = Vec::new();
            if let Some(e) = step.error {
                return Some((vec![error_event(e.into())], None));
            }
            if !st.started {
                st.started = true;
                let msg = st.ctx.message(Vec::new(), None, st.driver.counts);
                out.push(sse::named(
                    "message_start",
                    &json!({"type": "message_start", "message": msg}),
                ));
                out.push(sse::named("ping", &json!({"type": "ping"})));
            }
            st.blocks.push(&step, &mut out);
            if let Some(f) = &step.finish {
                st.blocks.close(&mut out);
                let (reason, sequence) = stop_reason(f.reason, matched_text(f), &st.ctx.stops);
                let u = usage(st.driver.counts);
                out.push(sse::named(
                    "message_delta",
                    &json!({"type": "message_delta",
                            "delta": {"stop_reason": reason, "stop_sequence": sequence},
                            "usage": u}),
                ));
                out.push(sse::named("message_stop", &json!({"type": "message_stop"})));
            }
            if out.is_empty() {
                continue;
            }
            return Some((out, Some(st)));
        }
    })
    .flat_map(stream::iter);
    sse::response(events, state.config().keep_alive)
}
