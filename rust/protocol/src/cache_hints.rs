//! Client prompt-cache hints: OpenAI's `prompt_cache_key` and Anthropic's `cache_control`
//! breakpoints.
//!
//! Both say "this prefix will come back": a key names a conversation to keep, a breakpoint marks
//! the end of a prefix to keep (a system prompt, a tool list, a turn). The server turns
//! breakpoints into prompt token positions; an engine that caches prefixes keeps those entries
//! ahead of plain ones and, for models whose state cannot be cut back, snapshots the state there.

use serde_json::Value;

use crate::error::ProtocolError;

/// Longest `prompt_cache_key` accepted. OpenAI documents no limit; keys are identifiers
/// (a user or session id), and the bound keeps a client from sending megabytes through it.
pub const MAX_KEY_BYTES: usize = 1024;

/// Anthropic allows at most four `cache_control` breakpoints per request.
pub const MAX_BREAKPOINTS: usize = 4;

/// Check a `prompt_cache_key`.
pub fn check_key(key: Option<&str>) -> Result<(), ProtocolError> {
    match key {
        Some(k) if k.len() > MAX_KEY_BYTES => Err(ProtocolError::new(
            "prompt_cache_key",
            format!(
                "prompt_cache_key must be at most {MAX_KEY_BYTES} bytes, got {}",
                k.len()
            ),
        )),
        _ => Ok(()),
    }
}

/// Whether an Anthropic block (a content block, a system block or a tool) carries a
/// `cache_control` breakpoint. Only `{"type": "ephemeral", ...}` exists; anything else is an
/// error naming the field.
pub fn has_breakpoint(block: &Value, at: &str) -> Result<bool, ProtocolError> {
    match block.get("cache_control") {
        None | Some(Value::Null) => Ok(false),
        Some(c) if c.get("type").and_then(Value::as_str) == Some("ephemeral") => Ok(true),
        Some(_) => Err(ProtocolError::new(
            format!("{at}.cache_control"),
            "cache_control must be {\"type\": \"ephemeral\"} (optionally with a `ttl`)",
        )),
    }
}

/// Whether any block of a content array (or of `system`) carries a breakpoint.
pub fn any_breakpoint(content: Option<&Value>, at: &str) -> Result<bool, ProtocolError> {
    let Some(Value::Array(blocks)) = content else {
        return Ok(false);
    };
    let mut found = false;
    for (i, b) in blocks.iter().enumerate() {
        found |= has_breakpoint(b, &format!("{at}[{i}]"))?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_bounded() {
        assert!(check_key(None).is_ok());
        assert!(check_key(Some("session-1")).is_ok());
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        let e = check_key(Some(&long)).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("prompt_cache_key"));
    }

    #[test]
    fn breakpoints_are_found_and_checked() {
        let blocks = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}]);
        assert!(any_breakpoint(Some(&blocks), "system").unwrap());
        assert!(!any_breakpoint(Some(&json!("plain text")), "system").unwrap());
        let bad = json!([{"type": "text", "text": "a", "cache_control": {"type": "forever"}}]);
        let e = any_breakpoint(Some(&bad), "messages[0].content").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[0].content[0].cache_control"));
    }
}
