//! [`Bell`]: a wake-up byte for an event loop that watches a file descriptor, rung from any
//! thread (the Python binding's `Doorbell` is the same for Python code).
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
//! extension module, so never free-threaded), every ring either finds its work read or writes a byte.
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};

/// The wake-up byte's socket pair and whether a byte is pending.
#[derive(Debug)]
pub struct Bell {
    tx: UnixStream,
    rx: UnixStream,
    /// A byte is written and not yet taken: later rings need no other.
    pending: AtomicBool,
}

impl Bell {
    pub fn new() -> std::io::Result<Self> {
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
    pub fn fd(&self) -> i32 {
        self.rx.as_raw_fd()
    }

    /// Wake the loop, unless a byte is already pending.
    pub fn ring(&self) {
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
    pub fn take(&self) {
        let mut buf = [0u8; 256];
        while matches!((&self.rx).read(&mut buf), Ok(n) if n > 0) {}
        self.pending.store(false, Ordering::Release);
    }
}

/// Bytes waiting on the read side (reading them).
#[cfg(test)]
pub(crate) fn pending_bytes(bell: &Bell) -> usize {
    let mut buf = [0u8; 16];
    (&bell.rx).read(&mut buf).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

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
