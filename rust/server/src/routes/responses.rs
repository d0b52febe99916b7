//! OpenAI Responses API: `POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`.
//!
//! The request becomes a chat conversation (stored history + instructions + input items), runs
//! through the same pipeline as chat, and the shared block state machine (`crate::blocks`, also
//! behind Anthropic's messages) turns steps into output items (`reasoning`, `message`,
//! `function_call`): the stream sends their events, the non-streaming answer keeps the items.

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use smgpy_protocol::common::FinishReason;
use smgpy_protocol::responses::{ResponsesForm, ResponsesRequest};
use smgpy_template::RenderArgs;

use crate::blocks::{Block, Blocks, Event, Kind};
use crate::driver::{Counts, Finish, Step};
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::literal::Rendered;
use crate::prompt;
use crate::routes::prelude::{self, Turn};
use crate::routes::response_store::Stored;
use crate::routes::start_choices;
use crate::sse;
use crate::state::{random_alnum, unix_now, AppState};
use crate::wire::{respond, Out, WireFormat};

pub async fn create(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<ResponsesRequest>,
) -> Result<Response, ApiError> {
    let form = req.validate()?;
    let images = super::image_data(&state, &form.images)?;
    let text = conversation(&state, &req, &form).await?;
    let prepared = prelude::prepare(
        &state,
        Turn {
            rendered: text,
            sampling: req.sampling(),
            tools: form.tools.as_deref(),
            choice: &form.tool_choice,
            parallel: req.parallel_tool_calls.unwrap_or(true),
            tool_param: |i| format!("tools[{i}].parameters"),
            stop_param: "stop",
            include_stop: false,
            separate_reasoning: true,
            has_images: !images.is_empty(),
        },
    )
    .await?;
    let id = format!("resp_{}", random_alnum(24));
    let (mut base, spec) = prepared.into_request(id.clone(), images, req.stream);
    base.prompt_cache_key = req.prompt_cache_key.clone();
    let driver = start_choices(&state, base, &spec, "input", "max_output_tokens")
        .await?
        .pop()
        .ok_or_else(|| ApiError::Internal("no generation was started".into()))?;
    let wire = Responses {
        id,
        created: unix_now(),
        model: req.model.clone().unwrap_or_else(|| state.config().model_name.clone()),
        echo: echo_fields(&req),
        turn: form.input_messages.clone(),
        input_items: if req.store {
            as_input_items(&req.input)
        } else {
            Vec::new()
        },
        parent: req.previous_response_id.clone(),
        store: req.store.then(|| state.clone()),
    };
    respond(&state, wire, vec![driver], req.stream).await
}

/// The conversation a response continues (instructions, the stored history of
/// `previous_response_id`, then the input items), rendered with the model's template.
async fn conversation(state: &AppState, req: &ResponsesRequest, form: &ResponsesForm) -> Result<Rendered, ApiError> {
    let mut messages = Vec::new();
    if let Some(i) = req.instructions.as_deref().filter(|i| !i.is_empty()) {
        messages.push(json!({"role": "system", "content": i}));
    }
    if let Some(prev) = &req.previous_response_id {
        let history = state.0.responses.history(prev).await?;
        // The stored history counts against the body limit as if the client had sent it.
        let limit = state.config().max_body_bytes;
        if history.iter().map(super::json_size).sum::<usize>() > limit {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        messages.extend(history);
    }
    messages.extend(form.input_messages.iter().cloned());
    let mut kwargs = Map::new();
    if let Some(e) = &form.reasoning_effort {
        kwargs.insert("reasoning_effort".into(), json!(e));
    }
    prompt::render(
        state,
        RenderArgs {
            messages,
            tools: prompt::tools_for_template(form.tools.as_deref(), &form.tool_choice),
            documents: None,
            add_generation_prompt: true,
            continue_final_message: false,
            kwargs,
        },
    )
}

pub async fn get(State(state): State<AppState>, ApiPath(id): ApiPath<String>) -> Result<Response, ApiError> {
    let stored = state.0.responses.get(&id).await?.ok_or_else(|| not_found(&id))?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        stored.response.to_string(),
    )
        .into_response())
}

pub async fn delete(State(state): State<AppState>, ApiPath(id): ApiPath<String>) -> Result<Json<Value>, ApiError> {
    if state.0.responses.remove(&id).await? {
        Ok(Json(json!({"id": id, "object": "response", "deleted": true})))
    } else {
        Err(not_found(&id))
    }
}

/// Query of `GET /v1/responses/{id}/input_items` (OpenAI's pagination: newest first by default).
#[derive(Debug, serde::Deserialize)]
pub struct ItemsQuery {
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    order: Option<String>,
}

pub async fn input_items(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<ItemsQuery>,
) -> Result<Json<Value>, ApiError> {
    let stored = state.0.responses.get(&id).await?.ok_or_else(|| not_found(&id))?;
    let mut items: Vec<Value> = serde_json::from_str(&stored.input_items).unwrap_or_default();
    match q.order.as_deref() {
        None | Some("desc") => items.reverse(),
        Some("asc") => {}
        Some(other) => {
            return Err(ApiError::bad_request(
                Some("order"),
                format!("order must be `asc` or `desc`, got `{other}`"),
            ))
        }
    }
    let limit = q.limit.unwrap_or(20);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::bad_request(Some("limit"), "limit must be between 1 and 100"));
    }
    if let Some(after) = &q.after {
        let at = items
            .iter()
            .position(|i| i.get("id").and_then(Value::as_str) == Some(after.as_str()))
            .ok_or_else(|| ApiError::bad_request(Some("after"), format!("no input item `{after}` in `{id}`")))?;
        items.drain(..=at);
    }
    let has_more = items.len() > limit;
    items.truncate(limit);
    let first = items.first().and_then(|i| i.get("id")).cloned().unwrap_or(Value::Null);
    let last = items.last().and_then(|i| i.get("id")).cloned().unwrap_or(Value::Null);
    Ok(Json(json!({
        "object": "list",
        "data": items,
        "first_id": first,
        "last_id": last,
        "has_more": has_more,
    })))
}

/// The request's `input` as Responses input items, each with an id (a string input is one user
/// message; a message's string content becomes one `input_text` part).
fn as_input_items(input: &Value) -> Vec<Value> {
    let items: Vec<Value> = match input {
        Value::String(text) => vec![json!({"type": "message", "role": "user", "content": text})],
        Value::Array(items) => items.clone(),
        _ => Vec::new(),
    };
    items
        .into_iter()
        .map(|mut item| {
            if let Value::Object(m) = &mut item {
                m.entry("type").or_insert_with(|| json!("message"));
                if m.get("type").and_then(Value::as_str) == Some("message") {
                    if let Some(Value::String(text)) = m.get("content").cloned() {
                        let part = if m.get("role").and_then(Value::as_str) == Some("assistant") {
                            "output_text"
                        } else {
                            "input_text"
                        };
                        m.insert("content".into(), json!([{"type": part, "text": text}]));
                    }
                    m.entry("status").or_insert_with(|| json!("completed"));
                }
                m.entry("id")
                    .or_insert_with(|| json!(format!("msg_{}", random_alnum(24))));
            }
            item
        })
        .collect()
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!(
        "response `{id}` was not found (only responses created with `store: true` are kept)"
    ))
}

/// Request fields the response object repeats back.
fn echo_fields(req: &ResponsesRequest) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("instructions".into(), json!(req.instructions));
    m.insert("max_output_tokens".into(), json!(req.max_output_tokens));
    m.insert("metadata".into(), req.metadata.clone().unwrap_or_else(|| json!({})));
    m.insert(
        "parallel_tool_calls".into(),
        json!(req.parallel_tool_calls.unwrap_or(true)),
    );
    m.insert("previous_response_id".into(), json!(req.previous_response_id));
    let effort = req
        .reasoning
        .as_ref()
        .and_then(|r| r.get("effort"))
        .cloned()
        .unwrap_or(Value::Null);
    m.insert("reasoning".into(), json!({"effort": effort, "summary": null}));
    m.insert("store".into(), json!(req.store));
    m.insert("temperature".into(), json!(req.temperature));
    m.insert(
        "text".into(),
        req.text.clone().unwrap_or_else(|| json!({"format": {"type": "text"}})),
    );
    m.insert(
        "tool_choice".into(),
        req.tool_choice.clone().unwrap_or_else(|| json!("auto")),
    );
    m.insert("tools".into(), json!(req.tools.clone().unwrap_or_default()));
    m.insert("top_p".into(), json!(req.top_p));
    m.insert("truncation".into(), json!("disabled"));
    m.insert("user".into(), json!(req.user));
    m
}

/// The Responses wire format: a `response` object, or its stream: `response.created`,
/// `response.in_progress`, output item events, then `response.completed` (or
/// `response.incomplete` when the token limit cut the output, `response.failed` after an error).
struct Responses {
    id: String,
    created: u64,
    model: String,
    echo: Map<String, Value>,
    /// This request's input messages: with the output, the turn it adds to a stored conversation.
    turn: Vec<Value>,
    input_items: Vec<Value>,
    parent: Option<String>,
    /// Where to store the finished response (`store: true`).
    store: Option<AppState>,
}

impl Responses {
    /// The response object; `finish: None` while in progress.
    fn response(&self, output: Vec<Value>, finish: Option<&Finish>, counts: Option<Counts>) -> Value {
        let (status, incomplete) = match finish {
            None => ("in_progress", Value::Null),
            Some(f) if f.reason == FinishReason::Length => ("incomplete", json!({"reason": "max_output_tokens"})),
            Some(_) => ("completed", Value::Null),
        };
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("object".into(), json!("response"));
        m.insert("created_at".into(), json!(self.created));
        m.insert("status".into(), json!(status));
        m.insert("error".into(), Value::Null);
        m.insert("incomplete_details".into(), incomplete);
        m.insert("model".into(), json!(self.model));
        m.insert("output".into(), Value::Array(output));
        m.extend(self.echo.clone());
        m.insert("usage".into(), counts.map_or(Value::Null, usage));
        Value::Object(m)
    }

    /// Store the finished response with the conversation it completes. Awaited before the
    /// client hears that the response is done, so a follow-up can continue it at once; a store
    /// that fails is logged, and the response is still answered.
    async fn save(&self, response: &Value, items: &Items) {
        let Some(state) = &self.store else { return };
        let mut turn = self.turn.clone();
        turn.push(items.as_chat_message());
        let stored = Stored {
            response: response.clone(),
            parent: self.parent.clone(),
            turn,
            input_items: self.input_items.clone(),
        };
        match state.0.responses.put(self.id.clone(), stored).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(id = %self.id, "response not stored: larger than the whole response store budget")
            }
            Err(e) => tracing::error!(id = %self.id, error = %e, "response not stored"),
        }
    }
}

fn usage(c: Counts) -> Value {
    json!({
        "input_tokens": c.prompt,
        "input_tokens_details": {"cached_tokens": c.cached},
        "output_tokens": c.completion,
        "output_tokens_details": {"reasoning_tokens": c.reasoning},
        "total_tokens": c.prompt.saturating_add(c.completion),
    })
}

/// A new output item's id, by kind (`rs_`, `msg_`, `fc_`, as OpenAI writes them).
fn item_id(kind: &Kind) -> String {
    let prefix = match kind {
        Kind::Reasoning => "rs",
        Kind::Text => "msg",
        Kind::Call { .. } => "fc",
    };
    format!("{prefix}_{}", random_alnum(24))
}

/// An output item as the API shows it; `done: false` while it streams. A call cut off before
/// its arguments closed is `incomplete`, as OpenAI marks it.
fn item_json(b: &Block, done: bool) -> Value {
    let status = match (done, b.incomplete) {
        (false, _) => "in_progress",
        (true, true) => "incomplete",
        (true, false) => "completed",
    };
    match &b.kind {
        Kind::Reasoning => {
            let content = if done {
                json!([{"type": "reasoning_text", "text": b.text}])
            } else {
                json!([])
            };
            json!({"type": "reasoning", "id": b.id, "summary": [], "content": content})
        }
        Kind::Text => {
            let content = if done { json!([text_part(&b.text)]) } else { json!([]) };
            json!({"type": "message", "id": b.id, "status": status, "role": "assistant", "content": content})
        }
        Kind::Call { call_id, name } => json!({
            "type": "function_call", "id": b.id, "call_id": call_id, "name": name,
            "arguments": if done { b.text.as_str() } else { "" }, "status": status,
        }),
    }
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// The output items of one response and the sequence numbers of its stream's events.
struct Items {
    blocks: Blocks,
    seq: u64,
}

impl Items {
    fn new() -> Self {
        Self {
            blocks: Blocks::new(item_id),
            seq: 0,
        }
    }

    fn event(&mut self, kind: &str, body: Value, out: &mut Vec<Bytes>) {
        out.push(named_event(&mut self.seq, kind, body));
    }

    fn push(&mut self, step: &Step, out: &mut Vec<Bytes>) {
        let seq = &mut self.seq;
        self.blocks.push(step, &mut |b, e| render(b, e, seq, out));
    }

    fn finish(&mut self, abandoned: &[usize], out: &mut Vec<Bytes>) {
        let seq = &mut self.seq;
        self.blocks.finish(abandoned, &mut |b, e| render(b, e, seq, out));
    }

    fn output(&self) -> Vec<Value> {
        self.blocks.blocks.iter().map(|b| item_json(b, true)).collect()
    }

    /// The whole output as one assistant chat message, for the stored conversation.
    fn as_chat_message(&self) -> Value {
        let mut content = String::new();
        let mut reasoning = String::new();
        let mut calls = Vec::new();
        for b in &self.blocks.blocks {
            match &b.kind {
                Kind::Reasoning => reasoning.push_str(&b.text),
                Kind::Text => content.push_str(&b.text),
                Kind::Call { call_id, name } => calls
                    .push(json!({"id": call_id, "type": "function", "function": {"name": name, "arguments": b.text}})),
            }
        }
        smgpy_protocol::common::assistant_message(content, reasoning, calls)
    }
}

fn named_event(seq: &mut u64, kind: &str, mut body: Value) -> Bytes {
    if let Value::Object(m) = &mut body {
        m.insert("type".into(), json!(kind));
        m.insert("sequence_number".into(), json!(*seq));
    }
    *seq += 1;
    sse::named(kind, &body)
}

/// The Responses stream events for one block event.
fn render(blocks: &Blocks, e: Event<'_>, seq: &mut u64, out: &mut Vec<Bytes>) {
    let mut emit = |kind: &str, body: Value| out.push(named_event(seq, kind, body));
    match e {
        Event::Start(i) => {
            let Some(b) = blocks.blocks.get(i) else { return };
            emit(
                "response.output_item.added",
                json!({"output_index": i, "item": item_json(b, false)}),
            );
            if b.kind == Kind::Text {
                emit(
                    "response.content_part.added",
                    json!({"item_id": b.id, "output_index": i, "content_index": 0, "part": text_part("")}),
                );
            }
        }
        Event::Delta(i, delta) => {
            let Some(b) = blocks.blocks.get(i) else { return };
            match &b.kind {
                Kind::Reasoning => emit(
                    "response.reasoning_text.delta",
                    json!({"item_id": b.id, "output_index": i, "content_index": 0, "delta": delta}),
                ),
                Kind::Text => emit(
                    "response.output_text.delta",
                    json!({"item_id": b.id, "output_index": i, "content_index": 0, "delta": delta, "logprobs": []}),
                ),
                Kind::Call { .. } => emit(
                    "response.function_call_arguments.delta",
                    json!({"item_id": b.id, "output_index": i, "delta": delta}),
                ),
            }
        }
        Event::Stop(i) => {
            let Some(b) = blocks.blocks.get(i) else { return };
            match &b.kind {
                Kind::Reasoning => emit(
                    "response.reasoning_text.done",
                    json!({"item_id": b.id, "output_index": i, "content_index": 0, "text": b.text}),
                ),
                Kind::Text => {
                    emit(
                        "response.output_text.done",
                        json!({"item_id": b.id, "output_index": i, "content_index": 0, "text": b.text, "logprobs": []}),
                    );
                    emit(
                        "response.content_part.done",
                        json!({"item_id": b.id, "output_index": i, "content_index": 0, "part": text_part(&b.text)}),
                    );
                }
                Kind::Call { name, .. } => emit(
                    "response.function_call_arguments.done",
                    json!({"item_id": b.id, "output_index": i, "name": name, "arguments": b.text}),
                ),
            }
            emit(
                "response.output_item.done",
                json!({"output_index": i, "item": item_json(b, true)}),
            );
        }
    }
}

/// One response's output items; at its end, the finished response (stored when `store: true`).
struct ResponseChoice {
    items: Items,
    response: Option<Value>,
}

impl WireFormat for Responses {
    type Choice = ResponseChoice;
    type Done = Value;
    type Body = Value;

    /// Streaming: `response.created` and `response.in_progress`, at once.
    fn start(&self, _: u32, out: Out<'_>) -> ResponseChoice {
        let mut items = Items::new();
        if let Some(out) = out {
            let r = self.response(Vec::new(), None, None);
            items.event("response.created", json!({"response": r}), out);
            items.event("response.in_progress", json!({"response": r}), out);
        }
        ResponseChoice { items, response: None }
    }

    fn step(&self, c: &mut ResponseChoice, step: Step, counts: Counts, out: Out<'_>) {
        let mut sink = Vec::new();
        let streaming = out.is_some();
        let out = out.unwrap_or(&mut sink);
        c.items.push(&step, out);
        let Some(f) = &step.finish else { return };
        c.items.finish(&step.abandoned, out);
        let r = self.response(c.items.output(), Some(f), Some(counts));
        if streaming {
            let kind = if f.reason == FinishReason::Length {
                "response.incomplete"
            } else {
                "response.completed"
            };
            c.items.event(kind, json!({"response": r}), out);
        }
        c.response = Some(r);
    }

    /// The finished response is stored before the client hears it is done.
    async fn settle(&self, c: &mut ResponseChoice) {
        if let Some(r) = &c.response {
            self.save(r, &c.items).await;
        }
    }

    /// An `error` event, then `response.failed`: the response did not finish, as OpenAI says.
    fn error(&self, c: &mut ResponseChoice, error: &ApiError, counts: Counts) -> Vec<Bytes> {
        let mut out = Vec::new();
        let body = json!({"code": error.openai_type(), "message": error.to_string(), "param": null});
        c.items.event("error", body, &mut out);
        let mut r = self.response(c.items.output(), None, Some(counts));
        if let Value::Object(m) = &mut r {
            m.insert("status".into(), json!("failed"));
            m.insert(
                "error".into(),
                json!({"code": error.openai_type(), "message": error.to_string()}),
            );
        }
        c.items.event("response.failed", json!({"response": r}), &mut out);
        out
    }

    fn done(&self, c: ResponseChoice, _: u32, counts: Counts) -> Value {
        c.response
            .unwrap_or_else(|| self.response(c.items.output(), None, Some(counts)))
    }

    fn body(&self, done: Vec<Value>) -> (Value, u32, u32) {
        let resp = done.into_iter().next().unwrap_or(Value::Null);
        let count = |k: &str| u32::try_from(resp["usage"][k].as_u64().unwrap_or(0)).unwrap_or(u32::MAX);
        let (p, c) = (count("input_tokens"), count("output_tokens"));
        (resp, p, c)
    }
}
