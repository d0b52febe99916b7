//! Liveness, readiness and the server's lifecycle (serving, draining, stopping).
//!
//! Liveness (`GET /live`) only says the HTTP server answers. Readiness (`GET /health`, the path
//! routers such as SMG probe) also says the server should be sent new requests: it is not
//! draining, and the engine's event loop is turning over. A Python engine's loop can be blocked
//! by one request's synchronous work for seconds; while it is, nothing else progresses, so a
//! router should send the next request elsewhere. The engine side proves it turns over by calling
//! [`Health::beat`] at a steady interval (the Python bridge ticks once a second from its loop);
//! readiness fails when the last beat is older than the configured bound. An engine that never
//! beats is not checked.
//!
//! Draining starts with a graceful shutdown: `/health` answers 503 and new generation requests
//! get 503 with `Retry-After`, while requests already running finish. When the grace period
//! ends, [`Health::force_stop`] tells every running request to end now, with an error that says
//! it was cut off (never a normal finish).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

const SERVING: u8 = 0;
const DRAINING: u8 = 1;

/// Why the server is not ready.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotReady {
    #[error("the server is shutting down and takes no new requests")]
    Draining,
    #[error("the engine's event loop has not turned over for {0:.1} seconds")]
    EngineStalled(f64),
}

impl NotReady {
    /// Short machine-readable status for `/health` bodies.
    pub fn status(&self) -> &'static str {
        match self {
            NotReady::Draining => "draining",
            NotReady::EngineStalled(_) => "engine_stalled",
        }
    }
}

/// Shared lifecycle state (one per server, inside `AppState`).
pub struct Health {
    started: Instant,
    phase: AtomicU8,
    /// Milliseconds since `started` of the engine's last beat, plus one (0: never beat).
    last_beat: AtomicU64,
    stall_after: Duration,
    stop: watch::Sender<bool>,
}

impl Health {
    pub fn new(stall_after: Duration) -> Self {
        Self {
            started: Instant::now(),
            phase: AtomicU8::new(SERVING),
            last_beat: AtomicU64::new(0),
            stall_after,
            stop: watch::channel(false).0,
        }
    }

    /// The engine's loop turned over just now.
    pub fn beat(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_beat.store(ms + 1, Ordering::Relaxed);
    }

    /// Stop taking new generation requests (graceful shutdown begins).
    pub fn drain(&self) {
        self.phase.store(DRAINING, Ordering::Relaxed);
    }

    pub fn draining(&self) -> bool {
        self.phase.load(Ordering::Relaxed) == DRAINING
    }

    /// Ready for new requests, or why not.
    pub fn readiness(&self) -> Result<(), NotReady> {
        if self.draining() {
            return Err(NotReady::Draining);
        }
        let last = self.last_beat.load(Ordering::Relaxed);
        if last > 0 {
            let now = self.started.elapsed().as_millis() as u64;
            let age = Duration::from_millis(now.saturating_sub(last - 1));
            if age > self.stall_after {
                return Err(NotReady::EngineStalled(age.as_secs_f64()));
            }
        }
        Ok(())
    }

    /// End every running request now (the shutdown grace period is over).
    pub fn force_stop(&self) {
        self.stop.send_replace(true);
    }

    /// Resolves once [`Health::force_stop`] was called (at once if it already was).
    pub fn stopped(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.stop.subscribe();
        async move {
            let _ = rx.wait_for(|v| *v).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_follows_beats_and_drain() {
        let h = Health::new(Duration::from_millis(50));
        assert_eq!(h.readiness(), Ok(()), "an engine that never beat is not checked");
        h.beat();
        assert_eq!(h.readiness(), Ok(()));
        std::thread::sleep(Duration::from_millis(80));
        assert!(matches!(h.readiness(), Err(NotReady::EngineStalled(_))));
        h.beat();
        assert_eq!(h.readiness(), Ok(()));
        h.drain();
        assert_eq!(h.readiness(), Err(NotReady::Draining));
    }

    #[tokio::test]
    async fn force_stop_wakes_waiters_before_and_after() {
        let h = Health::new(Duration::from_secs(1));
        let early = h.stopped();
        h.force_stop();
        early.await;
        h.stopped().await;
    }
}
