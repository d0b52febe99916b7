//! Accepting connections, with a bound on everything a peer can hold open, and the graceful
//! shutdown sequence.
//!
//! axum's own `serve` has no limit on connections and no time limit on request heads, so a
//! client that opens hundreds of connections and sends a byte a second keeps them all. Here:
//! - at most `max_connections` are open at once (further ones wait in the listen backlog), and
//!   at most `max_connections_per_client` from one address (further ones are closed at once);
//! - a request head must arrive within `header_read_timeout`; the same timer closes a keep-alive
//!   connection that sits idle between requests (hyper starts it whenever it waits for a head);
//!   under pressure (three quarters of the slots taken) a new connection gets at most
//!   [`PRESSED_HEADER_TIMEOUT`] for its first head, so half-sent requests give their slots back;
//! - request bodies have their own limit, enforced where they are read (`extract.rs`).
//!
//! Shutdown: when `shutdown` resolves the server drains. `/health` turns 503 and new generation
//! requests get 503 (see `health.rs`), connections keep being accepted so routers see that
//! answer rather than a refused connection, and running requests finish. Once none is left, or
//! `shutdown_timeout` has passed, the listener closes, each connection finishes its response and
//! closes, and requests still running are ended with an error event (not a normal finish).
//! Connections that still do not close within [`FINAL_WAIT`] are dropped.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::state::AppState;

/// A request head's time limit while most connection slots are taken.
const PRESSED_HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// Open connections per client address.
type PerClient = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// One connection's place in its address's count, given back on drop.
struct ClientSlot {
    counts: PerClient,
    ip: IpAddr,
}

impl ClientSlot {
    /// A slot for `ip`, or `None` when it already holds `limit` connections.
    fn take(counts: &PerClient, ip: IpAddr, limit: usize) -> Option<Self> {
        let mut map = counts.lock().ok()?;
        let n = map.entry(ip).or_insert(0);
        if *n >= limit {
            return None;
        }
        *n += 1;
        Some(Self {
            counts: counts.clone(),
            ip,
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        if let Ok(mut map) = self.counts.lock() {
            if let Some(n) = map.get_mut(&self.ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    map.remove(&self.ip);
                }
            }
        }
    }
}

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
    // Its threads start now rather than under the first large request.
    crate::offload::prepare();
    let cfg = state.config();
    let slots = cfg.max_connections.max(1);
    let permits = Arc::new(Semaphore::new(slots));
    let per_client: PerClient = Arc::default();
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
        let (stream, peer) = match accepted {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(client_slot) = ClientSlot::take(&per_client, peer.ip(), cfg.max_connections_per_client.max(1)) else {
            tracing::debug!(peer = %peer.ip(), "connection closed: this address holds its limit of connections");
            continue; // dropping the stream closes it
        };
        // Three quarters of the slots taken: a half-sent request head gets its slot back sooner.
        let pressed = (slots - permits.available_permits()) * 4 >= slots * 3;
        let header_timeout = if pressed {
            header_timeout.min(PRESSED_HEADER_TIMEOUT)
        } else {
            header_timeout
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let mut close = close_rx.clone();
        conns.spawn(async move {
            let _permit = permit;
            let _client_slot = client_slot;
            let mut builder = http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(header_timeout);
            let conn = builder.serve_connection(TokioIo::new(crate::wire_errors::WireErrors::new(stream)), service);
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
