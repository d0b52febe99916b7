//! [`Bell`]: a wake-up byte for an asyncio loop that watches a file descriptor, rung from any
//! thread; [`Doorbell`] is the same for Python code.
//!
//! A ring writes one byte unless one is already pending, so a burst of work wakes the loop once.
//! Ringing keeps the GIL. `loop.call_soon_threadsafe` writes its byte with the GIL released, so
//! the loop thread it wakes takes the GIL and runs its whole turn while the ringer waits to get
//! it back. The MLX thread rang after every decode step and waited out the loop's turn before it
//! could queue the next step: 170-180 us per step at one client on the tiny model of
//! `benches/mlx_tiny.py`. Holding the GIL, the ringer goes on at once; the loop runs when the
//! ringer next releases the GIL (MLX does while it waits for the model), when the model's work
//! and the loop's overlap.
//!
//! `pending` is cleared before the reader reads the queued work, and set before a writer's byte:
//! with the work behind a lock (the server's bridge) or the GIL (`smgpy.mlx.mailbox`, an abi3
//! extension, so never free-threaded), every ring either finds its work read or writes a byte.
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::prelude::*;

/// The wake-up byte's socket pair and whether a byte is pending.
pub(crate) struct Bell {
    tx: UnixStream,
    rx: UnixStream,
    /// A byte is written and not yet taken: later rings need no other.
    pending: AtomicBool,
}

impl Bell {
    pub(crate) fn new() -> std::io::Result<Self> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(Self {
            tx,
            rx,
            pending: AtomicBool::new(false),
        })
    }

    /// The descriptor the loop watches (readable once rung).
    pub(crate) fn fd(&self) -> i32 {
        self.rx.as_raw_fd()
    }

    /// Wake the loop, unless a byte is already pending.
    pub(crate) fn ring(&self) {
        // Work queued before this call is seen by the reader after its `take`, so a byte already
        // pending covers it. A full socket buffer likewise means one is pending.
        if !self.pending.swap(true, Ordering::AcqRel) {
            match (&self.tx).write(&[1]) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                // No byte went out: the next ring must try again.
                Err(_) => self.pending.store(false, Ordering::Release),
            }
        }
    }

    /// Drain the pending bytes, on the loop thread, before reading the work they announce: work
    /// queued before this returns is read after it, work queued later rings again.
    pub(crate) fn take(&self) {
        let mut buf = [0u8; 256];
        while matches!((&self.rx).read(&mut buf), Ok(n) if n > 0) {}
        self.pending.store(false, Ordering::Release);
    }
}

/// Wakes an asyncio loop from another thread without releasing the GIL (see the module doc).
///
/// The loop watches `fileno()` (`loop.add_reader`); a producer queues its work, then calls
/// `ring()`; the reader calls `take()` first, then reads the queued work.
#[pyclass(module = "smgpy._native", name = "Doorbell", frozen)]
pub struct Doorbell(Bell);

#[pymethods]
impl Doorbell {
    #[new]
    fn new() -> PyResult<Self> {
        Ok(Self(Bell::new()?))
    }

    /// The file descriptor to watch; readable once rung.
    fn fileno(&self) -> i32 {
        self.0.fd()
    }

    /// Wake the watcher, unless a wake-up is already pending. Keeps the GIL.
    fn ring(&self) {
        self.0.ring();
    }

    /// Clear the wake-up (the watcher, before it reads the work it announces).
    fn take(&self) {
        self.0.take();
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Doorbell>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes waiting on the read side (reading them).
    fn pending_bytes(bell: &Bell) -> usize {
        let mut buf = [0u8; 16];
        (&bell.rx).read(&mut buf).unwrap_or(0)
    }

    #[test]
    fn rings_once_until_taken() {
        let bell = Bell::new().expect("socket pair");
        bell.ring();
        bell.ring();
        assert_eq!(pending_bytes(&bell), 1, "a second ring before take writes nothing");
        bell.ring();
        assert_eq!(pending_bytes(&bell), 0, "still pending until taken");
        bell.take();
        bell.ring();
        assert_eq!(pending_bytes(&bell), 1, "after take, a ring writes again");
        bell.take();
        assert_eq!(pending_bytes(&bell), 0);
    }
}
