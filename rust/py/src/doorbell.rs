//! [`Doorbell`]: [`smgpy_bridge::Bell`] for Python code (`smgpy.mlx.mailbox`): wakes an asyncio
//! loop from another thread without releasing the GIL (the reasons are in the bell's doc).
use pyo3::prelude::*;
use smgpy_bridge::Bell;

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
