//! OpenAI `POST /v1/responses`: request, validation, and the conversion of input items
//! (messages, `function_call`, `function_call_output`, `reasoning`) into chat messages.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::chat::ToolChoice;
use crate::error::ProtocolError;
use crate::images::ImageRef;
use crate::sampling::{check_ranges, SamplingParams};

/// The request body. Unknown fields are ignored; wrong types are errors naming the field.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct ResponsesRequest {
    pub model: Option<String>,
    /// A string or a list of input items.
    pub input: Value,
    pub instructions: Option<String>,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
    pub parallel_tool_calls: Option<bool>,
    pub max_output_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub stream: bool,
    #[serde(default = "default_true")]
    pub store: bool,
    pub previous_response_id: Option<String>,
    /// Names a conversation whose prefix the engine should keep (see `cache_hints`).
    pub prompt_cache_key: Option<String>,
    /// `{"effort": "low" | "medium" | "high", ...}`.
    pub reasoning: Option<Value>,
    pub metadata: Option<Value>,
    pub user: Option<String>,
    pub text: Option<Value>,
}

fn default_true() -> bool {
    true
}

/// A validated request: the new turns as chat messages (without `instructions`, which apply
/// to this request only and are not carried to the next one) and the parsed tool settings.
#[derive(Debug, Clone)]
pub struct ResponsesForm {
    pub input_messages: Vec<Value>,
    /// `input_image` parts, in order (kept as chat `image_url` parts in `input_messages`).
    pub images: Vec<ImageRef>,
    /// Tools in OpenAI's nested chat form.
    pub tools: Option<Vec<Value>>,
    pub tool_choice: ToolChoice,
    pub reasoning_effort: Option<String>,
}

impl ResponsesRequest {
    pub fn sampling(&self) -> SamplingParams {
        SamplingParams {
            max_new_tokens: self.max_output_tokens,
            temperature: self.temperature,
            top_p: self.top_p,
            structured: crate::structured::from_responses(self.text.as_ref()).ok().flatten(),
            ..SamplingParams::default()
        }
    }

    pub fn validate(&self) -> Result<ResponsesForm, ProtocolError> {
        crate::structured::from_responses(self.text.as_ref())?;
        crate::cache_hints::check_key(self.prompt_cache_key.as_deref())?;
        check_ranges(&self.sampling()).map_err(|mut e| {
            if e.param.as_deref() == Some("max_tokens") {
                e = ProtocolError::new("max_output_tokens", "max_output_tokens must be at least 1");
            }
            e
        })?;
        let mut images = Vec::new();
        let input_messages = match &self.input {
            Value::String(s) => vec![json!({"role": "user", "content": s})],
            Value::Array(items) if !items.is_empty() => convert_items(items, &mut images)?,
            Value::Array(_) => return Err(ProtocolError::new("input", "`input` must not be an empty list")),
            Value::Null => return Err(ProtocolError::new("input", "missing field `input`")),
            _ => {
                return Err(ProtocolError::new(
                    "input",
                    "`input` must be a string or a list of input items",
                ))
            }
        };
        let tools = self.tools.as_ref().map(|t| convert_tools(t)).transpose()?;
        let tool_choice = parse_tool_choice(self.tool_choice.as_ref(), tools.as_deref())?;
        let reasoning_effort = match &self.reasoning {
            None | Some(Value::Null) => None,
            Some(Value::Object(r)) => match r.get("effort") {
                None | Some(Value::Null) => None,
                Some(Value::String(e)) => Some(e.clone()),
                Some(_) => {
                    return Err(ProtocolError::new(
                        "reasoning.effort",
                        "reasoning.effort must be a string",
                    ))
                }
            },
            Some(_) => return Err(ProtocolError::new("reasoning", "`reasoning` must be an object")),
        };
        Ok(ResponsesForm {
            images,
            input_messages,
            tools,
            tool_choice,
            reasoning_effort,
        })
    }
}

/// Message content as chat content: its text (parts of type `input_text` / `output_text` /
/// `text` / `refusal` joined), or, when it holds `input_image` parts, text and image parts in
/// order (each image recorded in `images`).
fn content_value(v: &Value, at: &str, images: &mut Vec<ImageRef>) -> Result<Value, ProtocolError> {
    match v {
        Value::String(s) => Ok(json!(s)),
        Value::Array(parts) => {
            let mut out = String::new();
            let mut chat_parts: Vec<Value> = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                match p.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text" | "text") => {
                        let t = p.get("text").and_then(Value::as_str).unwrap_or_default();
                        out.push_str(t);
                        chat_parts.push(json!({"type": "text", "text": t}));
                    }
                    Some("refusal") => out.push_str(p.get("refusal").and_then(Value::as_str).unwrap_or_default()),
                    Some("input_image") => {
                        let url = p
                            .get("image_url")
                            .and_then(Value::as_str)
                            .or_else(|| p.get("file_id").and_then(Value::as_str))
                            .unwrap_or_default()
                            .to_string();
                        chat_parts.push(crate::images::chat_part(&url));
                        images.push(ImageRef {
                            param: format!("{at}[{j}]"),
                            url,
                        });
                    }
                    Some(other) => {
                        return Err(ProtocolError::new(
                            format!("{at}[{j}].type"),
                            format!("content part type `{other}` is not supported by this server; use `input_text`"),
                        ))
                    }
                    None => {
                        return Err(ProtocolError::new(
                            format!("{at}[{j}].type"),
                            "each content part needs a `type` (e.g. `input_text`)",
                        ))
                    }
                }
            }
            if chat_parts
                .iter()
                .any(|p| p.get("type").and_then(Value::as_str) == Some("image_url"))
            {
                Ok(Value::Array(chat_parts))
            } else {
                Ok(json!(out))
            }
        }
        _ => Err(ProtocolError::new(
            at,
            "message content must be a string or a list of content parts",
        )),
    }
}

/// Input items in order. Consecutive `function_call` items (and a preceding assistant message
/// or reasoning item) merge into one assistant turn, as chat templates expect.
pub fn convert_items(items: &[Value], images: &mut Vec<ImageRef>) -> Result<Vec<Value>, ProtocolError> {
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    // Whether the last pushed message is an assistant turn that may still take tool calls.
    let mut open_assistant = false;
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        let kind = item.get("type").and_then(Value::as_str);
        match kind {
            Some("message") | None => {
                let role = item
                    .get("role")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ProtocolError::new(format!("{at}.role"), "a message item needs a `role`"))?;
                if !matches!(role, "user" | "assistant" | "system" | "developer") {
                    return Err(ProtocolError::new(
                        format!("{at}.role"),
                        format!("role must be `user`, `assistant`, `system` or `developer`, got `{role}`"),
                    ));
                }
                let content = item
                    .get("content")
                    .ok_or_else(|| ProtocolError::new(format!("{at}.content"), "a message item needs `content`"))?;
                let content = content_value(content, &format!("{at}.content"), images)?;
                let role = if role == "developer" { "system" } else { role };
                if role == "assistant" && open_assistant {
                    if let (Some(Value::Object(m)), Some(text)) = (out.last_mut(), content.as_str()) {
                        let prev = m.get("content").and_then(Value::as_str).unwrap_or_default().to_string();
                        m.insert("content".into(), json!(prev + text));
                        continue;
                    }
                }
                out.push(json!({"role": role, "content": content}));
                open_assistant = role == "assistant";
            }
            Some("reasoning") => {
                let text = reasoning_text(item);
                if !open_assistant {
                    out.push(json!({"role": "assistant", "content": ""}));
                    open_assistant = true;
                }
                if let Some(Value::Object(m)) = out.last_mut() {
                    m.insert("reasoning_content".into(), json!(text));
                }
            }
            Some("function_call") => {
                let call_id = item.get("call_id").and_then(Value::as_str);
                let name = item.get("name").and_then(Value::as_str);
                let args = item.get("arguments").and_then(Value::as_str);
                let (Some(call_id), Some(name), Some(args)) = (call_id, name, args) else {
                    return Err(ProtocolError::new(
                        at,
                        "a function_call item needs `call_id`, `name` and `arguments` (a JSON string)",
                    ));
                };
                if !open_assistant {
                    out.push(json!({"role": "assistant", "content": ""}));
                    open_assistant = true;
                }
                if let Some(Value::Object(m)) = out.last_mut() {
                    let call =
                        json!({"id": call_id, "type": "function", "function": {"name": name, "arguments": args}});
                    match m.get_mut("tool_calls") {
                        Some(Value::Array(calls)) => calls.push(call),
                        _ => {
                            m.insert("tool_calls".into(), json!([call]));
                        }
                    }
                }
            }
            Some("function_call_output") => {
                let call_id = item.get("call_id").and_then(Value::as_str).ok_or_else(|| {
                    ProtocolError::new(format!("{at}.call_id"), "a function_call_output item needs `call_id`")
                })?;
                let output = match item.get("output") {
                    Some(Value::String(s)) => json!(s),
                    Some(v @ Value::Array(_)) => content_value(v, &format!("{at}.output"), images)?,
                    _ => return Err(ProtocolError::new(format!("{at}.output"), "`output` must be a string")),
                };
                out.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
                open_assistant = false;
            }
            Some(other) => {
                return Err(ProtocolError::new(
                    format!("{at}.type"),
                    format!(
                        "input item type `{other}` is not supported; use `message`, `function_call`, \
                         `function_call_output` or `reasoning`"
                    ),
                ))
            }
        }
    }
    Ok(out)
}

fn reasoning_text(item: &Value) -> String {
    let from = |key: &str| -> Vec<String> {
        item.get(key)
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let content = from("content");
    if content.is_empty() {
        from("summary").join("\n")
    } else {
        content.join("")
    }
}

/// Flat function tools (`{"type":"function","name","description","parameters"}`) in the
/// nested chat form; the nested form is accepted too.
fn convert_tools(tools: &[Value]) -> Result<Vec<Value>, ProtocolError> {
    tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            if t.get("type").and_then(Value::as_str) != Some("function") {
                return Err(ProtocolError::new(
                    format!("tools[{i}].type"),
                    "only `function` tools are supported (built-in tools need a hosted service)",
                ));
            }
            if t.get("function").is_some() {
                return Ok(t.clone());
            }
            let name = t
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| ProtocolError::new(format!("tools[{i}].name"), "a function tool needs a `name`"))?;
            let mut f = Map::new();
            f.insert("name".into(), json!(name));
            for key in ["description", "parameters", "strict"] {
                if let Some(v) = t.get(key) {
                    f.insert(key.into(), v.clone());
                }
            }
            Ok(json!({"type": "function", "function": Value::Object(f)}))
        })
        .collect()
}

fn parse_tool_choice(v: Option<&Value>, tools: Option<&[Value]>) -> Result<ToolChoice, ProtocolError> {
    let has_tools = tools.is_some_and(|t| !t.is_empty());
    let choice = match v {
        None | Some(Value::Null) => return Ok(if has_tools { ToolChoice::Auto } else { ToolChoice::None }),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(ProtocolError::new(
                    "tool_choice",
                    format!("tool_choice must be `auto`, `none`, `required` or {{\"type\": \"function\", \"name\": ...}}, got `{other}`"),
                ))
            }
        },
        Some(Value::Object(o)) => {
            let name = o.get("name").and_then(Value::as_str).ok_or_else(|| {
                ProtocolError::new("tool_choice", "a named tool_choice is {\"type\": \"function\", \"name\": ...}")
            })?;
            if !tools.unwrap_or_default().iter().any(|t| crate::chat::tool_name(t) == Some(name)) {
                return Err(ProtocolError::new("tool_choice", format!("tool_choice names `{name}`, which is not in `tools`")));
            }
            ToolChoice::Named(name.to_string())
        }
        Some(_) => return Err(ProtocolError::new("tool_choice", "tool_choice must be a string or an object")),
    };
    if choice == ToolChoice::Required && !has_tools {
        return Err(ProtocolError::new(
            "tool_choice",
            "tool_choice `required` needs a non-empty `tools` list",
        ));
    }
    Ok(choice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_json;

    fn form(body: &str) -> Result<ResponsesForm, ProtocolError> {
        parse_json::<ResponsesRequest>(body.as_bytes())?.validate()
    }

    #[test]
    fn items_become_chat_messages() {
        let f = form(
            r#"{"input":[{"role":"user","content":"weather?"},
            {"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"hmm"}]},
            {"type":"function_call","call_id":"c1","name":"get","arguments":"{}"},
            {"type":"function_call","call_id":"c2","name":"get","arguments":"{}"},
            {"type":"function_call_output","call_id":"c1","output":"sunny"},
            {"type":"message","role":"user","content":[{"type":"input_text","text":"thanks"}]}],
            "tools":[{"type":"function","name":"get","parameters":{"type":"object"}}]}"#,
        )
        .unwrap();
        let m = &f.input_messages;
        assert_eq!(m.len(), 4);
        assert_eq!(m[1]["reasoning_content"], json!("hmm"));
        assert_eq!(m[1]["tool_calls"].as_array().unwrap().len(), 2);
        assert_eq!(m[2], json!({"role":"tool","tool_call_id":"c1","content":"sunny"}));
        assert_eq!(m[3], json!({"role":"user","content":"thanks"}));
        assert_eq!(f.tool_choice, ToolChoice::Auto);
        assert_eq!(f.tools.unwrap()[0]["function"]["name"], json!("get"));
    }

    #[test]
    fn errors_name_the_field() {
        let p = |b: &str| form(b).unwrap_err().param;
        assert_eq!(p(r#"{}"#).as_deref(), Some("input"));
        assert_eq!(p(r#"{"input":7}"#).as_deref(), Some("input"));
        assert_eq!(
            p(r#"{"input":[{"type":"web_search_call"}]}"#).as_deref(),
            Some("input[0].type")
        );
        assert_eq!(
            p(r#"{"input":"x","tools":[{"type":"web_search"}]}"#).as_deref(),
            Some("tools[0].type")
        );
        assert_eq!(
            p(r#"{"input":"x","tool_choice":"required"}"#).as_deref(),
            Some("tool_choice")
        );
        assert_eq!(
            p(r#"{"input":"x","max_output_tokens":0}"#).as_deref(),
            Some("max_output_tokens")
        );
        assert_eq!(
            p(r#"{"input":"x","max_output_tokens":"a"}"#).as_deref(),
            Some("max_output_tokens")
        );
    }
}
