//! Bodies for the error responses that hyper writes itself.
//!
//! When a request cannot be parsed as HTTP/1 at all (a head with too many or too large header
//! fields: 431; a request target too long: 414; conflicting `Content-Length` headers or another
//! malformed head: 400; an unknown HTTP version: 505), hyper answers on its own, before any
//! service runs, with an empty body, and offers no hook to shape that answer. Clients then get
//! an error without the API's `{"error": {...}}` object. This adapter sits between hyper and the
//! socket and, when the bytes hyper writes are exactly such a head (a status among those four,
//! `content-length: 0`, nothing after the head), writes the same status with a JSON body in
//! OpenAI's shape instead (the request's path was never read, so the route's own shape is
//! unknown). The server's own responses always carry a body with these statuses, so they are
//! never touched; everything else passes through unchanged, vectored writes included.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection's byte stream, with hyper's empty parse-error responses given a body.
#[derive(Debug)]
pub struct WireErrors<S> {
    inner: S,
    /// A replacement response still being written, and how much of it is out.
    pending: Option<(Vec<u8>, usize)>,
}

impl<S> WireErrors<S> {
    pub fn new(inner: S) -> Self {
        Self { inner, pending: None }
    }
}

impl<S: AsyncWrite + Unpin> WireErrors<S> {
    /// Write out what is left of a replacement response.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, at)) = &mut self.pending {
            if *at >= bytes.len() {
                self.pending = None;
                break;
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*at..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *at += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WireErrors<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WireErrors<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_pending(cx))?;
        if let Some(replacement) = with_body(buf) {
            this.pending = Some((replacement, 0));
            // hyper's bytes count as written; ours go out now or on the next flush.
            let _ = this.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.poll_pending(cx))?;
        let mut filled = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(only), None) = (filled.next(), filled.next()) {
            if let Some(replacement) = with_body(only) {
                let n = only.len();
                this.pending = Some((replacement, 0));
                let _ = this.poll_pending(cx)?;
                return Poll::Ready(Ok(n));
            }
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The response to write instead of `head`, when `head` is one of hyper's own empty
/// parse-error responses.
fn with_body(head: &[u8]) -> Option<Vec<u8>> {
    let rest = head
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| head.strip_prefix(b"HTTP/1.0 "))?;
    let status = rest.get(..3)?;
    let (message, code) = match status {
        b"400" => (
            "the request is not valid HTTP/1.1 and could not be read (for example conflicting Content-Length \
             headers, or a malformed header line)",
            "malformed_request",
        ),
        b"414" => (
            "the request target (its URL) is too long: keep paths and query strings short and send data in \
             the body",
            "uri_too_long",
        ),
        b"431" => (
            "the request's header fields are too many or too large: send fewer or shorter headers",
            "request_header_fields_too_large",
        ),
        b"505" => (
            "this HTTP version is not supported: use HTTP/1.1 or HTTP/1.0",
            "http_version_not_supported",
        ),
        _ => return None,
    };
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    if end != head.len() {
        return None; // a body follows: the server's own response
    }
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text[..end - 4].split("\r\n");
    let status_line = lines.next()?;
    let mut empty = false;
    let mut date = None;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            empty = value == "0";
        } else if name.eq_ignore_ascii_case("date") {
            date = Some(value);
        }
    }
    if !empty {
        return None;
    }
    let body = serde_json::json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "param": null,
        "code": code,
    }})
    .to_string();
    let mut out = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if let Some(d) = date {
        out.push_str("date: ");
        out.push_str(d);
        out.push_str("\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    Some(out.into_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn body_of(response: &[u8]) -> serde_json::Value {
        let text = std::str::from_utf8(response).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(len, body.len());
        serde_json::from_str(body).unwrap()
    }

    #[test]
    fn hypers_empty_errors_get_a_json_body() {
        for (status, code) in [
            ("431 Request Header Fields Too Large", "request_header_fields_too_large"),
            ("414 URI Too Long", "uri_too_long"),
            ("400 Bad Request", "malformed_request"),
            ("505 HTTP Version Not Supported", "http_version_not_supported"),
        ] {
            let head = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\ndate: Fri, 27 Nov 2026 10:00:00 GMT\r\n\r\n");
            let out = with_body(head.as_bytes()).unwrap();
            let text = String::from_utf8(out.clone()).unwrap();
            assert!(text.starts_with(&format!("HTTP/1.1 {status}\r\n")), "{text}");
            assert!(text.contains("\r\ndate: Fri, 27 Nov 2026 10:00:00 GMT\r\n"));
            assert!(text.contains("\r\nconnection: close\r\n"));
            assert_eq!(body_of(&out)["error"]["code"], code);
        }
    }

    #[test]
    fn the_servers_own_responses_pass_untouched() {
        let with_a_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}";
        assert!(with_body(with_a_body).is_none());
        let head_only_nonempty = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 57\r\n\r\n";
        assert!(with_body(head_only_nonempty).is_none());
        assert!(with_body(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_none());
        assert!(with_body(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").is_none());
        assert!(with_body(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n").is_none());
    }

    #[tokio::test]
    async fn the_replacement_is_written_through_a_slow_socket() {
        let (a, mut b) = tokio::io::duplex(16); // 16 bytes at a time
        let mut w = WireErrors::new(a);
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        let reader = tokio::spawn(async move {
            let mut out = Vec::new();
            b.read_to_end(&mut out).await.unwrap();
            out
        });
        let n = w.write(head).await.unwrap();
        assert_eq!(n, head.len());
        w.flush().await.unwrap();
        w.shutdown().await.unwrap();
        drop(w);
        let out = reader.await.unwrap();
        assert_eq!(body_of(&out)["error"]["code"], "request_header_fields_too_large");
        // Ordinary bytes pass as they are.
        let (a, mut b) = tokio::io::duplex(64);
        let mut w = WireErrors::new(a);
        w.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await
            .unwrap();
        w.shutdown().await.unwrap();
        drop(w);
        let mut out = Vec::new();
        b.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    }
}
