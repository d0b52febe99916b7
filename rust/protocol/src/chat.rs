//! OpenAI `POST /v1/chat/completions`: request, validation, responses and stream chunks.

use crate::common::{CompletionEnvelope, FinishReason, MatchedStop, StreamOptions, TokenLogprob};
use crate::error::ProtocolError;
use crate::sampling::{check_ranges, SamplingParams};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

crate::with_sampling_fields! {
/// The request body. Unknown fields are ignored (routers add their own); wrong types are errors.
#[derive(Debug, Clone, Deserialize, Default)]
pub struct ChatCompletionRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<Value>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub logprobs: bool,
    #[serde(default)]
    pub top_logprobs: Option<u32>,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default)]
    pub chat_template_kwargs: Option<Map<String, Value>>,
    /// Documents for retrieval-augmented templates (Cohere Command, Granite), handed to the chat
    /// template as `documents`, as vLLM and transformers do.
    #[serde(default)]
    pub documents: Option<Vec<Value>>,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    #[serde(default)]
    pub continue_final_message: bool,
    /// `None`: not sent (on, unless `continue_final_message`). Both on is a 400, as in vLLM.
    #[serde(default)]
    pub add_generation_prompt: Option<bool>,
    #[serde(default = "default_true")]
    pub separate_reasoning: bool,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub metadata: Option<Value>,
    /// Names a conversation whose prefix the engine should keep (see `cache_hints`).
    #[serde(default)]
    pub prompt_cache_key: Option<String>,
}
}

fn default_true() -> bool {
    true
}

/// `tool_choice`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    None,
    Auto,
    Required,
    Named(String),
}

/// Roles a chat message may have.
pub const ROLES: &[&str] = &["system", "developer", "user", "assistant", "tool", "function"];

impl ChatCompletionRequest {
    /// Engine sampling parameters for this request.
    pub fn sampling(&self) -> SamplingParams {
        self.shared_sampling(self.max_completion_tokens.or(self.max_tokens))
    }

    /// Checks serde cannot express: roles, content shapes, ranges, tool_choice.
    pub fn validate(&self) -> Result<ToolChoice, ProtocolError> {
        if self.messages.is_empty() {
            return Err(ProtocolError::new(
                "messages",
                "`messages` must contain at least one message",
            ));
        }
        for (i, m) in self.messages.iter().enumerate() {
            validate_message(i, m)?;
        }
        check_ranges(&self.sampling())?;
        crate::cache_hints::check_key(self.prompt_cache_key.as_deref())?;
        if self.continue_final_message && self.add_generation_prompt == Some(true) {
            return Err(ProtocolError::new(
                "continue_final_message",
                "`continue_final_message` continues the last (assistant) message, and `add_generation_prompt` \
                 starts a new one: send only one of them",
            ));
        }
        crate::common::check_stream_options(self.stream, self.stream_options.as_ref())?;
        if let Some(k) = self.top_logprobs {
            if k > 20 {
                return Err(ProtocolError::new(
                    "top_logprobs",
                    format!("top_logprobs must be at most 20, got {k}"),
                ));
            }
            if !self.logprobs {
                return Err(ProtocolError::new(
                    "top_logprobs",
                    "top_logprobs requires `logprobs: true`",
                ));
            }
        }
        if let Some(tools) = &self.tools {
            for (i, t) in tools.iter().enumerate() {
                if tool_name(t).is_none() {
                    return Err(ProtocolError::new(
                        format!("tools[{i}]"),
                        "each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
                    ));
                }
            }
        }
        self.structured()?;
        parse_tool_choice(self.tool_choice.as_ref(), self.tools.as_deref())
    }
}

/// Name of a tool definition, nested (`{"type":"function","function":{"name"}}`) or flat.
pub fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("function")
        .and_then(|f| f.get("name"))
        .or_else(|| tool.get("name"))
        .and_then(Value::as_str)
}

fn validate_message(i: usize, m: &Value) -> Result<(), ProtocolError> {
    let obj = m
        .as_object()
        .ok_or_else(|| ProtocolError::new(format!("messages[{i}]"), "each message must be an object"))?;
    let role = obj
        .get("role")
        .ok_or_else(|| ProtocolError::new(format!("messages[{i}].role"), "missing field `role`"))?;
    let role = role
        .as_str()
        .ok_or_else(|| ProtocolError::new(format!("messages[{i}].role"), "`role` must be a string"))?;
    if !ROLES.contains(&role) {
        return Err(ProtocolError::new(
            format!("messages[{i}].role"),
            format!("unknown role `{role}`; expected one of: {}", ROLES.join(", ")),
        ));
    }
    match obj.get("content") {
        None | Some(Value::Null) => {
            // An assistant turn may carry only tool calls (or nothing at all, as some clients send).
            if role != "assistant" {
                return Err(ProtocolError::new(
                    format!("messages[{i}].content"),
                    format!("a `{role}` message needs `content`"),
                ));
            }
        }
        Some(Value::String(_)) => {}
        Some(Value::Array(parts)) => {
            for (j, p) in parts.iter().enumerate() {
                let ok = p.get("type").and_then(Value::as_str).is_some() || p.is_string();
                if !ok {
                    return Err(ProtocolError::new(
                        format!("messages[{i}].content[{j}]"),
                        "content parts must be objects with a `type` (e.g. {\"type\": \"text\", \"text\": ...})",
                    ));
                }
            }
        }
        Some(_) => {
            return Err(ProtocolError::new(
                format!("messages[{i}].content"),
                "`content` must be a string, an array of content parts, or null",
            ))
        }
    }
    Ok(())
}

fn parse_tool_choice(v: Option<&Value>, tools: Option<&[Value]>) -> Result<ToolChoice, ProtocolError> {
    let has_tools = tools.is_some_and(|t| !t.is_empty());
    let choice = match v {
        None | Some(Value::Null) => {
            if has_tools {
                ToolChoice::Auto
            } else {
                ToolChoice::None
            }
        }
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            other => {
                return Err(ProtocolError::new(
                    "tool_choice",
                    format!("tool_choice must be `none`, `auto`, `required` or a named function, got `{other}`"),
                ))
            }
        },
        Some(obj @ Value::Object(_)) => {
            let name = obj
                .get("function")
                .and_then(|f| f.get("name"))
                .or_else(|| obj.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ProtocolError::new(
                        "tool_choice",
                        "a named tool_choice is {\"type\": \"function\", \"function\": {\"name\": ...}}",
                    )
                })?;
            ToolChoice::Named(name.to_string())
        }
        Some(_) => {
            return Err(ProtocolError::new(
                "tool_choice",
                "tool_choice must be a string or an object",
            ))
        }
    };
    match &choice {
        ToolChoice::Required if !has_tools => Err(ProtocolError::new(
            "tool_choice",
            "tool_choice `required` needs a non-empty `tools` list",
        )),
        ToolChoice::Named(n) if !tools.unwrap_or_default().iter().any(|t| tool_name(t) == Some(n)) => {
            Err(ProtocolError::new(
                "tool_choice",
                format!("tool_choice names `{n}`, which is not in `tools`"),
            ))
        }
        _ => Ok(choice),
    }
}

// ---------------------------------------------------------------- responses

/// A tool call in a response message.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ToolCallOut {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: FunctionOut,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FunctionOut {
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ResponseMessage {
    pub role: &'static str,
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallOut>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChoiceLogprobs {
    pub content: Vec<TokenLogprob>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Choice {
    pub index: u32,
    pub message: ResponseMessage,
    pub logprobs: Option<ChoiceLogprobs>,
    pub finish_reason: Option<FinishReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_stop: Option<MatchedStop>,
}

/// `usage` is always there in a whole response.
pub type ChatCompletionResponse = CompletionEnvelope<String, Choice>;

// ---------------------------------------------------------------- stream chunks

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ToolCallChunk<'a> {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub function: FunctionChunk<'a>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FunctionChunk<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    pub arguments: &'a str,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallChunk<'a>>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ChunkChoice<'a> {
    pub index: u32,
    pub delta: Delta<'a>,
    pub logprobs: Option<ChoiceLogprobs>,
    pub finish_reason: Option<FinishReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_stop: Option<MatchedStop>,
}

pub type ChatCompletionChunk<'a> = CompletionEnvelope<&'a str, ChunkChoice<'a>>;

impl ChatCompletionRequest {
    /// Whether the rendered prompt ends with a fresh assistant turn.
    pub fn generation_prompt(&self) -> bool {
        self.add_generation_prompt.unwrap_or(!self.continue_final_message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_json;

    fn req(body: &str) -> Result<ToolChoice, ProtocolError> {
        parse_json::<ChatCompletionRequest>(body.as_bytes())?.validate()
    }

    #[test]
    fn validation_names_the_field() {
        let e = req(r#"{"messages":[{"role":"wizard","content":"x"}]}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[0].role"));
        let e = req(r#"{"messages":[]}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages"));
        let e = req(r#"{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("temperature"));
        let e = req(r#"{"messages":[{"role":"user","content":"x"}],"stop":["a",""]}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("stop[1]"));
        let e = req(r#"{"messages":[{"role":"user","content":7}]}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[0].content"));
    }

    #[test]
    fn tool_choice_forms() {
        let tools = r#""tools":[{"type":"function","function":{"name":"f","parameters":{}}}]"#;
        let ok = |tc: &str| {
            req(&format!(
                r#"{{"messages":[{{"role":"user","content":"x"}}],{tools},{tc}}}"#
            ))
        };
        assert_eq!(ok(r#""tool_choice":"auto""#).unwrap(), ToolChoice::Auto);
        assert_eq!(ok(r#""tool_choice":"none""#).unwrap(), ToolChoice::None);
        assert_eq!(
            ok(r#""tool_choice":{"type":"function","function":{"name":"f"}}"#).unwrap(),
            ToolChoice::Named("f".into())
        );
        assert!(ok(r#""tool_choice":{"type":"function","function":{"name":"g"}}"#).is_err());
        assert!(req(r#"{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}"#).is_err());
    }

    #[test]
    fn unknown_fields_are_ignored() {
        assert!(req(r#"{"messages":[{"role":"user","content":"x"}],"router_hint":{"a":1}}"#).is_ok());
    }
}
