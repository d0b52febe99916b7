//! Anthropic `POST /v1/messages` and `POST /v1/messages/count_tokens`. Every error on these
//! routes, body parse errors included, is answered in Anthropic's shape.
//!
//! One [`Blocks`] state machine turns pipeline steps into content blocks: the stream sends its
//! events, the non-streaming answer keeps only the final blocks, so both agree by construction.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::Response;
use axum::Json;
use serde_json::{json, Value};
use smgpy_protocol::anthropic::{stop_reason, ChatForm, MessagesRequest, MessagesResponse, MessagesUsage};
use smgpy_protocol::common::MatchedStop;
use smgpy_template::RenderArgs;

use crate::blocks::{Block, Blocks, Event, Kind};
use crate::driver::{Counts, Finish, Step};
use crate::error::{AnthropicError, ApiError};
use crate::extract::ApiJson;
use crate::literal::Rendered;
use crate::prompt;
use crate::routes::prelude::{self, Turn};
use crate::routes::{start_choices, tokenize};
use crate::sse;
use crate::state::AppState;
use crate::wire::{respond, Out, WireFormat};

pub async fn messages(
    State(state): State<AppState>,
    body: Result<ApiJson<MessagesRequest>, ApiError>,
) -> Result<Response, AnthropicError> {
    let ApiJson(req) = body?;
    let form = req.validate(true)?;
    let images = super::image_data(&state, &form.images)?;
    let text = render(&state, &form)?;
    let parallel = !req
        .tool_choice
        .as_ref()
        .and_then(|c| c.get("disable_parallel_tool_use"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let full = text.clone();
    let prepared = prelude::prepare(
        &state,
        Turn {
            rendered: text,
            sampling: req.sampling(),
            tools: form.tools.as_deref(),
            choice: &form.tool_choice,
            parallel,
            tool_param: |i| format!("tools[{i}].input_schema"),
            stop_param: "stop_sequences",
            include_stop: false,
            separate_reasoning: true,
            has_images: !images.is_empty(),
        },
    )
    .await?;
    let id = format!("msg_{}", crate::state::random_alnum(24));
    let stops = prepared.sampling.stop.clone();
    let breakpoints = match &prepared.input_ids {
        Some(ids) => breakpoint_positions(&state, &form, &full, ids).await,
        None => Vec::new(),
    };
    let (mut base, spec) = prepared.into_request(id.clone(), images, req.stream);
    base.cache_breakpoints = breakpoints;
    let drivers = start_choices(&state, base, &spec, "messages", "max_tokens").await?;
    let model = req.model.clone().unwrap_or_else(|| state.config().model_name.clone());
    Ok(respond(&state, Messages { id, model, stops }, drivers, req.stream).await?)
}

pub async fn count_tokens(
    State(state): State<AppState>,
    body: Result<ApiJson<MessagesRequest>, ApiError>,
) -> Result<Json<Value>, AnthropicError> {
    let ApiJson(req) = body?;
    let form = req.validate(false)?;
    let text = render(&state, &form)?;
    let ids = tokenize::encode_rendered(&state, text, "/v1/messages/count_tokens").await?;
    Ok(Json(json!({ "input_tokens": ids.len() })))
}

fn render(state: &AppState, form: &ChatForm) -> Result<Rendered, ApiError> {
    render_through(state, form, form.messages.len(), !form.prefill, form.prefill)
}

/// The prompt of `form`'s first `count` messages.
fn render_through(
    state: &AppState,
    form: &ChatForm,
    count: usize,
    add_generation_prompt: bool,
    continue_final_message: bool,
) -> Result<Rendered, ApiError> {
    let mut kwargs = serde_json::Map::new();
    if let Some(on) = form.thinking {
        // The switch Qwen3-style templates read; other templates ignore unknown variables.
        kwargs.insert("enable_thinking".into(), Value::Bool(on));
    }
    prompt::render(
        state,
        RenderArgs {
            messages: form.messages[..count.min(form.messages.len())].to_vec(),
            tools: prompt::tools_for_template(form.tools.as_deref(), &form.tool_choice),
            documents: None,
            add_generation_prompt,
            continue_final_message,
            kwargs,
        },
    )
}

/// Prompt token positions of the request's `cache_control` breakpoints.
///
/// A breakpoint after chat message `k` is where the render of the messages through `k` stops
/// agreeing with the full prompt's render (templates may close the last turn differently), and
/// its token position is where the two tokenizations stop agreeing, so the position is always a
/// true prefix of the prompt the engine runs. A template that cannot render the shorter
/// conversation just loses that breakpoint: hints never fail a request.
async fn breakpoint_positions(state: &AppState, form: &ChatForm, full: &Rendered, ids: &[i64]) -> Vec<u32> {
    let mut out = Vec::new();
    for &k in &form.cache_breakpoints {
        let Ok(head) = render_through(state, form, k + 1, false, false) else {
            continue;
        };
        let mut agree = head
            .text
            .bytes()
            .zip(full.text.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        while !full.text.is_char_boundary(agree) {
            agree -= 1;
        }
        if agree == 0 {
            continue;
        }
        let Ok((_, Some(head_ids))) = super::prompt_of(state, full.prefix(agree)).await else {
            continue;
        };
        let n = head_ids.iter().zip(ids).take_while(|(a, b)| a == b).count();
        if n > 0 && n < ids.len() {
            out.push(u32::try_from(n).unwrap_or(u32::MAX));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Anthropic's message, or its stream: `message_start`, `ping`, content block events,
/// `message_delta` (stop reason, usage), `message_stop`.
struct Messages {
    id: String,
    model: String,
    stops: Vec<String>,
}

impl Messages {
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

/// A new block's id: Anthropic's tool_use ids read `toolu_...` (ids the model wrote itself are
/// kept); other blocks have none.
fn block_id(kind: &Kind) -> String {
    match kind {
        Kind::Call { call_id, .. } => call_id
            .strip_prefix("call_")
            .map_or_else(|| call_id.clone(), |rest| format!("toolu_{rest}")),
        _ => String::new(),
    }
}

/// A finished block as Anthropic shows it.
fn block_json(b: &Block) -> Value {
    match &b.kind {
        Kind::Reasoning => json!({"type": "thinking", "thinking": b.text, "signature": ""}),
        Kind::Text => json!({"type": "text", "text": b.text}),
        Kind::Call { name, .. } => {
            // Arguments the model left as invalid (or cut-off) JSON still yield an object, as the
            // API promises.
            let input = serde_json::from_str::<Value>(&b.text)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({}));
            json!({"type": "tool_use", "id": b.id, "name": name, "input": input})
        }
    }
}

/// A block as `content_block_start` announces it.
fn start_json(b: &Block) -> Value {
    match &b.kind {
        Kind::Reasoning => json!({"type": "thinking", "thinking": "", "signature": ""}),
        Kind::Text => json!({"type": "text", "text": ""}),
        Kind::Call { name, .. } => json!({"type": "tool_use", "id": b.id, "name": name, "input": {}}),
    }
}

/// Anthropic's stream events for one block event.
fn render_event(blocks: &Blocks, e: Event<'_>, out: &mut Vec<Bytes>) {
    match e {
        Event::Start(i) => {
            if let Some(b) = blocks.blocks.get(i) {
                out.push(sse::named(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": i, "content_block": start_json(b)}),
                ));
            }
        }
        Event::Delta(i, text) => {
            let delta = match blocks.blocks.get(i).map(|b| &b.kind) {
                Some(Kind::Reasoning) => json!({"type": "thinking_delta", "thinking": text}),
                Some(Kind::Text) => json!({"type": "text_delta", "text": text}),
                _ => json!({"type": "input_json_delta", "partial_json": text}),
            };
            out.push(sse::named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": i, "delta": delta}),
            ));
        }
        Event::Stop(i) => out.push(sse::named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": i}),
        )),
    }
}

/// One message's content blocks, and (collecting) how it finished.
struct MessageChoice {
    blocks: Blocks,
    /// `message_start` was sent: it waits for the first engine output, to carry the prompt's
    /// token count.
    started: bool,
    finish: Option<Finish>,
}

impl WireFormat for Messages {
    type Choice = MessageChoice;
    type Done = MessagesResponse;
    type Body = MessagesResponse;

    fn start(&self, _: u32, _: Out<'_>) -> MessageChoice {
        MessageChoice {
            blocks: Blocks::new(block_id),
            started: false,
            finish: None,
        }
    }

    fn step(&self, c: &mut MessageChoice, step: Step, counts: Counts, out: Out<'_>) {
        let Some(out) = out else {
            let mut ignore = |_: &Blocks, _: Event<'_>| {};
            c.blocks.push(&step, &mut ignore);
            if step.finish.is_some() {
                c.blocks.finish(&step.abandoned, &mut ignore);
                c.finish = step.finish;
            }
            return;
        };
        if !c.started {
            c.started = true;
            let msg = self.message(Vec::new(), None, counts);
            out.push(sse::named(
                "message_start",
                &json!({"type": "message_start", "message": msg}),
            ));
            out.push(sse::named("ping", &json!({"type": "ping"})));
        }
        c.blocks.push(&step, &mut |b, e| render_event(b, e, out));
        if let Some(f) = &step.finish {
            c.blocks.finish(&step.abandoned, &mut |b, e| render_event(b, e, out));
            let (reason, sequence) = stop_reason(f.reason, matched_text(f), &self.stops);
            out.push(sse::named(
                "message_delta",
                &json!({"type": "message_delta",
                        "delta": {"stop_reason": reason, "stop_sequence": sequence},
                        "usage": usage(counts)}),
            ));
            out.push(sse::named("message_stop", &json!({"type": "message_stop"})));
        }
    }

    /// Anthropic's `error` event.
    fn error(&self, _: &mut MessageChoice, error: &ApiError, _: Counts) -> Vec<Bytes> {
        vec![sse::named("error", &error.anthropic_body())]
    }

    fn done(&self, c: MessageChoice, _: u32, counts: Counts) -> MessagesResponse {
        let content = c.blocks.blocks.iter().map(block_json).collect();
        self.message(content, c.finish.as_ref(), counts)
    }

    fn body(&self, done: Vec<MessagesResponse>) -> (MessagesResponse, u32, u32) {
        let resp = done
            .into_iter()
            .next()
            .unwrap_or_else(|| self.message(Vec::new(), None, Counts::default()));
        let u = resp.usage;
        (
            resp,
            u.input_tokens.saturating_add(u.cache_read_input_tokens),
            u.output_tokens,
        )
    }
}
