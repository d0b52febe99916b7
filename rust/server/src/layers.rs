//! Cross-cutting request layers: HTTP framing checks, API-key auth, CORS and the access log.
//!
//! Auth answers in the error shape of the API the client speaks (Anthropic for `/v1/messages`,
//! OpenAI elsewhere), so SDKs raise their own `AuthenticationError`.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, Version};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::cors::{AllowOrigin, Any, CorsLayer};

use crate::error::ApiError;
use crate::state::AppState;

/// Paths that stay open without a key (load balancers probe them).
const OPEN_PATHS: &[&str] = &["/health", "/live"];

/// Whether `path` belongs to the Anthropic API (its errors use Anthropic's shape).
pub fn is_anthropic(path: &str) -> bool {
    path == "/v1/messages" || path.starts_with("/v1/messages/")
}

/// What RFC 9112 requires of a request that hyper lets through: exactly one `Host` header in
/// HTTP/1.1 (at most one in HTTP/1.0), and no transfer coding but `chunked` (a body in another
/// coding, `gzip, chunked`, cannot be read: 501). Answered in the API's error shape.
pub async fn check_framing(req: Request, next: Next) -> Response {
    let hosts = req.headers().get_all(header::HOST).iter().count();
    let error = if hosts > 1 || (hosts == 0 && req.version() == Version::HTTP_11) {
        Some(ApiError::bad_request(
            None,
            format!(
                "an HTTP/1.1 request carries exactly one Host header (RFC 9112, section 3.2); this one has {hosts}"
            ),
        ))
    } else {
        unsupported_coding(req.headers()).map(|te| {
            ApiError::NotImplemented(format!(
                "transfer coding `{te}` is not supported: send the body with Content-Length, or with \
                 `Transfer-Encoding: chunked` alone"
            ))
        })
    };
    match error {
        None => next.run(req).await,
        Some(e) if is_anthropic(req.uri().path()) => e.into_anthropic(),
        Some(e) => e.into_response(),
    }
}

/// The request's `Transfer-Encoding` when it is anything but `chunked` alone.
fn unsupported_coding(headers: &HeaderMap) -> Option<String> {
    let values: Vec<&HeaderValue> = headers.get_all(header::TRANSFER_ENCODING).iter().collect();
    if values.is_empty() {
        return None;
    }
    let joined = values
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect::<Vec<_>>()
        .join(", ");
    let codings: Vec<&str> = joined.split(',').map(str::trim).filter(|c| !c.is_empty()).collect();
    match codings.as_slice() {
        [only] if only.eq_ignore_ascii_case("chunked") => None,
        _ => Some(crate::logging::escape(&joined).into_owned()),
    }
}

/// Rejects requests without the configured key: `Authorization: Bearer <key>` or `x-api-key`.
pub async fn require_api_key(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(key) = state.config().api_key.as_deref() else {
        return next.run(req).await;
    };
    let path = req.uri().path();
    if req.method() == Method::OPTIONS || OPEN_PATHS.contains(&path) || presented_key_matches(req.headers(), key) {
        return next.run(req).await;
    }
    if is_anthropic(path) {
        ApiError::Unauthorized.into_anthropic()
    } else {
        ApiError::Unauthorized.into_response()
    }
}

fn presented_key_matches(headers: &HeaderMap, key: &str) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme name is case-insensitive (RFC 7235).
            let (scheme, token) = v.trim_start().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(token)
        })
        .map(str::trim);
    let x_api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim);
    // Check both so the time taken does not reveal which header carried a near-miss.
    let a = bearer.is_some_and(|b| constant_time_eq(b.as_bytes(), key.as_bytes()));
    let b = x_api_key.is_some_and(|x| constant_time_eq(x.as_bytes(), key.as_bytes()));
    a | b
}

/// Compares in time that depends only on the lengths, never on where the first mismatch is.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let len = a.len().max(b.len());
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..len {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// CORS for the configured origins (`"*"` allows any); `None` when the list is empty (CORS off).
pub fn cors(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
            .allow_headers(Any)
            .max_age(std::time::Duration::from_secs(600)),
    )
}

/// `tracing` target of the access log (filter it with `smgpy_server::access=info`).
const ACCESS_TARGET: &str = "smgpy_server::access";

/// Token counts a handler attaches to its response (as an extension) for the access log.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokenCounts {
    pub prompt: u32,
    pub completion: u32,
}

/// `resp` with `counts` attached for the access log.
pub fn with_tokens(mut resp: Response, prompt: u32, completion: u32) -> Response {
    resp.extensions_mut().insert(TokenCounts { prompt, completion });
    resp
}

/// One structured line per request: method, path, status, latency and, for non-streaming
/// generations, token counts. For streams the latency is time to the response head; per-token
/// timings are in `/metrics`.
pub async fn access_log(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let started = Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    let tokens = resp.extensions().get::<TokenCounts>().copied();
    match (status >= 500, tokens) {
        (true, Some(t)) => {
            tracing::warn!(target: ACCESS_TARGET, %method, %path, status, latency_ms,
                prompt_tokens = t.prompt, completion_tokens = t.completion, "request")
        }
        (true, None) => tracing::warn!(target: ACCESS_TARGET, %method, %path, status, latency_ms, "request"),
        (false, Some(t)) => {
            tracing::info!(target: ACCESS_TARGET, %method, %path, status, latency_ms,
                prompt_tokens = t.prompt, completion_tokens = t.completion, "request")
        }
        (false, None) => tracing::info!(target: ACCESS_TARGET, %method, %path, status, latency_ms, "request"),
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }

    #[test]
    fn either_header_works() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer k1"));
        assert!(presented_key_matches(&h, "k1"));
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("k1"));
        assert!(presented_key_matches(&h, "k1"));
        assert!(!presented_key_matches(&h, "k2"));
        assert!(!presented_key_matches(&HeaderMap::new(), "k1"));
    }
}
