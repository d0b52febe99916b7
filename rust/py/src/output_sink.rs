//! [`OutputSink`]: where a request's pump task (`smgpy.server`) puts the engine's outputs.
//!
//! `push` converts one output dict (no JSON; see [`crate::engine_output`]) and gives it to the
//! request's [`Outlets`], whose rules (hold a loop turn's burst for one flush, a bounded hold,
//! back-pressure) are documented and tested in [`smgpy_bridge::outlets`]. What is left here is
//! Python's part: the flush is scheduled with the serving loop's `call_soon` ([`FlushList`]), and
//! back-pressure is reported through the bridge's wake-up (`Server.take_work()`'s third list).
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use smgpy_bridge::{Inbox, Next, Outlets, Status};
use smgpy_server::engine::EngineEvent;
use tokio::sync::mpsc;

use crate::engine_bridge::FailKind;
use crate::engine_output::{OutputFields, Seen};

/// Receives one request's outputs from its Python pump task.
///
/// A sink with held outputs is in the loop's [`FlushList`], which holds a reference to it, so
/// outputs pushed just before the pump ends still go out.
#[pyclass(module = "smgpy._native", name = "OutputSink")]
pub struct OutputSink {
    outlets: Outlets<EngineEvent>,
    /// Per choice: what was converted so far (cumulative text to deltas, and the like).
    seen: Vec<Seen>,
    inbox: Arc<Inbox>,
    flushes: Arc<FlushList>,
    rid: String,
}

impl OutputSink {
    pub(crate) fn new(
        txs: Vec<mpsc::Sender<EngineEvent>>,
        inbox: Arc<Inbox>,
        flushes: Arc<FlushList>,
        rid: String,
    ) -> Self {
        Self {
            seen: txs.iter().map(|_| Seen::default()).collect(),
            outlets: Outlets::new(txs),
            inbox,
            flushes,
            rid,
        }
    }

    /// The choice an output belongs to: its `index`, 0 when it has none.
    fn index_of(&self, f: &OutputFields<'_>) -> PyResult<usize> {
        let Some(i) = f.index.as_ref().filter(|i| !i.is_none()) else {
            return Ok(0);
        };
        let i: usize = i.extract()?;
        if i >= self.outlets.choices() {
            return Err(crate::errors::misuse(format!(
                "engine output has index {i}, but the request asked for {} choices",
                self.outlets.choices()
            )));
        }
        Ok(i)
    }
}

#[pymethods]
impl OutputSink {
    /// Forward one engine output dict. Returns 0 (taken), 1 (buffer full: await `wait_for_room`,
    /// then call `flush` until it returns 0) or 2 (the client is gone: stop generating).
    fn push(slf: &Bound<'_, Self>, out: &Bound<'_, PyAny>) -> PyResult<u8> {
        let mut this = slf.borrow_mut();
        this.outlets
            .make_room()
            .map_err(|e| crate::errors::misuse(e.to_string()))?;
        let d = out
            .cast::<PyDict>()
            .map_err(|_| crate::errors::wrong_type("engine outputs must be dicts (see smgpy.engine)"))?;
        let fields = OutputFields::read(d);
        let index = this.index_of(&fields)?;
        let Some(seen) = this.seen.get_mut(index) else {
            return Ok(Status::Taken as u8);
        };
        let o = seen.convert(&fields)?;
        let finishes = o.finish.is_some();
        let sink = &mut *this;
        let bursts = &sink.inbox.bursts;
        let (status, next) = sink
            .outlets
            .push(index, EngineEvent::Output(o), finishes, || bursts.in_burst());
        if next == Next::Nothing {
            return Ok(status as u8);
        }
        let flushes = this.flushes.clone();
        drop(this);
        let scheduled = flushes.add(slf);
        Ok(slf.borrow_mut().outlets.flush_scheduled(scheduled) as u8)
    }

    /// After `push` returned 1 (full): have the server's wake-up report this request's rid in
    /// `Server.take_work()`'s third list once the channel has room (or its reader is gone), so
    /// the pump awaits that instead of polling. A no-op when nothing is waiting to be sent.
    fn wait_for_room(&self) -> PyResult<()> {
        let Some(room) = self.outlets.room() else {
            return Ok(());
        };
        let inbox = self.inbox.clone();
        let rid = self.rid.clone();
        crate::server::runtime()?.spawn(async move {
            room.await;
            inbox.room(rid);
        });
        Ok(())
    }

    /// Hand held outputs over now: 0 when none is left, 1 when a channel is full (await
    /// `wait_for_room`, then flush again), 2 when the client is gone. The pump calls it after a
    /// push returned 1, and once its engine has finished, so the last outputs leave before the
    /// sink is dropped.
    fn flush(&mut self) -> u8 {
        self.outlets.flush() as u8
    }

    /// Report that the engine raised; `kind` says how the client is answered (every choice).
    fn fail(&mut self, kind: PyRef<'_, FailKind>, message: String) -> u8 {
        let e = kind.error(message);
        self.outlets.fail(|| EngineEvent::Error(e.clone())) as u8
    }

    /// Whether the receiving side (every choice's HTTP request) is gone.
    #[getter]
    fn closed(&self) -> bool {
        self.outlets.closed()
    }
}

/// The sinks whose held outputs the loop's next turn hands over, and the loop's `call_soon`
/// that schedules that flush (touched on the loop thread only, GIL held).
#[derive(Default)]
pub struct FlushList {
    dirty: Mutex<Vec<Py<OutputSink>>>,
    /// The serving loop's `call_soon`; without it every push is handed over at once.
    call_soon: OnceLock<Py<PyAny>>,
}

impl FlushList {
    /// Flush on the turns of the loop whose `call_soon` this is (set once).
    pub(crate) fn bind_loop(&self, call_soon: Py<PyAny>) -> bool {
        self.call_soon.set(call_soon).is_ok()
    }

    /// Put `sink` on the list of the next flush, scheduling that flush if it is the first.
    /// Returns false when no flush can be scheduled (no loop bound, or it is closed): the caller
    /// hands its outputs over at once instead.
    fn add(self: &Arc<Self>, sink: &Bound<'_, OutputSink>) -> bool {
        let Some(call_soon) = self.call_soon.get() else {
            return false;
        };
        let py = sink.py();
        let first = match self.dirty.lock() {
            Ok(mut dirty) => {
                dirty.push(sink.clone().unbind());
                dirty.len() == 1
            }
            Err(_) => return false,
        };
        if first && schedule(self, call_soon, py).is_err() {
            // The loop is closed: nothing would run the flush, so hand everything over now.
            self.run(py);
            return false;
        }
        true
    }

    /// Hand every held output over (the scheduled flush, on the loop thread).
    fn run(self: &Arc<Self>, py: Python<'_>) {
        let sinks = match self.dirty.lock() {
            Ok(mut dirty) => std::mem::take(&mut *dirty),
            Err(_) => return,
        };
        let mut busy = Vec::new();
        for sink in sinks {
            match sink.bind(py).try_borrow_mut() {
                Ok(mut s) => s.outlets.run_scheduled_flush(),
                // In use by a call on this thread (flushes run as loop callbacks of their own, so
                // only an engine calling into its sink could do that): the next turn takes it.
                Err(_) => busy.push(sink),
            }
        }
        if busy.is_empty() {
            return;
        }
        if let (Ok(mut dirty), Some(call_soon)) = (self.dirty.lock(), self.call_soon.get()) {
            if dirty.is_empty() {
                let _ = schedule(self, call_soon, py);
            }
            dirty.extend(busy);
        }
    }
}

fn schedule(list: &Arc<FlushList>, call_soon: &Py<PyAny>, py: Python<'_>) -> PyResult<()> {
    let flush = Py::new(py, FlushOutputs(list.clone()))?;
    call_soon.call1(py, (flush,)).map(drop)
}

/// The once-per-turn flush that `loop.call_soon` runs.
#[pyclass(module = "smgpy._native", name = "_FlushOutputs", frozen)]
pub struct FlushOutputs(Arc<FlushList>);

#[pymethods]
impl FlushOutputs {
    fn __call__(&self, py: Python<'_>) {
        self.0.run(py);
    }
}
