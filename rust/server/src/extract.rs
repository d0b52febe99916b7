//! Body extraction that answers bad bodies in our error shape (axum's default is plain text),
//! within the configured size and time limits.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::state::AppState;

/// `ApiJson<T>`: a JSON body parsed into `T`, errors naming the offending field.
pub struct ApiJson<T>(pub T);

impl<T> FromRequest<AppState> for ApiJson<T>
where
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(ct) = req.headers().get(axum::http::header::CONTENT_TYPE) {
            let ct = ct.to_str().unwrap_or_default().to_ascii_lowercase();
            let essence = ct.split(';').next().unwrap_or_default().trim();
            if essence != "application/json" && !essence.ends_with("+json") {
                return Err(ApiError::UnsupportedMediaType(format!(
                    "request bodies are JSON: send `content-type: application/json` (got `{essence}`)"
                )));
            }
        }
        let cfg = state.config();
        let limit = cfg.max_body_bytes;
        let wait = cfg.body_read_timeout;
        // A declared length over the limit is refused before the body is read, so a client that
        // sent `Expect: 100-continue` gets the 413 instead of a `100 Continue`.
        let declared = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        // A client that sends its head and then trickles (or never finishes) the body would
        // otherwise hold the connection and this task forever.
        let read = tokio::time::timeout(wait, Bytes::from_request(req, state))
            .await
            .map_err(|_| ApiError::BodyTimeout(wait.as_secs()))?;
        let bytes = read.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge { limit }
            } else {
                ApiError::bad_request(None, format!("cannot read request body: {e}"))
            }
        })?;
        Ok(ApiJson(smgpy_protocol::parse_json(&bytes)?))
    }
}

/// An extractor of axum's request parts (path, query) whose rejection is a 400 in our error
/// shape with axum's own text, not axum's plain-text response. One macro, since axum's
/// rejections share `body_text` by convention only, not through a trait.
macro_rules! parts_extractor {
    ($(#[$doc:meta])* $name:ident, $axum:ident, $($bound:tt)+) => {
        $(#[$doc])*
        pub struct $name<T>(pub T);

        impl<T, S> FromRequestParts<S> for $name<T>
        where
            T: $($bound)+,
            S: Send + Sync,
        {
            type Rejection = ApiError;

            async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
                axum::extract::$axum::<T>::from_request_parts(parts, state)
                    .await
                    .map(|x| $name(x.0))
                    .map_err(|e| ApiError::bad_request(None, e.body_text()))
            }
        }
    };
}

parts_extractor!(
    /// `ApiPath<T>`: path parameters; a malformed one (bad percent-encoding, invalid UTF-8) is a
    /// 400 in our error shape.
    ApiPath,
    Path,
    DeserializeOwned + Send
);

parts_extractor!(
    /// `ApiQuery<T>`: the query string; a malformed one is a 400 in our error shape.
    ApiQuery,
    Query,
    DeserializeOwned
);
