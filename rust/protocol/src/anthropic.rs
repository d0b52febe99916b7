//! Anthropic `POST /v1/messages` and `/v1/messages/count_tokens`: request, validation, and the
//! conversion of Anthropic content blocks into OpenAI-style chat messages, which is what chat
//! templates are written for.

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::cache_hints;
use crate::chat::ToolChoice;
use crate::common::{FinishReason, StopField};
use crate::error::ProtocolError;
use crate::images::ImageRef;
use crate::sampling::{check_ranges, SamplingParams};

/// The request body. `max_tokens` is required, as in Anthropic's API; for `count_tokens` it is
/// optional (see [`MessagesRequest::validate`]).
#[derive(Debug, Clone, Deserialize, Default)]
pub struct MessagesRequest {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    pub messages: Vec<Value>,
    #[serde(default)]
    pub system: Option<Value>,
    #[serde(default)]
    pub stop_sequences: Option<Vec<String>>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub top_k: Option<i64>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    /// `{"type": "enabled", "budget_tokens": N}` or `{"type": "disabled"}`.
    #[serde(default)]
    pub thinking: Option<Value>,
    #[serde(default)]
    pub metadata: Option<Value>,
    /// `{"format": {"type": "json_schema", "schema": ...}, ...}` (structured outputs).
    #[serde(default)]
    pub output_config: Option<Value>,
    /// The structured-outputs beta's `{"type": "json_schema", "schema": ...}`.
    #[serde(default)]
    pub output_format: Option<Value>,
}

/// A validated request, in the chat form the template and pipeline understand.
#[derive(Debug, Clone)]
pub struct ChatForm {
    pub messages: Vec<Value>,
    /// Tools in OpenAI's nested form (`{"type":"function","function":{...}}`).
    pub tools: Option<Vec<Value>>,
    pub tool_choice: ToolChoice,
    /// `Some(false)` when the client disabled thinking; `None` when it said nothing.
    pub thinking: Option<bool>,
    /// The conversation ends with an assistant message: the model continues it (Anthropic's
    /// prefill) instead of starting a new turn.
    pub prefill: bool,
    /// Image blocks, in order (kept as chat `image_url` parts in `messages`).
    pub images: Vec<ImageRef>,
    /// `cache_control` breakpoints, as indices into `messages`: the prefix through that chat
    /// message is one the client will send again (ascending, at most four).
    pub cache_breakpoints: Vec<usize>,
}

impl MessagesRequest {
    pub fn sampling(&self) -> SamplingParams {
        SamplingParams {
            max_new_tokens: self.max_tokens,
            temperature: self.temperature,
            top_p: self.top_p,
            top_k: self.top_k,
            stop: self
                .stop_sequences
                .clone()
                .map(|s| StopField::Many(s).into_vec())
                .unwrap_or_default(),
            structured: self.structured().ok().flatten(),
            ..SamplingParams::default()
        }
    }

    /// The structured output this request asks for (`output_config.format`).
    pub fn structured(&self) -> Result<Option<crate::structured::Structured>, ProtocolError> {
        crate::structured::from_anthropic(self.output_config.as_ref(), self.output_format.as_ref())
    }

    /// Validate and convert. `need_max_tokens` is false for `count_tokens`.
    pub fn validate(&self, need_max_tokens: bool) -> Result<ChatForm, ProtocolError> {
        self.structured()?;
        if need_max_tokens && self.max_tokens.is_none() {
            return Err(ProtocolError::new(
                "max_tokens",
                "`max_tokens` is required (the most tokens to generate)",
            ));
        }
        if let Some(i) = self.stop_sequences.iter().flatten().position(String::is_empty) {
            return Err(ProtocolError::new(
                format!("stop_sequences[{i}]"),
                "stop sequences must not be empty",
            ));
        }
        check_ranges(&self.sampling()).map_err(|mut e| {
            if e.param.as_deref().is_some_and(|p| p.starts_with("stop")) {
                e.param = e.param.map(|p| p.replacen("stop", "stop_sequences", 1));
            }
            e
        })?;
        if self.temperature.is_some_and(|t| t > 1.0) {
            return Err(ProtocolError::new("temperature", "temperature must be between 0 and 1"));
        }
        if self.messages.is_empty() {
            return Err(ProtocolError::new(
                "messages",
                "`messages` must contain at least one message",
            ));
        }
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        let mut breakpoints = Vec::new();
        if let Some(system) = &self.system {
            let text = system_text(system)?;
            if !text.is_empty() {
                messages.push(json!({"role": "system", "content": text}));
            }
        }
        // A breakpoint on the system prompt or on a tool: templates render the tools into the
        // system turn, so both end with the system message (none: nothing to keep before turns).
        let on_tools = self
            .tools
            .iter()
            .flatten()
            .enumerate()
            .try_fold(false, |found, (i, t)| {
                Ok::<bool, ProtocolError>(found | cache_hints::has_breakpoint(t, &format!("tools[{i}]"))?)
            })?;
        if (cache_hints::any_breakpoint(self.system.as_ref(), "system")? || on_tools) && !messages.is_empty() {
            breakpoints.push(0);
        }
        let mut images = Vec::new();
        for (i, m) in self.messages.iter().enumerate() {
            convert_message(i, m, &mut messages, &mut images)?;
            if cache_hints::any_breakpoint(m.get("content"), &format!("messages[{i}].content"))? {
                breakpoints.push(messages.len() - 1);
            }
        }
        breakpoints.dedup();
        if breakpoints.len() > cache_hints::MAX_BREAKPOINTS {
            return Err(ProtocolError::new(
                "messages",
                format!(
                    "a request may set at most {} cache_control breakpoints, got {}",
                    cache_hints::MAX_BREAKPOINTS,
                    breakpoints.len()
                ),
            ));
        }
        let tools = self.tools.as_ref().map(|t| convert_tools(t)).transpose()?;
        let tool_choice = parse_tool_choice(self.tool_choice.as_ref(), tools.as_deref())?;
        // Every variant of the API maps to the chat template's thinking switch: `adaptive` and
        // `between_tools` leave the decision to think to the model, which needs thinking on.
        let thinking = match &self.thinking {
            None | Some(Value::Null) => None,
            Some(t) => match t.get("type").and_then(Value::as_str) {
                Some("enabled" | "adaptive" | "between_tools") => Some(true),
                Some("disabled") => Some(false),
                _ => {
                    return Err(ProtocolError::new(
                        "thinking.type",
                        "thinking.type must be `enabled`, `adaptive`, `between_tools` or `disabled`",
                    ))
                }
            },
        };
        let prefill = match messages.last() {
            Some(last) if last.get("role").and_then(Value::as_str) == Some("assistant") => {
                let text = last.get("content").and_then(Value::as_str).unwrap_or_default();
                // As Anthropic's API: a prefill that ends in whitespace is refused (the model would
                // continue after a space it never wrote itself).
                if text.ends_with(char::is_whitespace) {
                    return Err(ProtocolError::new(
                        format!("messages[{}].content", self.messages.len() - 1),
                        "final assistant content cannot end with trailing whitespace",
                    ));
                }
                last.get("tool_calls").is_none()
            }
            _ => false,
        };
        Ok(ChatForm {
            messages,
            tools,
            tool_choice,
            thinking,
            prefill,
            images,
            cache_breakpoints: breakpoints,
        })
    }
}

fn system_text(system: &Value) -> Result<String, ProtocolError> {
    match system {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut parts = Vec::with_capacity(blocks.len());
            for (i, b) in blocks.iter().enumerate() {
                match (
                    b.get("type").and_then(Value::as_str),
                    b.get("text").and_then(Value::as_str),
                ) {
                    (Some("text"), Some(t)) => parts.push(t),
                    _ => {
                        return Err(ProtocolError::new(
                            format!("system[{i}]"),
                            "system blocks must be {\"type\": \"text\", \"text\": ...}",
                        ))
                    }
                }
            }
            Ok(parts.join("\n"))
        }
        Value::Null => Ok(String::new()),
        _ => Err(ProtocolError::new(
            "system",
            "`system` must be a string or a list of text blocks",
        )),
    }
}

/// Text of a `tool_result`'s `content` (a string or text blocks).
/// A tool result's content: its text, or text and image parts when it holds images (recorded
/// in `images`).
fn tool_result_content(v: Option<&Value>, at: &str, images: &mut Vec<ImageRef>) -> Result<Value, ProtocolError> {
    match v {
        None | Some(Value::Null) => Ok(json!("")),
        Some(Value::String(s)) => Ok(json!(s)),
        Some(Value::Array(blocks)) => {
            let text = blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n");
            let mut parts = Vec::new();
            for (k, b) in blocks.iter().enumerate() {
                if b.get("type").and_then(Value::as_str) == Some("image") {
                    let url = crate::images::anthropic_url(b);
                    parts.push(crate::images::chat_part(&url));
                    images.push(ImageRef {
                        param: format!("{at}[{k}]"),
                        url,
                    });
                }
            }
            if parts.is_empty() {
                return Ok(json!(text));
            }
            parts.insert(0, json!({"type": "text", "text": text}));
            Ok(Value::Array(parts))
        }
        Some(_) => Err(ProtocolError::new(
            at,
            "tool_result content must be a string or a list of text and image blocks",
        )),
    }
}

/// One Anthropic message becomes one or more chat messages: `tool_result` blocks turn into
/// `tool` messages (placed before the user's own text, as the results answer the prior turn).
fn convert_message(i: usize, m: &Value, out: &mut Vec<Value>, images: &mut Vec<ImageRef>) -> Result<(), ProtocolError> {
    let at = |s: &str| format!("messages[{i}]{s}");
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| ProtocolError::new(at(".role"), "each message needs a `role` of `user` or `assistant`"))?;
    if role != "user" && role != "assistant" {
        return Err(ProtocolError::new(
            at(".role"),
            format!("role must be `user` or `assistant`, got `{role}`"),
        ));
    }
    let blocks = match m.get("content") {
        Some(Value::String(s)) => {
            out.push(json!({"role": role, "content": s}));
            return Ok(());
        }
        Some(Value::Array(b)) if !b.is_empty() => b,
        Some(Value::Array(_)) => return Err(ProtocolError::new(at(".content"), "`content` must not be empty")),
        _ => {
            return Err(ProtocolError::new(
                at(".content"),
                "`content` must be a string or a list of content blocks",
            ))
        }
    };
    let mut text = String::new();
    let mut thinking = String::new();
    let mut calls = Vec::new();
    // A user message with images keeps its blocks in order as chat parts.
    let mut parts: Vec<Value> = Vec::new();
    for (j, b) in blocks.iter().enumerate() {
        let here = at(&format!(".content[{j}]"));
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                let t = b.get("text").and_then(Value::as_str).unwrap_or_default();
                text.push_str(t);
                parts.push(json!({"type": "text", "text": t}));
            }
            Some("image") if role == "user" => {
                let url = crate::images::anthropic_url(b);
                parts.push(crate::images::chat_part(&url));
                images.push(ImageRef { param: here, url });
            }
            Some("thinking") if role == "assistant" => {
                thinking.push_str(b.get("thinking").and_then(Value::as_str).unwrap_or_default())
            }
            Some("redacted_thinking") if role == "assistant" => {}
            Some("tool_use") if role == "assistant" => {
                let (Some(id), Some(name)) = (
                    b.get("id").and_then(Value::as_str),
                    b.get("name").and_then(Value::as_str),
                ) else {
                    return Err(ProtocolError::new(here, "a tool_use block needs `id` and `name`"));
                };
                let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                calls.push(json!({
                    "id": id, "type": "function",
                    "function": {"name": name, "arguments": input.to_string()},
                }));
            }
            Some("tool_result") if role == "user" => {
                let id = b
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ProtocolError::new(here.clone(), "a tool_result block needs `tool_use_id`"))?;
                let content = tool_result_content(b.get("content"), &format!("{here}.content"), images)?;
                out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            }
            Some(other) => {
                return Err(ProtocolError::new(
                    format!("{here}.type"),
                    format!("content block type `{other}` is not supported in a `{role}` message"),
                ))
            }
            None => return Err(ProtocolError::new(here, "each content block needs a `type`")),
        }
    }
    if role == "assistant" {
        out.push(crate::common::assistant_message(text, thinking, calls));
    } else if parts
        .iter()
        .any(|p| p.get("type").and_then(Value::as_str) == Some("image_url"))
    {
        out.push(json!({"role": "user", "content": parts}));
    } else if !text.is_empty()
        || !blocks
            .iter()
            .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
    {
        out.push(json!({"role": "user", "content": text}));
    }
    Ok(())
}

/// Anthropic tools (`name`, `description`, `input_schema`) in OpenAI's nested function form.
fn convert_tools(tools: &[Value]) -> Result<Vec<Value>, ProtocolError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let name = t.get("name").and_then(Value::as_str).ok_or_else(|| {
                ProtocolError::new(
                    format!("tools[{i}].name"),
                    "each tool needs a `name` and an `input_schema`",
                )
            })?;
            let mut f = Map::new();
            f.insert("name".into(), json!(name));
            for key in ["description", "strict"] {
                if let Some(v) = t.get(key) {
                    f.insert(key.into(), v.clone());
                }
            }
            f.insert(
                "parameters".into(),
                t.get("input_schema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
            );
            Ok(json!({"type": "function", "function": Value::Object(f)}))
        })
        .collect()
}

fn parse_tool_choice(v: Option<&Value>, tools: Option<&[Value]>) -> Result<ToolChoice, ProtocolError> {
    let has_tools = tools.is_some_and(|t| !t.is_empty());
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(if has_tools { ToolChoice::Auto } else { ToolChoice::None });
    };
    let choice = match v.get("type").and_then(Value::as_str) {
        Some("auto") => ToolChoice::Auto,
        Some("any") => ToolChoice::Required,
        Some("none") => ToolChoice::None,
        Some("tool") => {
            let name = v.get("name").and_then(Value::as_str).ok_or_else(|| {
                ProtocolError::new("tool_choice.name", "tool_choice {\"type\": \"tool\"} needs a `name`")
            })?;
            let known = tools
                .unwrap_or_default()
                .iter()
                .any(|t| crate::chat::tool_name(t) == Some(name));
            if !known {
                return Err(ProtocolError::new(
                    "tool_choice.name",
                    format!("tool `{name}` is not in `tools`"),
                ));
            }
            ToolChoice::Named(name.to_string())
        }
        _ => {
            return Err(ProtocolError::new(
                "tool_choice.type",
                "tool_choice.type must be one of `auto`, `any`, `tool`, `none`",
            ))
        }
    };
    if choice == ToolChoice::Required && !has_tools {
        return Err(ProtocolError::new(
            "tool_choice",
            "tool_choice `any` needs a non-empty `tools` list",
        ));
    }
    Ok(choice)
}

// ---------------------------------------------------------------- responses

/// Token usage in Anthropic's shape.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct MessagesUsage {
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub cache_read_input_tokens: u32,
    pub cache_creation_input_tokens: u32,
}

/// The non-streaming response (also the `message` of `message_start`, with empty content).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MessagesResponse {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub role: &'static str,
    pub model: String,
    pub content: Vec<Value>,
    pub stop_reason: Option<&'static str>,
    pub stop_sequence: Option<String>,
    pub usage: MessagesUsage,
}

/// Anthropic's `stop_reason` for an OpenAI finish reason; `stop_sequence` is the matched
/// client stop sequence, if any.
pub fn stop_reason(finish: FinishReason, matched: Option<&str>, stops: &[String]) -> (&'static str, Option<String>) {
    match finish {
        FinishReason::Length => ("max_tokens", None),
        FinishReason::ToolCalls => ("tool_use", None),
        FinishReason::Stop => match matched.filter(|m| stops.iter().any(|s| s == m)) {
            Some(m) => ("stop_sequence", Some(m.to_string())),
            None => ("end_turn", None),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_json;

    fn form(body: &str) -> Result<ChatForm, ProtocolError> {
        parse_json::<MessagesRequest>(body.as_bytes())?.validate(true)
    }

    #[test]
    fn blocks_become_chat_messages() {
        let f = form(
            r#"{"max_tokens":5,"system":[{"type":"text","text":"be brief"}],"messages":[
            {"role":"user","content":"weather?"},
            {"role":"assistant","content":[{"type":"text","text":"checking"},
              {"type":"tool_use","id":"t1","name":"get","input":{"city":"Paris"}}]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"sunny"}]}],
            "tools":[{"name":"get","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}"#,
        )
        .unwrap();
        assert_eq!(f.messages[0], json!({"role":"system","content":"be brief"}));
        assert_eq!(
            f.messages[2]["tool_calls"][0]["function"]["arguments"],
            json!("{\"city\":\"Paris\"}")
        );
        assert_eq!(
            f.messages[3],
            json!({"role":"tool","tool_call_id":"t1","content":"sunny"})
        );
        assert_eq!(f.messages.len(), 4);
        assert_eq!(f.tool_choice, ToolChoice::Required);
        assert_eq!(f.tools.unwrap()[0]["function"]["parameters"], json!({"type":"object"}));
    }

    #[test]
    fn cache_control_breakpoints_map_to_chat_messages() {
        let f = form(
            r#"{"max_tokens":5,
            "system":[{"type":"text","text":"long rules","cache_control":{"type":"ephemeral"}}],
            "messages":[
              {"role":"user","content":[{"type":"text","text":"q1","cache_control":{"type":"ephemeral"}}]},
              {"role":"assistant","content":"a1"},
              {"role":"user","content":"q2"}]}"#,
        )
        .unwrap();
        assert_eq!(f.cache_breakpoints, vec![0, 1]);
        let on_tool = form(
            r#"{"max_tokens":5,"system":"rules","messages":[{"role":"user","content":"q"}],
            "tools":[{"name":"get","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}]}"#,
        )
        .unwrap();
        assert_eq!(on_tool.cache_breakpoints, vec![0]);
        let none = form(r#"{"max_tokens":5,"messages":[{"role":"user","content":"q"}]}"#).unwrap();
        assert!(none.cache_breakpoints.is_empty());
        let five = (0..5)
            .map(|_| r#"{"role":"user","content":[{"type":"text","text":"q","cache_control":{"type":"ephemeral"}}]}"#)
            .collect::<Vec<_>>()
            .join(",");
        let e = form(&format!(r#"{{"max_tokens":5,"messages":[{five}]}}"#)).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages"));
    }

    #[test]
    fn errors_name_the_field() {
        let p = |b: &str| form(b).unwrap_err().param;
        assert_eq!(
            p(r#"{"messages":[{"role":"user","content":"x"}]}"#).as_deref(),
            Some("max_tokens")
        );
        assert_eq!(
            p(r#"{"max_tokens":1,"messages":[{"role":"system","content":"x"}]}"#).as_deref(),
            Some("messages[0].role")
        );
        // An image block is kept (where it came from is recorded; the server decides).
        let f = form(r#"{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image"}]}]}"#).unwrap();
        assert_eq!(f.images[0].param, "messages[0].content[0]");
        assert_eq!(
            p(r#"{"max_tokens":1,"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"tool","name":"f"}}"#)
                .as_deref(),
            Some("tool_choice.name")
        );
        assert_eq!(
            p(r#"{"max_tokens":1,"messages":[{"role":"user","content":"x"}],"stop_sequences":[""]}"#).as_deref(),
            Some("stop_sequences[0]")
        );
    }

    #[test]
    fn stop_reasons() {
        let stops = vec!["END".to_string()];
        assert_eq!(
            stop_reason(FinishReason::Stop, Some("END"), &stops),
            ("stop_sequence", Some("END".into()))
        );
        assert_eq!(stop_reason(FinishReason::Stop, None, &stops), ("end_turn", None));
        assert_eq!(stop_reason(FinishReason::Length, None, &stops), ("max_tokens", None));
        assert_eq!(stop_reason(FinishReason::ToolCalls, None, &stops), ("tool_use", None));
    }
}
