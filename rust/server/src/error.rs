//! The one place where failures become HTTP responses, in the API's own error shape.
//! Internal errors are logged and shown to the client only as a short message, never a trace.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use smgpy_protocol::ErrorCode;
use smgpy_protocol::ProtocolError;

use crate::engine::EngineError;
use crate::routes::response_store::{HistoryError, StoreError};

/// An error answered to a client.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest {
        message: String,
        param: Option<String>,
        code: Option<ErrorCode>,
    },
    #[error("invalid or missing API key: send `Authorization: Bearer <key>` (or `x-api-key: <key>`)")]
    Unauthorized,
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// A part of HTTP the server does not implement (a transfer coding other than chunked): 501.
    #[error("{0}")]
    NotImplemented(String),
    #[error("request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// The engine's queue is full: 429 with `Retry-After`, so clients and routers retry later
    /// or elsewhere (SMG retries a 429 on another worker without counting it as a failure).
    #[error("{0}")]
    Overloaded(String),
    /// The server cannot take or finish this request now (draining, engine stopped it): 503.
    #[error("{0}")]
    Unavailable(String),
    #[error("request timed out after {0} seconds")]
    Timeout(u64),
    #[error("the request body did not arrive within {0} seconds")]
    BodyTimeout(u64),
    /// The engine failed on this request; the message is the engine side's, made safe to show
    /// (no exception text; the server log has the details).
    #[error("{0}")]
    EngineFailed(String),
    /// A failure inside the server. Logged with its detail; the client sees a generic message.
    #[error("internal server error (the server log has the details)")]
    Internal(String),
}

impl ApiError {
    pub fn bad_request(param: Option<&str>, message: impl Into<String>) -> Self {
        Self::BadRequest {
            message: message.into(),
            param: param.map(str::to_string),
            code: None,
        }
    }

    /// The error for an engine's abort that carries a 4xx status (SGLang's `FINISH_ABORT` with
    /// `status_code`: it refused the request itself), its message shown to the client (at most
    /// 2,000 characters): 404 and 429 as themselves, any other 4xx as 400; `None` for any other
    /// status, which stays the engine's failure (503).
    pub fn refused_by_engine(status: u16, message: &str) -> Option<Self> {
        const MAX_CHARS: usize = 2000;
        let message: String = message.chars().take(MAX_CHARS).collect();
        match status {
            404 => Some(Self::NotFound(message)),
            429 => Some(Self::Overloaded(message)),
            400..=499 => Some(Self::bad_request(None, message)),
            _ => None,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Overloaded(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::EngineFailed(_) | ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// OpenAI `error.type`.
    pub fn openai_type(&self) -> &'static str {
        match self {
            ApiError::BadRequest { .. }
            | ApiError::PayloadTooLarge { .. }
            | ApiError::MethodNotAllowed(_)
            | ApiError::UnsupportedMediaType(_)
            | ApiError::NotImplemented(_) => "invalid_request_error",
            ApiError::Unauthorized => "authentication_error",
            ApiError::NotFound(_) => "not_found_error",
            ApiError::Overloaded(_) => "overloaded_error",
            ApiError::Unavailable(_) => "service_unavailable_error",
            ApiError::Timeout(_) | ApiError::BodyTimeout(_) => "timeout_error",
            ApiError::EngineFailed(_) | ApiError::Internal(_) => "server_error",
        }
    }

    /// Anthropic `error.type`.
    pub fn anthropic_type(&self) -> &'static str {
        match self {
            ApiError::BadRequest { .. }
            | ApiError::MethodNotAllowed(_)
            | ApiError::UnsupportedMediaType(_)
            | ApiError::NotImplemented(_) => "invalid_request_error",
            ApiError::Unauthorized => "authentication_error",
            ApiError::NotFound(_) => "not_found_error",
            ApiError::PayloadTooLarge { .. } => "request_too_large",
            ApiError::Overloaded(_) => "rate_limit_error",
            ApiError::Unavailable(_) => "overloaded_error",
            ApiError::Timeout(_) | ApiError::BodyTimeout(_) => "timeout_error",
            ApiError::EngineFailed(_) | ApiError::Internal(_) => "api_error",
        }
    }

    /// `{"error": {"message", "type", "param", "code"}}`.
    pub fn openai_body(&self) -> serde_json::Value {
        let (param, code) = match self {
            ApiError::BadRequest { param, code, .. } => (param.clone(), *code),
            ApiError::PayloadTooLarge { .. } => (None, Some(ErrorCode::RequestTooLarge)),
            _ => (None, None),
        };
        json!({"error": {"message": self.to_string(), "type": self.openai_type(), "param": param, "code": code}})
    }

    /// `{"type": "error", "error": {"type", "message"}}`. Anthropic's shape has no `param`, so the
    /// place in the request a bad request names leads the message.
    pub fn anthropic_body(&self) -> serde_json::Value {
        let message = match self {
            // A nested location (`messages[0].content[1]`) only; a template's own message stays verbatim.
            ApiError::BadRequest { param: Some(p), .. } if p.contains(['[', '.']) => format!("{p}: {self}"),
            _ => self.to_string(),
        };
        json!({"type": "error", "error": {"type": self.anthropic_type(), "message": message}})
    }

    fn finish(&self, body: serde_json::Value) -> Response {
        if let ApiError::Internal(m) = self {
            tracing::error!(error = %m, "internal error");
        }
        let mut resp = (self.status(), axum::Json(body)).into_response();
        if matches!(self, ApiError::Overloaded(_) | ApiError::Unavailable(_)) {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if matches!(self, ApiError::Unauthorized) {
            // RFC 7235: a 401 names the scheme the client should use.
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }

    /// Render in Anthropic's shape (for `/v1/messages`).
    pub fn into_anthropic(self) -> Response {
        let body = self.anthropic_body();
        self.finish(body)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.openai_body();
        self.finish(body)
    }
}

impl From<ProtocolError> for ApiError {
    fn from(e: ProtocolError) -> Self {
        ApiError::BadRequest {
            message: e.message,
            param: e.param,
            code: e.code,
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::BadRequest(m) => ApiError::BadRequest {
                message: m,
                param: None,
                code: None,
            },
            EngineError::ContextLength(m) => ApiError::BadRequest {
                message: m,
                param: None,
                code: Some(ErrorCode::ContextLengthExceeded),
            },
            EngineError::Overloaded(m) => ApiError::Overloaded(m),
            EngineError::Internal(m) => ApiError::EngineFailed(m),
        }
    }
}

impl From<HistoryError> for ApiError {
    fn from(e: HistoryError) -> Self {
        match e {
            HistoryError::NotFound(_) => ApiError::NotFound(e.to_string()),
            HistoryError::Broken(..) => ApiError::bad_request(Some("previous_response_id"), e.to_string()),
            HistoryError::Store(e) => e.into(),
        }
    }
}

/// A store that fails while serving is the server's problem, not the client's.
impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

/// An error in Anthropic's shape, for handlers of `/v1/messages`.
#[derive(Debug)]
pub struct AnthropicError(pub ApiError);

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        self.0.into_anthropic()
    }
}

impl<E: Into<ApiError>> From<E> for AnthropicError {
    fn from(e: E) -> Self {
        AnthropicError(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_refusal_keeps_its_client_status_and_message() {
        let refused = ApiError::refused_by_engine(400, "the input is longer than 8192 tokens").unwrap();
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        assert_eq!(refused.to_string(), "the input is longer than 8192 tokens");
        assert_eq!(
            ApiError::refused_by_engine(429, "busy").unwrap().status(),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(
            ApiError::refused_by_engine(404, "no such adapter").unwrap().status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            ApiError::refused_by_engine(422, "x").unwrap().status(),
            StatusCode::BAD_REQUEST
        );
        assert!(ApiError::refused_by_engine(500, "a CUDA error").is_none());
        assert!(ApiError::refused_by_engine(302, "moved").is_none());
        let long = "é".repeat(5000);
        assert_eq!(
            ApiError::refused_by_engine(400, &long)
                .unwrap()
                .to_string()
                .chars()
                .count(),
            2000
        );
    }
}
