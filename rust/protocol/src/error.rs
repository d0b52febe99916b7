//! Validation errors: each names the offending field (`param`) so the HTTP layer can answer in
//! the API's own error shape.

use serde::de::DeserializeOwned;

/// The machine-readable `code` of an error answer, as OpenAI's clients match on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The body is not one JSON document.
    InvalidJson,
    /// The body is JSON, but a field has the wrong type or is missing.
    InvalidRequest,
    /// The prompt (plus `max_tokens`) does not fit the model's context.
    ContextLengthExceeded,
    /// The body is over the server's limit.
    RequestTooLarge,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidJson => "invalid_json",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::ContextLengthExceeded => "context_length_exceeded",
            ErrorCode::RequestTooLarge => "request_too_large",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A request the client must fix.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{message}")]
pub struct ProtocolError {
    /// Human-readable reason, naming the field and what is expected.
    pub message: String,
    /// The offending field as a path (`messages[1].role`), when known.
    pub param: Option<String>,
    /// Machine-readable code, when there is one.
    pub code: Option<ErrorCode>,
}

impl ProtocolError {
    pub fn new(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            param: Some(param.into()),
            code: None,
        }
    }
}

/// Parse a JSON body into `T`, reporting the path of the first bad field.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ProtocolError> {
    let de = &mut serde_json::Deserializer::from_slice(body);
    let value = parse_value(de)?;
    // One JSON document and nothing after it (whitespace aside): bytes after the value usually
    // mean two bodies were concatenated, and reading only the first would hide that.
    de.end().map_err(|_| ProtocolError {
        message: "request body has data after the JSON value: send exactly one JSON document".into(),
        param: None,
        code: Some(ErrorCode::InvalidJson),
    })?;
    Ok(value)
}

fn parse_value<'de, T: DeserializeOwned>(
    de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'de>>,
) -> Result<T, ProtocolError> {
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let code = match inner.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => ErrorCode::InvalidJson,
            _ => ErrorCode::InvalidRequest,
        };
        let param = if path == "." || code == ErrorCode::InvalidJson {
            None
        } else {
            Some(path.clone())
        };
        let msg = inner.to_string();
        // serde's message ends with " at line L column C", useful for syntax errors only.
        let message = match (&param, code) {
            (_, ErrorCode::InvalidJson) => format!("request body is not valid JSON: {msg}"),
            (Some(p), _) => format!("invalid value for `{p}`: {}", strip_position(&msg)),
            (None, _) => format!("invalid request: {}", strip_position(&msg)),
        };
        ProtocolError {
            message,
            param,
            code: Some(code),
        }
    })
}

fn strip_position(msg: &str) -> &str {
    match msg.rfind(" at line ") {
        Some(i) => &msg[..i],
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct T {
        a: Vec<Inner>,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn path_of_bad_field() {
        let e = parse_json::<T>(br#"{"a":[{"n":1},{"n":"x"}]}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("a[1].n"));
        assert!(e.message.contains("a[1].n"), "{}", e.message);
        let e = parse_json::<T>(b"{not json").unwrap_err();
        assert_eq!(e.code, Some(ErrorCode::InvalidJson));
        let e = parse_json::<T>(b"{}").unwrap_err();
        assert!(e.message.contains("missing field `a`"), "{}", e.message);
    }
}
