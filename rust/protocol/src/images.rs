//! Images in requests, in every API's shape, reduced to one list of (where, URL).
//!
//! Each conversion keeps an image as a chat `image_url` part in the message it belongs to (so a
//! vision model's chat template places it) and records where the client put it. The server then
//! either refuses the request with a 400 naming that part (an engine that takes no images), or
//! passes the URLs to the engine in order (`image_data`, as SGLang's `GenerateReqInput` has).

use serde_json::{json, Value};

/// One image of a request: the request field it came from, and its URL (`https://...` or a
/// `data:` URL with the bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    pub param: String,
    pub url: String,
}

/// The 400 an image gets when the engine takes none.
pub fn not_accepted(param: &str) -> crate::ProtocolError {
    crate::ProtocolError::new(
        param,
        "this server's engine does not take images: send text only, or serve a vision model whose engine accepts images",
    )
}

/// A chat `image_url` part for `url`.
pub fn chat_part(url: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": url}})
}

/// The URL of a chat or Responses image part (`image_url` as an object or a string, Responses'
/// `input_image.image_url`), or `None` for other parts.
fn part_url(part: &Value) -> Option<String> {
    match part.get("type").and_then(Value::as_str)? {
        "image_url" => match part.get("image_url")? {
            Value::String(u) => Some(u.clone()),
            v => v.get("url").and_then(Value::as_str).map(str::to_string),
        },
        "input_image" => Some(
            part.get("image_url")
                .and_then(Value::as_str)
                .or_else(|| part.get("file_id").and_then(Value::as_str))
                .unwrap_or_default()
                .to_string(),
        ),
        "image" => Some(anthropic_url(part)),
        _ => None,
    }
}

/// Anthropic's image `source` as a URL (`base64` sources become `data:` URLs).
pub fn anthropic_url(block: &Value) -> String {
    let Some(source) = block.get("source") else {
        return String::new();
    };
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => format!(
            "data:{};base64,{}",
            source.get("media_type").and_then(Value::as_str).unwrap_or("image/png"),
            source.get("data").and_then(Value::as_str).unwrap_or_default()
        ),
        _ => source
            .get("url")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    }
}

/// Every image part of chat `messages` (OpenAI Chat Completions), in order.
pub fn in_chat_messages(messages: &[Value]) -> Vec<ImageRef> {
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if let Some(Value::Array(parts)) = m.get("content") {
            for (j, p) in parts.iter().enumerate() {
                if let Some(url) = part_url(p) {
                    out.push(ImageRef {
                        param: format!("messages[{i}].content[{j}]"),
                        url,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_images_in_every_shape() {
        let messages = vec![
            json!({"role": "system", "content": "s"}),
            json!({"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
                {"type": "input_image", "image_url": "data:image/png;base64,AA"},
            ]}),
        ];
        let found = in_chat_messages(&messages);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].param, "messages[1].content[1]");
        assert_eq!(found[1].url, "data:image/png;base64,AA");
        let block = json!({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QQ"}});
        assert_eq!(anthropic_url(&block), "data:image/jpeg;base64,QQ");
    }
}
