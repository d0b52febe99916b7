//! Layer 2: reshape what real API clients send into what a given template expects, before rendering.
//!
//! The renderer is faithful to transformers; this step is where smgpy, like vLLM, SGLang and SMG, is
//! forgiving. Each rule only rewrites inputs that would otherwise render wrongly or make the template raise:
//!
//! 1. **String tool arguments become objects.** OpenAI clients send `tool_calls[].function.arguments` as a
//!    JSON string; templates that `tojson` or iterate the arguments would double-encode it or fail. When
//!    the template does (see [`TemplateInfo::arguments_as_object`]) and the string parses to a JSON object,
//!    it is replaced by the object. Strings that are not JSON objects are left alone.
//! 2. **Content parts are flattened for string-only templates.** OpenAI `content` arrays
//!    (`[{"type": "text", "text": ...}]`) are joined into one string with `"\n"` between text parts when the
//!    template does not iterate parts ([`TemplateInfo::iterates_content_parts`]); non-text parts are dropped
//!    since such a template cannot show them. Templates that iterate parts keep the list, with Responses-API
//!    `input_text`/`output_text` parts renamed to `text`, and image parts (OpenAI `image_url`, Responses
//!    `input_image`) given transformers' shape `{"type": "image", "image": url}` (their `image_url` kept):
//!    vision models' templates test `type == 'image'` (Gemma 3 and 4 test nothing else), as transformers'
//!    processors and vLLM present images to them.
//! 3. **Tool-call turns get content.** An assistant message with `tool_calls` and no (or `null`) `content`
//!    gets `"content": ""` when the template reads `message.content` unguarded
//!    ([`TemplateInfo::needs_content_on_tool_calls`]).
//! 4. **Flat tools are nested** ([`normalize_tools`]): Responses-API tools
//!    `{"type": "function", "name": ..., "parameters": ...}` become
//!    `{"type": "function", "function": {"name": ..., "description": ..., "parameters": ...}}`.

use crate::inspect::TemplateInfo;
use serde_json::{Map, Value};

/// Apply rules 1-3 to `messages` for a template described by `info`, in place: the caller's
/// conversation is reshaped, not copied (a request's messages can be megabytes).
pub fn normalize_messages(mut messages: Vec<Value>, info: &TemplateInfo) -> Vec<Value> {
    for m in &mut messages {
        normalize_message(m, info);
    }
    messages
}

fn normalize_message(message: &mut Value, info: &TemplateInfo) {
    let Value::Object(map) = message else {
        return;
    };
    if let Some(content) = map.get_mut("content") {
        normalize_content(content, info);
    }
    let has_tool_calls = map
        .get("tool_calls")
        .is_some_and(|t| t.as_array().is_some_and(|a| !a.is_empty()));
    if let Some(Value::Array(calls)) = map.get_mut("tool_calls") {
        if info.arguments_as_object {
            for call in calls.iter_mut() {
                parse_arguments(call);
            }
        }
    }
    let is_assistant = map.get("role").and_then(Value::as_str) == Some("assistant");
    if is_assistant
        && has_tool_calls
        && info.needs_content_on_tool_calls
        && map.get("content").is_none_or(Value::is_null)
    {
        map.insert("content".into(), Value::String(String::new()));
    }
}

/// Rule 2.
fn normalize_content(content: &mut Value, info: &TemplateInfo) {
    let Value::Array(parts) = content else {
        return;
    };
    if info.iterates_content_parts {
        for part in parts.iter_mut() {
            let Value::Object(map) = part else { continue };
            match map.get("type").and_then(Value::as_str) {
                Some("input_text" | "output_text") => {
                    map.insert("type".into(), Value::String("text".into()));
                }
                Some("image_url" | "input_image") => image_part(map),
                _ => {}
            }
        }
        return;
    }
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            Value::String(s) => Some(s.as_str()),
            Value::Object(o) => {
                let kind = o.get("type").and_then(Value::as_str).unwrap_or("text");
                matches!(kind, "text" | "input_text" | "output_text")
                    .then(|| o.get("text").and_then(Value::as_str))
                    .flatten()
            }
            _ => None,
        })
        .collect();
    *content = Value::String(texts.join("\n"));
}

/// Rule 2 for an image part: `type` becomes `image`, its URL is also under `image`.
fn image_part(map: &mut Map<String, Value>) {
    let url = match map.get("image_url") {
        Some(Value::String(u)) => Value::String(u.clone()),
        Some(Value::Object(o)) => o.get("url").cloned().unwrap_or(Value::Null),
        _ => Value::Null,
    };
    if !map.contains_key("image_url") {
        map.insert(
            "image_url".into(),
            Value::Object(Map::from_iter([("url".to_string(), url.clone())])),
        );
    }
    map.insert("type".into(), Value::String("image".into()));
    map.entry("image").or_insert(url);
}

/// Rule 1 for one tool call (`{"function": {"arguments": "..."}}` or a flat `{"arguments": "..."}`).
fn parse_arguments(call: &mut Value) {
    let target = match call.get_mut("function") {
        Some(f @ Value::Object(_)) => f,
        _ => call,
    };
    if let Some(args) = target.get_mut("arguments") {
        if let Value::String(text) = args {
            if let Ok(parsed @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
                *args = parsed;
            }
        }
    }
}

/// Rule 4: nest Responses-API flat function tools; other tools pass through.
pub fn normalize_tools(tools: &[Value]) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let Value::Object(map) = tool else {
                return tool.clone();
            };
            let is_flat_function = map.get("type").and_then(Value::as_str) == Some("function")
                && !map.contains_key("function")
                && map.contains_key("name");
            if !is_flat_function {
                return tool.clone();
            }
            let mut function = Map::new();
            for (k, v) in map {
                if k != "type" {
                    function.insert(k.clone(), v.clone());
                }
            }
            let mut nested = Map::new();
            nested.insert("type".into(), Value::String("function".into()));
            nested.insert("function".into(), Value::Object(function));
            Value::Object(nested)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(parts: bool, content: bool, args: bool) -> TemplateInfo {
        TemplateInfo {
            iterates_content_parts: parts,
            needs_content_on_tool_calls: content,
            arguments_as_object: args,
            mentions_tools: true,
        }
    }

    #[test]
    fn string_arguments_become_objects() {
        let m = [
            json!({"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}),
        ];
        let out = normalize_messages(m.to_vec(), &info(false, false, true));
        assert_eq!(out[0]["tool_calls"][0]["function"]["arguments"], json!({"a": 1}));
        let out = normalize_messages(m.to_vec(), &info(false, false, false));
        assert_eq!(out[0]["tool_calls"][0]["function"]["arguments"], json!("{\"a\": 1}"));
        let bad = [json!({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "not json"}}]})];
        assert_eq!(normalize_messages(bad.to_vec(), &info(false, false, true))[0], bad[0]);
    }

    #[test]
    fn content_parts_flatten_or_stay() {
        let m = [
            json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, {"type": "input_text", "text": "b"}]}),
        ];
        assert_eq!(
            normalize_messages(m.to_vec(), &info(false, false, false))[0]["content"],
            json!("a\nb")
        );
        let kept = normalize_messages(m.to_vec(), &info(true, false, false));
        assert_eq!(kept[0]["content"][2]["type"], json!("text"));
        assert_eq!(kept[0]["content"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn image_parts_take_transformers_shape() {
        let m = [json!({"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,QQ"}},
            {"type": "input_image", "image_url": "https://example.com/a.png"},
        ]})];
        let out = normalize_messages(m.to_vec(), &info(true, false, false));
        assert_eq!(
            out[0]["content"][0],
            json!({"type": "image", "image": "data:image/png;base64,QQ", "image_url": {"url": "data:image/png;base64,QQ"}})
        );
        assert_eq!(out[0]["content"][1]["type"], json!("image"));
        assert_eq!(out[0]["content"][1]["image"], json!("https://example.com/a.png"));
    }

    #[test]
    fn tool_call_turns_get_content() {
        let m = [
            json!({"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}),
        ];
        assert_eq!(
            normalize_messages(m.to_vec(), &info(false, true, false))[0]["content"],
            json!("")
        );
        assert_eq!(
            normalize_messages(m.to_vec(), &info(false, false, false))[0]["content"],
            json!(null)
        );
        let user = [json!({"role": "user"})];
        assert_eq!(normalize_messages(user.to_vec(), &info(false, true, false))[0], user[0]);
    }

    #[test]
    fn flat_tools_are_nested() {
        let t = [
            json!({"type": "function", "name": "f", "description": "d", "parameters": {"type": "object"}}),
            json!({"type": "function", "function": {"name": "g"}}),
        ];
        let out = normalize_tools(&t);
        assert_eq!(
            out[0],
            json!({"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}})
        );
        assert_eq!(out[1], t[1]);
    }
}
