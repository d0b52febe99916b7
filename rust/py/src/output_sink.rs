//! [`OutputSink`]: where a request's pump task (`smgpy.server`) puts the engine's outputs.
//!
//! `push` converts one output dict (no JSON; see [`crate::engine_output`]) and hands it to the
//! HTTP side's bounded channel for its choice. Handing over can wake a parked HTTP thread, so
//! outputs pushed in a burst (less than [`BURST_GAP`] after the previous push, i.e. in the same
//! turn of the event loop) into a channel its reader has emptied (the reader is asleep) are held
//! until the end of the turn: the first such push schedules one flush (`loop.call_soon`), which
//! hands every held output over at once. A turn that gives 32 streams a token each, the usual
//! pattern of a batching engine, then wakes the HTTP thread once or twice instead of up to 32
//! times (`benches/bridge.py --engine stepped`, one HTTP worker: 0.19-0.23 -> 0.11-0.12 context
//! switches and ~10 % less server CPU per token, measured before the gap rule below, which sends
//! the first output of each step at once again). Outputs go at once otherwise:
//! - into a channel that still holds outputs: its reader is awake or already woken, so that costs
//!   no wake-up, and holding would only delay it;
//! - after a gap: an engine that computes between outputs without returning to the loop (a plain
//!   loop around a model inside its generator) would otherwise see its tokens held until the
//!   loop turns, which it does not while it computes.
use std::collections::VecDeque;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use smgpy_server::engine::EngineEvent;
use tokio::sync::mpsc;

use crate::engine_bridge::{Bridge, FailKind};
use crate::engine_output::{OutputFields, Seen};

/// Outputs a sink keeps between flushes before it hands them over at once: a pump whose engine
/// yields many outputs without awaiting (no turn ends) still streams, and memory stays bounded.
/// Small, because such a pump keeps the HTTP thread busy best with frequent small hand-overs
/// (`benches/bridge.py`: server CPU per token 1.07 us at 16, 1.11 us at 64, 1.19 us at 256).
const KEEP_LIMIT: usize = 16;

/// Pushes closer together than this belong to one burst (one turn of the loop); a push after a
/// longer gap goes out at once. A burst's pushes are microseconds apart; a model step is longer.
const BURST_GAP: std::time::Duration = std::time::Duration::from_micros(500);

/// `push` / `flush` results.
const OK: u8 = 0;
const FULL: u8 = 1;
const CLOSED: u8 = 2;

/// Receives one request's outputs from its Python pump task.
///
/// A sink with kept outputs is in the bridge's flush list, which holds a reference to it, so
/// outputs pushed just before the pump ends still go out.
#[pyclass(module = "smgpy._native", name = "OutputSink")]
pub struct OutputSink {
    /// One per choice; an output goes to the choice its `index` names (0 when absent).
    choices: Vec<ChoiceSink>,
    /// Outputs not handed over yet: `(choice, event)`, oldest first.
    kept: VecDeque<(usize, EngineEvent)>,
    /// In the bridge's flush list (a flush is due).
    queued: bool,
    /// Told when a full channel has room again, so the pump waits without polling.
    bridge: Arc<Bridge>,
    rid: String,
}

struct ChoiceSink {
    tx: mpsc::Sender<EngineEvent>,
    seen: Seen,
    /// The engine sent this choice's finish: nothing is left to stop.
    finished: bool,
}

impl OutputSink {
    pub(crate) fn new(txs: Vec<mpsc::Sender<EngineEvent>>, bridge: Arc<Bridge>, rid: String) -> Self {
        Self {
            choices: txs
                .into_iter()
                .map(|tx| ChoiceSink {
                    tx,
                    seen: Seen::default(),
                    finished: false,
                })
                .collect(),
            kept: VecDeque::new(),
            queued: false,
            bridge,
            rid,
        }
    }

    /// Every reader is gone while the engine still has something to generate. A reader that
    /// took its choice's finish and left at once (on another thread, before `push` returned)
    /// does not count: the engine is done, and aborting it then would be a spurious abort.
    fn all_closed(&self) -> bool {
        self.choices.iter().all(|c| c.tx.is_closed() || c.finished) && !self.choices.iter().all(|c| c.finished)
    }

    /// Move held outputs into their channels, oldest first. A choice whose channel is full keeps
    /// its outputs, in order, without holding back its siblings'. Outputs of a choice whose reader
    /// is gone (its client, or a stop string) are dropped; its siblings may still listen.
    fn hand_over(&mut self) {
        let mut full: Vec<usize> = Vec::new();
        let mut rest = VecDeque::new();
        while let Some((index, ev)) = self.kept.pop_front() {
            if full.contains(&index) {
                rest.push_back((index, ev));
                continue;
            }
            let Some(choice) = self.choices.get(index) else {
                continue;
            };
            match choice.tx.try_send(ev) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
                Err(mpsc::error::TrySendError::Full(ev)) => {
                    full.push(index);
                    rest.push_back((index, ev));
                }
            }
        }
        self.kept = rest;
    }

    /// The result of a push: full once `KEEP_LIMIT` outputs are kept.
    fn state(&self) -> u8 {
        if self.all_closed() {
            CLOSED
        } else if self.kept.len() >= KEEP_LIMIT {
            FULL
        } else {
            OK
        }
    }

    /// The choice an output belongs to: its `index`, 0 when it has none.
    fn index_of(&self, f: &OutputFields<'_>) -> PyResult<usize> {
        let Some(i) = f.index.as_ref().filter(|i| !i.is_none()) else {
            return Ok(0);
        };
        let i: usize = i.extract()?;
        if i >= self.choices.len() {
            return Err(crate::errors::misuse(format!(
                "engine output has index {i}, but the request asked for {} choices",
                self.choices.len()
            )));
        }
        Ok(i)
    }

    /// Send `ev` now if its channel holds earlier outputs (see the module doc). Gives `ev` back
    /// when it should be kept instead.
    fn send_if_awake(&mut self, index: usize, ev: EngineEvent) -> Option<EngineEvent> {
        let choice = self.choices.get(index)?;
        if !self.kept.is_empty() || choice.tx.capacity() == choice.tx.max_capacity() {
            return Some(ev);
        }
        match choice.tx.try_send(ev) {
            Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => None,
            Err(mpsc::error::TrySendError::Full(ev)) => Some(ev),
        }
    }
}

#[pymethods]
impl OutputSink {
    /// Forward one engine output dict. Returns 0 (taken), 1 (buffer full: await `wait_for_room`,
    /// then call `flush` until it returns 0) or 2 (the client is gone: stop generating).
    fn push(slf: &Bound<'_, Self>, out: &Bound<'_, PyAny>) -> PyResult<u8> {
        let mut this = slf.borrow_mut();
        if this.kept.len() >= KEEP_LIMIT {
            this.hand_over();
            if this.kept.len() >= KEEP_LIMIT {
                return Err(crate::errors::misuse(
                    "OutputSink.push called while full: call flush() first",
                ));
            }
        }
        let d = out
            .cast::<PyDict>()
            .map_err(|_| crate::errors::wrong_type("engine outputs must be dicts (see smgpy.engine)"))?;
        let fields = OutputFields::read(d);
        let index = this.index_of(&fields)?;
        let ev = match this.choices.get_mut(index) {
            Some(c) => {
                let o = c.seen.convert(&fields)?;
                c.finished |= o.finish.is_some();
                EngineEvent::Output(o)
            }
            None => return Ok(OK),
        };
        if this.choices.iter().all(|c| c.tx.is_closed()) {
            return Ok(CLOSED);
        }
        let Some(ev) = this.send_if_awake(index, ev) else {
            return Ok(this.state());
        };
        this.kept.push_back((index, ev));
        if !this.bridge.in_burst() {
            // The engine computed since the last output it held: nothing to batch this with.
            this.hand_over();
            return Ok(this.state());
        }
        if this.kept.len() >= KEEP_LIMIT {
            // A pump that has not yielded to the loop for this many outputs: hand them over now.
            this.hand_over();
        } else if !this.queued {
            let bridge = this.bridge.clone();
            drop(this);
            let queued = bridge.queue_flush(slf);
            this = slf.borrow_mut();
            if queued {
                this.queued = true;
            } else {
                this.hand_over();
            }
        }
        Ok(this.state())
    }

    /// After `push` returned 1 (full): have the server's wake-up report this request's rid in
    /// `Server.take_work()`'s third list once the channel has room (or its reader is gone), so
    /// the pump awaits that instead of polling. A no-op when nothing is waiting to be sent.
    fn wait_for_room(&self) -> PyResult<()> {
        let Some((index, _)) = self.kept.front() else {
            return Ok(());
        };
        let Some(choice) = self.choices.get(*index) else {
            return Ok(());
        };
        let tx = choice.tx.clone();
        let bridge = self.bridge.clone();
        let rid = self.rid.clone();
        crate::server::runtime()?.spawn(async move {
            // Permits are free slots; dropping them frees the slots again for the pump's `flush`.
            // Waiting for half the channel, not one slot, lets a pump behind a slow reader refill
            // it in one go instead of waking once per slot the reader frees. An error means the
            // reader is gone, which `flush` then reports.
            drop(tx.reserve_many(tx.max_capacity() / 2).await);
            drop(tx);
            bridge.room(rid);
        });
        Ok(())
    }

    /// Hand kept outputs over now: 0 when none is left, 1 when a channel is full (await
    /// `wait_for_room`, then flush again), 2 when the client is gone. The pump calls it after a
    /// push returned 1, and once its engine has finished, so the last outputs leave before the
    /// sink is dropped.
    fn flush(&mut self) -> u8 {
        self.hand_over();
        if self.all_closed() {
            CLOSED
        } else if self.kept.is_empty() {
            OK
        } else {
            FULL
        }
    }

    /// Report that the engine raised; `kind` says how the client is answered (every choice).
    fn fail(&mut self, kind: PyRef<'_, FailKind>, message: String) -> u8 {
        let e = kind.error(message);
        // Outputs before the failure go first. A full channel drops what does not fit and the
        // error; its stream then ends at the sink's drop, which the request reports as a failure.
        self.hand_over();
        self.kept.clear();
        for c in &self.choices {
            let _ = c.tx.try_send(EngineEvent::Error(e.clone()));
        }
        if self.all_closed() {
            CLOSED
        } else {
            OK
        }
    }

    /// Whether the receiving side (every choice's HTTP request) is gone.
    #[getter]
    fn closed(&self) -> bool {
        self.all_closed()
    }
}

impl Bridge {
    /// Whether this push comes less than [`BURST_GAP`] after the previous one that could be held
    /// (and records it).
    fn in_burst(&self) -> bool {
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let last = self.last_push.swap(now, std::sync::atomic::Ordering::Relaxed);
        last != 0 && now.saturating_sub(last) < BURST_GAP.as_nanos() as u64
    }

    /// Put `sink` on the list of the next flush, scheduling that flush if it is the first.
    /// Returns false when no flush can be scheduled (no loop bound, or it is closed): the caller
    /// hands its outputs over at once instead.
    fn queue_flush(self: &Arc<Self>, sink: &Bound<'_, OutputSink>) -> bool {
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
            self.flush_dirty(py);
            return false;
        }
        true
    }

    /// Hand every kept output over (the scheduled flush, on the loop thread).
    pub(crate) fn flush_dirty(self: &Arc<Self>, py: Python<'_>) {
        let sinks = match self.dirty.lock() {
            Ok(mut dirty) => std::mem::take(&mut *dirty),
            Err(_) => return,
        };
        let mut busy = Vec::new();
        for sink in sinks {
            match sink.bind(py).try_borrow_mut() {
                Ok(mut s) => {
                    s.queued = false;
                    s.hand_over();
                }
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

fn schedule(bridge: &Arc<Bridge>, call_soon: &Py<PyAny>, py: Python<'_>) -> PyResult<()> {
    let flush = Py::new(py, FlushOutputs(bridge.clone()))?;
    call_soon.call1(py, (flush,)).map(drop)
}

/// The once-per-turn flush that `loop.call_soon` runs.
#[pyclass(module = "smgpy._native", name = "_FlushOutputs", frozen)]
pub struct FlushOutputs(Arc<Bridge>);

#[pymethods]
impl FlushOutputs {
    fn __call__(&self, py: Python<'_>) {
        self.0.flush_dirty(py);
    }
}
