//! Body extraction that answers bad bodies in our error shape (axum's default is plain text).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// `ApiJson<T>`: a JSON body parsed into `T`, errors naming the offending field.
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = req.extensions().get::<BodyLimit>().map(|l| l.0).unwrap_or(usize::MAX);
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge { limit }
            } else {
                ApiError::bad_request(None, format!("cannot read request body: {e}"))
            }
        })?;
        Ok(ApiJson(smgpy_protocol::parse_json(&bytes)?))
    }
}

/// The configured body limit, stored as a request extension so rejections can name it.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);
