//! llama.cpp's generic tool-call format: the whole reply is one JSON object, either calls
//! (`{"tool_call": {"name": .., "arguments": ..}}`, `{"tool_calls": [..]}`) or an answer
//! (`{"response": "text"}`, whose text is the normal text).
use super::body::{calls_from_values, Call};
use serde_json::Value;

/// The calls, or the answer's text, of a generic reply; `None` when it is not one.
pub(crate) fn read(text: &str) -> Option<(Vec<Call>, String)> {
    let Value::Object(obj) = serde_json::from_str::<Value>(text.trim()).ok()? else {
        return None;
    };
    if let Some(call) = obj.get("tool_call") {
        return Some((calls_from_values(std::slice::from_ref(call))?, String::new()));
    }
    if let Some(calls) = obj.get("tool_calls") {
        return Some((calls_from_values(std::slice::from_ref(calls))?, String::new()));
    }
    match obj.get("response")? {
        Value::String(s) => Some((Vec::new(), s.clone())),
        other => Some((Vec::new(), other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes() {
        // Shapes from llama.cpp tests/test-chat.cpp (COMMON_CHAT_FORMAT_GENERIC).
        let (c, t) = read(r#"{"tool_call": {"name": "special_function", "arguments": {"arg1": 1}}}"#).unwrap();
        assert_eq!(
            (c[0].name.as_str(), c[0].arguments.as_str(), t.as_str()),
            ("special_function", r#"{"arg1":1}"#, "")
        );
        let (c, _) = read(r#"{"tool_calls": [{"name": "a", "arguments": {}, "id": "123456789"}]}"#).unwrap();
        assert_eq!(c[0].id.as_deref(), Some("123456789"));
        let (c, t) = read(r#"{"response": "Hello, world!\nWhat's up?"}"#).unwrap();
        assert!(c.is_empty());
        assert_eq!(t, "Hello, world!\nWhat's up?");
        assert!(read(r#"{"other": 1}"#).is_none());
    }
}
