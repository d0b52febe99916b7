//! Server-sent events with write coalescing.
//!
//! Each event is framed straight into bytes (`data: <json>\n\n`; serde_json never emits a raw
//! newline, so no escaping pass is needed). Every event that is ready when the socket asks for
//! more goes out in one body frame, so a burst of tokens costs one write, not one per token.
//! While the stream is idle (a long prefill), a `: keep-alive` comment is sent every interval.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures::stream::{Stream, StreamExt};
use tokio::time::{Instant, Sleep};

use crate::error::ApiError;

/// Most events put into one body frame.
const MAX_BATCH: usize = 256;

/// `data: <json>\n\n` for a serialisable value (an error event if it cannot be encoded).
pub fn data<T: serde::Serialize>(v: &T) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(b"data: ");
    finish_data(buf, v)
}

/// `event: <name>\ndata: <json>\n\n` (Anthropic and Responses streams name their events).
pub fn named<T: serde::Serialize>(name: &str, v: &T) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(name.as_bytes());
    buf.extend_from_slice(b"\ndata: ");
    finish_data(buf, v)
}

/// `buf` (an event up to its `data: `), then `<json>\n\n`; or, when serde cannot encode `v`,
/// the error event instead (logged: it is a bug).
fn finish_data<T: serde::Serialize>(mut buf: Vec<u8>, v: &T) -> Bytes {
    match serde_json::to_writer(&mut buf, v) {
        Ok(()) => {
            buf.extend_from_slice(b"\n\n");
            Bytes::from(buf)
        }
        Err(e) => {
            let e = ApiError::Internal(format!("cannot encode an event: {e}"));
            tracing::error!(error = %e, "error in stream");
            error(&e)
        }
    }
}

/// `data: [DONE]\n\n`.
pub fn done() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// An OpenAI-shaped error inside an open stream: `data: {"error": {...}}` (logging it is the
/// caller's: [`crate::wire`] logs the server's own errors once, whatever the format).
pub fn error(e: &ApiError) -> Bytes {
    let mut s = String::with_capacity(128);
    s.push_str("data: ");
    s.push_str(&e.openai_body().to_string());
    s.push_str("\n\n");
    Bytes::from(s)
}

/// A streaming response from a stream of framed events.
pub fn response<S>(events: S, keep_alive: Duration) -> Response
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let frames = events.boxed().ready_chunks(MAX_BATCH).map(|batch| {
        if batch.len() == 1 {
            batch.into_iter().next().unwrap_or_default()
        } else {
            let mut buf = Vec::with_capacity(batch.iter().map(Bytes::len).sum());
            for b in &batch {
                buf.extend_from_slice(b);
            }
            Bytes::from(buf)
        }
    });
    let body = KeepAlive::new(frames, keep_alive).map(Ok::<_, std::convert::Infallible>);
    let mut resp = Body::from_stream(body).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// Inserts a comment frame when `inner` sent nothing for a whole `period`.
///
/// The timer is not reset per frame (that would re-register it with the timer wheel, and read the
/// clock, for every token); it fires once per period and only sends a comment if no frame went out
/// since it last fired. So an idle stream gets its first comment between one and two periods after
/// its last frame, and one per period from then on.
struct KeepAlive<S> {
    inner: S,
    period: Duration,
    sleep: Pin<Box<Sleep>>,
    /// A frame went out since the timer last fired.
    active: bool,
}

impl<S> KeepAlive<S> {
    fn new(inner: S, period: Duration) -> Self {
        Self {
            inner,
            period,
            sleep: Box::pin(tokio::time::sleep(period)),
            active: false,
        }
    }
}

impl<S: Stream<Item = Bytes> + Unpin> Stream for KeepAlive<S> {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = &mut *self;
        if let Poll::Ready(item) = this.inner.poll_next_unpin(cx) {
            this.active = true;
            return Poll::Ready(item);
        }
        loop {
            match this.sleep.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) => {
                    this.sleep.as_mut().reset(Instant::now() + this.period);
                    if !std::mem::take(&mut this.active) {
                        return Poll::Ready(Some(Bytes::from_static(b": keep-alive\n\n")));
                    }
                    // Traffic since the last tick: poll the new deadline, which registers the waker.
                }
            }
        }
    }
}
