//! Accepting connections, with a bound on everything a peer can hold open, and the graceful
//! shutdown sequence.
//!
//! axum's own `serve` has no limit on connections and no time limit on request heads, so a
//! client that opens hundreds of connections and sends a byte a second keeps them all. Here:
//! - at most `max_connections` are open at once (further ones wait in the listen backlog);
//! - a request head must arrive within `header_read_timeout`; the same timer closes a keep-alive
//!   connection that sits idle between requests (hyper starts it whenever it waits for a head);
//! - request bodies have their own limit, enforced where they are read (`extract.rs`).
//!
//! Shutdown: when `shutdown` resolves the server drains. `/health` turns 503 and new generation
//! requests get 503 (see `health.rs`), connections keep being accepted so routers see that
//! answer rather than a refused connection, and running requests finish. Once none is left, or
//! `shutdown_timeout` has passed, the listener closes, each connection finishes its response and
//! closes, and requests still running are ended with an error event (not a normal finish).
//! Connections that still do not close within [`FINAL_WAIT`] are dropped.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::state::AppState;

/// How long connections get to close after running requests were told to stop.
const FINAL_WAIT: Duration = Duration::from_secs(3);
/// How often a draining server checks whether its running requests are done.
const DRAIN_POLL: Duration = Duration::from_millis(50);

/// Serve `state` on `listener` until `shutdown` resolves and the drain described above is done.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // Framing rules apply to requests off the wire (router tests build theirs without a Host).
    let app = crate::router(state.clone()).layer(axum::middleware::from_fn(crate::layers::check_framing));
    let cfg = state.config();
    let permits = Arc::new(Semaphore::new(cfg.max_connections.max(1)));
    let header_timeout = cfg.header_read_timeout;
    let (close_tx, close_rx) = watch::channel(false);
    let mut conns: JoinSet<()> = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut drain_deadline: Option<Instant> = None;
    loop {
        if let Some(deadline) = drain_deadline {
            if state.0.metrics.running.load(Ordering::Relaxed) == 0 || Instant::now() >= deadline {
                break;
            }
        }
        while conns.try_join_next().is_some() {}
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break, // the semaphore is never closed
            },
            () = &mut shutdown, if drain_deadline.is_none() => {
                state.0.health.drain();
                drain_deadline = Some(Instant::now() + cfg.shutdown_timeout);
                continue;
            }
            () = tokio::time::sleep(DRAIN_POLL), if drain_deadline.is_some() => continue,
        };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            () = &mut shutdown, if drain_deadline.is_none() => {
                state.0.health.drain();
                drain_deadline = Some(Instant::now() + cfg.shutdown_timeout);
                continue;
            }
            () = tokio::time::sleep(DRAIN_POLL), if drain_deadline.is_some() => continue,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let mut close = close_rx.clone();
        conns.spawn(async move {
            let _permit = permit;
            let mut builder = http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                }
                () = async { let _ = close.wait_for(|v| *v).await; } => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    drop(listener);
    let _ = close_tx.send(true);
    if state.0.metrics.running.load(Ordering::Relaxed) > 0 {
        tracing::warn!("shutdown grace period over: ending the requests still running");
        state.0.health.force_stop();
    }
    let finished = tokio::time::timeout(FINAL_WAIT, async { while conns.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tracing::warn!(open = conns.len(), "closing connections that did not finish");
        conns.abort_all();
        while conns.join_next().await.is_some() {}
    }
    Ok(())
}
