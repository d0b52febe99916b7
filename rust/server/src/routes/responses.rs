//! OpenAI Responses API: `POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`.
//!
//! The request becomes a chat conversation (stored history + instructions + input items), runs
//! through the same pipeline as chat, and one [`Items`] state machine turns steps into output
//! items (`reasoning`, `message`, `function_call`): the stream sends its events, the
//! non-streaming answer keeps only the final items.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::stream::{self, StreamExt};
use serde_json::{json, Map, Value};
use smgpy_protocol::responses::ResponsesRequest;

use crate::driver::{ChoiceDriver, Counts, Finish, Step};
use crate::engine::GenerateRequest;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::layers::with_tokens;
use crate::pipeline::PipelineSpec;
use crate::prompt::{self, ChatPrompt};
use crate::routes::response_store::{ResponseStore, Stored};
use crate::routes::{start_choices, with_timeout};
use crate::sse;
use crate::state::{random_alnum, unix_now, AppState};

pub async fn create(
    State(state): State<AppState>,
    Extension(store): Extension<Arc<ResponseStore>>,
    ApiJson(req): ApiJson<ResponsesRequest>,
) -> Result<Response, ApiError> {
    let form = req.validate()?;
    let mut history = Vec::new();
    if let Some(prev) = &req.previous_response_id {
        let stored = store.get(prev).ok_or_else(|| {
            ApiError::NotFound(format!(
                "previous response `{prev}` was not found: it was not stored (`store: false`), was deleted, \
                 or was evicted from the in-memory store"
            ))
        })?;
        history.clone_from(&stored.conversation);
    }
    history.extend(form.input_messages.iter().cloned());
    let mut messages = Vec::with_capacity(history.len() + 1);
    if let Some(i) = req.instructions.as_deref().filter(|i| !i.is_empty()) {
        messages.push(json!({"role": "system", "content": i}));
    }
    messages.extend(history.iter().cloned());
    let mut kwargs = Map::new();
    if let Some(e) = &form.reasoning_effort {
        kwargs.insert("reasoning_effort".into(), json!(e));
    }
    let text = prompt::render(
        &state,
        ChatPrompt {
            messages,
            tools: prompt::tools_for_template(form.tools.as_deref(), &form.tool_choice),
            documents: None,
            add_generation_prompt: true,
            continue_final_message: false,
            kwargs,
        },
    )?;
    let mut sampling = req.sampling();
    let plan = prompt::tool_plan(
        &state,
        prompt::ToolRequest {
            tools: form.tools.as_deref(),
            choice: &form.tool_choice,
            parallel: req.parallel_tool_calls.unwrap_or(true),
            has_constraint: sampling.structured.is_some(),
            param: |i| format!("tools[{i}].parameters"),
        },
    )?;
    let forced = plan.forced;
    if let Some(c) = plan.constraint {
        sampling.force(c, "tools");
    }
    let spec = PipelineSpec {
        stops: Vec::new(),
        include_stop: false,
        reasoning: if forced {
            None
        } else {
            prompt::reasoning_options(&state, &text)
        },
        tools: plan.stage,
    };
    let id = format!("resp_{}", random_alnum(24));
    let base = GenerateRequest {
        rid: id.clone(),
        text: Some(text),
        input_ids: None,
        sampling,
        stream: req.stream,
        return_logprob: false,
        top_logprobs_num: 0,
    };
    let driver = start_choices(&state, base, &spec)
        .await?
        .pop()
        .ok_or_else(|| ApiError::Internal("no generation was started".into()))?;
    let ctx = Arc::new(Ctx {
        id,
        created: unix_now(),
        model: req.model.clone().unwrap_or_else(|| state.config().model_name.clone()),
        echo: echo_fields(&req),
        history,
        store: req.store.then_some(store),
    });
    if req.stream {
        Ok(stream_response(&state, ctx, driver))
    } else {
        let resp = with_timeout(state.config().request_timeout, collect(ctx, driver)).await??;
        let count = |k: &str| resp["usage"][k].as_u64().unwrap_or(0) as u32;
        let (p, c) = (count("input_tokens"), count("output_tokens"));
        Ok(with_tokens(Json(resp).into_response(), p, c))
    }
}

pub async fn get(
    Extension(store): Extension<Arc<ResponseStore>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let stored = store.get(&id).ok_or_else(|| not_found(&id))?;
    Ok(Json(stored.response.clone()))
}

pub async fn delete(
    Extension(store): Extension<Arc<ResponseStore>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    if store.remove(&id) {
        Ok(Json(json!({"id": id, "object": "response", "deleted": true})))
    } else {
        Err(not_found(&id))
    }
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

struct Ctx {
    id: String,
    created: u64,
    model: String,
    echo: Map<String, Value>,
    /// Stored history plus this request's input, as chat messages.
    history: Vec<Value>,
    store: Option<Arc<ResponseStore>>,
}

impl Ctx {
    /// The response object; `finish: None` while in progress.
    fn response(&self, output: Vec<Value>, finish: Option<&Finish>, counts: Option<Counts>) -> Value {
        let (status, incomplete) = match finish {
            None => ("in_progress", Value::Null),
            Some(f) if f.reason == "length" => ("incomplete", json!({"reason": "max_output_tokens"})),
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

    /// Store the finished response with the conversation it completes.
    fn save(&self, response: &Value, items: &Items) {
        let Some(store) = &self.store else { return };
        let mut conversation = self.history.clone();
        conversation.push(items.as_chat_message());
        store.put(
            self.id.clone(),
            Stored {
                response: response.clone(),
                conversation,
            },
        );
    }
}

fn usage(c: Counts) -> Value {
    json!({
        "input_tokens": c.prompt,
        "input_tokens_details": {"cached_tokens": c.cached},
        "output_tokens": c.completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": c.prompt + c.completion,
    })
}

enum Item {
    Reasoning {
        id: String,
        text: String,
    },
    Message {
        id: String,
        text: String,
    },
    Call {
        id: String,
        call_id: String,
        name: String,
        args: String,
    },
}

impl Item {
    fn to_json(&self, done: bool) -> Value {
        let status = if done { "completed" } else { "in_progress" };
        match self {
            Item::Reasoning { id, text } => {
                let content = if done {
                    json!([{"type": "reasoning_text", "text": text}])
                } else {
                    json!([])
                };
                json!({"type": "reasoning", "id": id, "summary": [], "content": content})
            }
            Item::Message { id, text } => {
                let content = if done { json!([text_part(text)]) } else { json!([]) };
                json!({"type": "message", "id": id, "status": status, "role": "assistant", "content": content})
            }
            Item::Call {
                id,
                call_id,
                name,
                args,
            } => json!({
                "type": "function_call", "id": id, "call_id": call_id, "name": name,
                "arguments": if done { args.as_str() } else { "" }, "status": status,
            }),
        }
    }
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// Output items built from pipeline steps, with the stream events each step produces.
#[derive(Default)]
struct Items {
    items: Vec<Item>,
    open: bool,
    /// Item index of each tool call, by the parser's call index.
    call_items: Vec<usize>,
    seq: u64,
}

impl Items {
    fn event(&mut self, kind: &str, mut body: Value, out: &mut Vec<Bytes>) {
        if let Value::Object(m) = &mut body {
            m.insert("type".into(), json!(kind));
            m.insert("sequence_number".into(), json!(self.seq));
        }
        self.seq += 1;
        out.push(sse::named(kind, &body));
    }

    fn push(&mut self, step: &Step, out: &mut Vec<Bytes>) {
        let piece = &step.piece;
        if !piece.reasoning.is_empty() {
            if !(self.open && matches!(self.items.last(), Some(Item::Reasoning { .. }))) {
                self.start(
                    Item::Reasoning {
                        id: format!("rs_{}", random_alnum(24)),
                        text: String::new(),
                    },
                    out,
                );
            }
            let (id, index) = self.append(&piece.reasoning);
            self.event(
                "response.reasoning_text.delta",
                json!({"item_id": id, "output_index": index, "content_index": 0, "delta": piece.reasoning}),
                out,
            );
        }
        if !piece.content.is_empty() {
            if !(self.open && matches!(self.items.last(), Some(Item::Message { .. }))) {
                self.start(
                    Item::Message {
                        id: format!("msg_{}", random_alnum(24)),
                        text: String::new(),
                    },
                    out,
                );
            }
            let (id, index) = self.append(&piece.content);
            self.event(
                "response.output_text.delta",
                json!({"item_id": id, "output_index": index, "content_index": 0, "delta": piece.content, "logprobs": []}),
                out,
            );
        }
        for (c, call_id) in piece.calls.iter().zip(&step.call_ids) {
            if let Some(call_id) = call_id {
                let item = Item::Call {
                    id: format!("fc_{}", random_alnum(24)),
                    call_id: call_id.clone(),
                    name: c.name.clone().unwrap_or_default(),
                    args: String::new(),
                };
                self.start(item, out);
                self.call_items.push(self.items.len() - 1);
            }
            let Some(&index) = self.call_items.get(c.index) else {
                continue;
            };
            if c.arguments.is_empty() {
                continue;
            }
            let id = match self.items.get_mut(index) {
                Some(Item::Call { id, args, .. }) => {
                    args.push_str(&c.arguments);
                    id.clone()
                }
                _ => continue,
            };
            self.event(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "output_index": index, "delta": c.arguments}),
                out,
            );
        }
    }

    /// Append text to the open reasoning or message item; returns its id and index.
    fn append(&mut self, s: &str) -> (String, usize) {
        let index = self.items.len().saturating_sub(1);
        match self.items.last_mut() {
            Some(Item::Reasoning { id, text } | Item::Message { id, text }) => {
                text.push_str(s);
                (id.clone(), index)
            }
            _ => (String::new(), index),
        }
    }

    fn start(&mut self, item: Item, out: &mut Vec<Bytes>) {
        self.close(out);
        let index = self.items.len();
        let added = item.to_json(false);
        let first_part = matches!(item, Item::Message { .. }).then(|| match &item {
            Item::Message { id, .. } => id.clone(),
            _ => String::new(),
        });
        self.items.push(item);
        self.open = true;
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
            out,
        );
        if let Some(id) = first_part {
            self.event(
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": text_part("")}),
                out,
            );
        }
    }

    fn close(&mut self, out: &mut Vec<Bytes>) {
        if !self.open {
            return;
        }
        self.open = false;
        let index = self.items.len().saturating_sub(1);
        let Some(item) = self.items.get(index) else { return };
        let done = item.to_json(true);
        let mut events: Vec<(&str, Value)> = Vec::with_capacity(3);
        match item {
            Item::Reasoning { id, text } => events.push((
                "response.reasoning_text.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "text": text}),
            )),
            Item::Message { id, text } => {
                events.push((
                    "response.output_text.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                ));
                events.push((
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "part": text_part(text)}),
                ));
            }
            Item::Call { id, name, args, .. } => events.push((
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": index, "name": name, "arguments": args}),
            )),
        }
        events.push((
            "response.output_item.done",
            json!({"output_index": index, "item": done}),
        ));
        for (kind, body) in events {
            self.event(kind, body, out);
        }
    }

    fn output(&self) -> Vec<Value> {
        self.items.iter().map(|i| i.to_json(true)).collect()
    }

    /// The whole output as one assistant chat message, for the stored conversation.
    fn as_chat_message(&self) -> Value {
        let mut content = String::new();
        let mut reasoning = String::new();
        let mut calls = Vec::new();
        for item in &self.items {
            match item {
                Item::Reasoning { text, .. } => reasoning.push_str(text),
                Item::Message { text, .. } => content.push_str(text),
                Item::Call {
                    call_id, name, args, ..
                } => calls
                    .push(json!({"id": call_id, "type": "function", "function": {"name": name, "arguments": args}})),
            }
        }
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        m.insert("content".into(), json!(content));
        if !reasoning.is_empty() {
            m.insert("reasoning_content".into(), json!(reasoning));
        }
        if !calls.is_empty() {
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        Value::Object(m)
    }
}

async fn collect(ctx: Arc<Ctx>, mut d: ChoiceDriver) -> Result<Value, ApiError> {
    let mut items = Items::default();
    let mut finish = None;
    let mut sink = Vec::new();
    while let Some(step) = d.next().await {
        if let Some(e) = step.error {
            return Err(e.into());
        }
        items.push(&step, &mut sink);
        sink.clear();
        if step.finish.is_some() {
            finish = step.finish;
        }
    }
    let resp = ctx.response(items.output(), finish.as_ref(), Some(d.counts));
    ctx.save(&resp, &items);
    Ok(resp)
}

struct StreamState {
    ctx: Arc<Ctx>,
    driver: ChoiceDriver,
    items: Items,
    started: bool,
}

/// `response.created`, `response.in_progress`, item events, then `response.completed` (or
/// `response.incomplete` when the token limit cut the output).
fn stream_response(state: &AppState, ctx: Arc<Ctx>, driver: ChoiceDriver) -> Response {
    let st = StreamState {
        ctx,
        driver,
        items: Items::default(),
        started: false,
    };
    let events = stream::unfold(Some(st), |st| async move {
        let mut st = st?;
        loop {
            let mut out = Vec::new();
            if !st.started {
                st.started = true;
                let r = st.ctx.response(Vec::new(), None, None);
                st.items.event("response.created", json!({"response": r}), &mut out);
                st.items.event("response.in_progress", json!({"response": r}), &mut out);
                return Some((out, Some(st)));
            }
            let step = st.driver.next().await?;
            if let Some(e) = step.error {
                let e: ApiError = e.into();
                if let ApiError::Internal(m) = &e {
                    tracing::error!(error = %m, "error in stream");
                }
                let body = json!({"code": e.openai_type(), "message": e.to_string(), "param": null});
                st.items.event("error", body, &mut out);
                return Some((out, None));
            }
            st.items.push(&step, &mut out);
            if let Some(f) = &step.finish {
                st.items.close(&mut out);
                let r = st.ctx.response(st.items.output(), Some(f), Some(st.driver.counts));
                st.ctx.save(&r, &st.items);
                let kind = if f.reason == "length" {
                    "response.incomplete"
                } else {
                    "response.completed"
                };
                st.items.event(kind, json!({"response": r}), &mut out);
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
