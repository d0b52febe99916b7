//! Heavy requests off the HTTP worker threads.
//!
//! Parsing a body of megabytes (a million messages), rendering it and dropping it take seconds
//! of CPU; on the thread that also moves every other client's bytes that stalls their streams.
//! A request whose body is large is read on its own connection's task as usual (its bytes only
//! arrive while that task runs), then parsed, rendered and started on a runtime of its own whose
//! threads run at a lower priority (niceness 10 on Linux, where threads have their own): on a
//! machine with few cores they would otherwise take turns with the HTTP worker and the engine
//! as equals, and another client's stream waited while four 31 MB requests were parsed (84-135
//! ms gaps with `block_in_place`, the previous way, on two cores). Small requests, the vast
//! majority, take the usual path at no cost.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use tokio::runtime::{Handle, Runtime, RuntimeFlavor};

use crate::error::ApiError;
use crate::state::AppState;

/// Bodies from this size on are handled off the worker threads.
pub const HEAVY_BODY_BYTES: usize = 1 << 20;

/// Heavy requests handled at once: one less than the machine's cores, at least one (more wait
/// their turn, asynchronously), so a burst of them leaves a core to the streams.
fn heavy_slots() -> &'static tokio::sync::Semaphore {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        tokio::sync::Semaphore::new(cores.saturating_sub(1).max(1))
    })
}

/// Niceness of the heavy-request threads (0 is the default; 19 the lowest priority).
#[cfg(target_os = "linux")]
const HEAVY_NICENESS: i32 = 10;

/// The runtime heavy requests run on (one per process, shared by every server in it); `None`
/// when it cannot be built, and heavy requests then run under `block_in_place`.
fn heavy_runtime() -> Option<&'static Runtime> {
    static RUNTIME: std::sync::OnceLock<Option<Runtime>> = std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(cores.saturating_sub(1).max(1))
                .thread_name("smgpy-heavy")
                .on_thread_start(lower_priority)
                .on_thread_park(on_idle)
                .enable_all()
                .build()
                .map_err(|e| tracing::warn!(error = %e, "no runtime for heavy requests; they share the HTTP workers"))
                .ok()
        })
        .as_ref()
}

/// Run by a heavy-request thread each time it goes idle; see [`set_idle_hook`].
static IDLE_HOOK: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// What a heavy-request thread runs when it goes idle: the embedding crate, which owns the
/// allocator, hands memory the thread freed back to the OS there (a large request frees tens of
/// megabytes, and the thread may then sit idle for hours). Set once, before the first server
/// starts; later calls are ignored.
pub fn set_idle_hook(hook: fn()) {
    let _ = IDLE_HOOK.set(hook);
}

fn on_idle() {
    if let Some(hook) = IDLE_HOOK.get() {
        hook();
    }
}

/// Start the heavy-request runtime (its threads) ahead of the first large request.
pub fn prepare() {
    let _ = heavy_runtime();
}

/// Lower the calling thread's priority (Linux: `setpriority` on a thread id applies to that
/// thread alone). Elsewhere a thread has no niceness of its own, and nothing changes.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), HEAVY_NICENESS) {
        tracing::debug!(error = %e, "could not lower a heavy-request thread's priority");
    }
}

/// See the module docs.
pub async fn offload_heavy(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let cfg = state.config();
    let limit = cfg.max_body_bytes;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let chunked = req.headers().contains_key(header::TRANSFER_ENCODING);
    let maybe_heavy = match declared {
        // Over the limit: the body extractor answers 413 without reading it.
        Some(n) => n >= HEAVY_BODY_BYTES as u64 && n <= limit as u64,
        None => chunked,
    };
    if !maybe_heavy || Handle::current().runtime_flavor() != RuntimeFlavor::MultiThread {
        return next.run(req).await;
    }
    let anthropic = crate::layers::is_anthropic(req.uri().path());
    let shaped = |e: ApiError| {
        if anthropic {
            e.into_anthropic()
        } else {
            e.into_response()
        }
    };
    let (parts, body) = req.into_parts();
    let wait = cfg.body_read_timeout;
    let bytes = match tokio::time::timeout(wait, read_body(body, limit, declared)).await {
        Err(_) => return shaped(ApiError::BodyTimeout(wait.as_secs())),
        Ok(Err(e)) => return shaped(e),
        Ok(Ok(b)) => b,
    };
    let heavy = bytes.len() >= HEAVY_BODY_BYTES;
    let req = Request::from_parts(parts, Body::from(bytes));
    if !heavy {
        return next.run(req).await;
    }
    let Ok(_turn) = heavy_slots().acquire().await else {
        return next.run(req).await; // the semaphore is never closed
    };
    match heavy_runtime() {
        Some(rt) => {
            // A client that hangs up drops this future, and the task goes with it (a
            // non-streaming request would otherwise wait out its whole generation).
            let mut task = AbortOnDrop(rt.spawn(next.run(req)));
            match (&mut task.0).await {
                Ok(response) => response,
                Err(e) => shaped(ApiError::Internal(format!("a heavy request's task failed: {e}"))),
            }
        }
        None => tokio::task::block_in_place(|| Handle::current().block_on(next.run(req))),
    }
}

/// A task that is aborted when its handle is dropped.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The whole body, or a 413 past `limit` bytes.
///
/// Never grown by doubling: the last steps would each copy tens of megabytes into freshly
/// faulted memory in one go on an HTTP worker, and another client's stream paused for 70-100 ms
/// while four 33 MB bodies arrived on two cores (benches/heavy_bodies.py). With a
/// `Content-Length` (at most `limit` here) the buffer is sized up front and filled as bytes
/// arrive; a chunked body's pieces are kept and joined at the end, a slice at a time.
async fn read_body(body: Body, limit: usize, declared: Option<u64>) -> Result<Bytes, ApiError> {
    let mut stream = body.into_data_stream();
    let expected = declared.and_then(|n| usize::try_from(n).ok()).map(|n| n.min(limit));
    let mut buf = BytesMut::with_capacity(expected.unwrap_or(0));
    let mut pieces: Vec<Bytes> = Vec::new();
    let mut total = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(None, format!("cannot read request body: {e}")))?;
        total += chunk.len();
        if total > limit {
            return Err(ApiError::PayloadTooLarge { limit });
        }
        if expected.is_some() {
            buf.extend_from_slice(&chunk);
        } else {
            pieces.push(chunk);
        }
    }
    if expected.is_some() {
        return Ok(buf.freeze());
    }
    if pieces.len() == 1 {
        return Ok(pieces.swap_remove(0));
    }
    Ok(join_yielding(pieces, total).await)
}

/// Bytes copied between yields to the runtime while joining a chunked body.
const JOIN_SLICE_BYTES: usize = 1 << 20;

/// One buffer from `pieces`, copied a slice at a time with a yield between slices, so the
/// worker's other tasks (other clients' streams) run while a large body is joined.
async fn join_yielding(pieces: Vec<Bytes>, total: usize) -> Bytes {
    let mut buf = BytesMut::with_capacity(total);
    let mut since_yield = 0usize;
    for piece in pieces {
        for part in piece.chunks(JOIN_SLICE_BYTES) {
            buf.extend_from_slice(part);
            since_yield += part.len();
            if since_yield >= JOIN_SLICE_BYTES {
                since_yield = 0;
                tokio::task::yield_now().await;
            }
        }
    }
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that arrives in the given pieces, as a chunked upload does.
    fn chunked(pieces: Vec<Vec<u8>>) -> Body {
        Body::from_stream(futures::stream::iter(
            pieces.into_iter().map(|p| Ok::<_, std::io::Error>(Bytes::from(p))),
        ))
    }

    fn pieces(n: usize, size: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| vec![u8::try_from(i % 251).unwrap(); size]).collect()
    }

    #[tokio::test]
    async fn chunked_pieces_are_joined_in_order() {
        let parts = pieces(7, (1 << 20) / 3 + 5);
        let whole: Vec<u8> = parts.concat();
        let got = read_body(chunked(parts), 64 << 20, None).await.unwrap();
        assert_eq!(got.as_ref(), whole.as_slice());
    }

    #[tokio::test]
    async fn declared_length_fills_one_buffer() {
        let parts = pieces(5, 300_000);
        let whole: Vec<u8> = parts.concat();
        let got = read_body(chunked(parts), 64 << 20, Some(whole.len() as u64))
            .await
            .unwrap();
        assert_eq!(got.as_ref(), whole.as_slice());
    }

    #[tokio::test]
    async fn a_length_that_lies_still_reads_what_arrives() {
        // hyper enforces Content-Length on the wire; the buffer size is only a hint here.
        let parts = pieces(3, 1000);
        let whole: Vec<u8> = parts.concat();
        let got = read_body(chunked(parts), 64 << 20, Some(10)).await.unwrap();
        assert_eq!(got.as_ref(), whole.as_slice());
    }

    #[tokio::test]
    async fn past_the_limit_is_413_with_or_without_length() {
        for declared in [None, Some(2_000)] {
            let err = read_body(chunked(pieces(3, 1000)), 2_500, declared).await.unwrap_err();
            assert!(matches!(err, ApiError::PayloadTooLarge { limit: 2_500 }), "{err:?}");
        }
    }

    static IDLE_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn count_idle() {
        IDLE_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    #[tokio::test]
    async fn heavy_threads_run_the_idle_hook_when_they_go_idle() {
        set_idle_hook(count_idle);
        let rt = heavy_runtime().expect("the heavy runtime starts");
        let before = IDLE_RUNS.load(std::sync::atomic::Ordering::Relaxed);
        rt.spawn(async { vec![0u8; 1 << 20].len() }).await.unwrap();
        for _ in 0..100 {
            if IDLE_RUNS.load(std::sync::atomic::Ordering::Relaxed) > before {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("no heavy-request thread ran the idle hook after its task");
    }

    #[tokio::test]
    async fn one_piece_is_returned_without_a_copy() {
        let piece = Bytes::from(vec![7u8; 4096]);
        let ptr = piece.as_ptr();
        let body = Body::from_stream(futures::stream::iter([Ok::<_, std::io::Error>(piece)]));
        let got = read_body(body, 1 << 20, None).await.unwrap();
        assert_eq!(got.as_ptr(), ptr);
    }
}
