//! The bridge between the Rust server and a Python engine.
//!
//! Per request, Rust never takes the GIL: `generate` puts the request on a queue and writes one
//! byte to a socket pair that the asyncio loop watches (`loop.add_reader`). The Python side
//! (`smgpy.server`) drains the queue on the loop thread, starts one pump task per request, and
//! the pump pushes each engine output into an [`OutputSink`], whose synchronous `push` converts
//! the dict (no JSON) and hands it to a bounded tokio channel. Dropping the Rust stream (client
//! gone, stop string matched, shutdown) queues a cancellation the same way; the pump task is
//! cancelled and calls `engine.abort_request(rid)`.
//!
//! An engine that samples `n` choices from one prefill (`accepts_n`) gets one request with `n`
//! in its sampling parameters; its outputs carry `index`, and the sink sends each to its
//! choice's channel. The request is aborted only when every choice is finished or dropped, and
//! one of them was dropped early: a choice cut by a stop string must not end its siblings.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{intern, IntoPyObjectExt};
use smgpy_server::engine::{
    Abort, EngineError, EngineEvent, EngineFinish, EngineOutput, EngineStream, GenerateRequest, MatchedBy,
    TokenLogprobs, Tokenizer,
};
use smgpy_server::Engine;
use tokio::sync::mpsc;

/// Outputs buffered per request before the pump is asked to wait (back-pressure).
const CHANNEL_CAPACITY: usize = 1024;

struct Pending {
    req: GenerateRequest,
    /// One channel per choice (one unless the engine samples `n` itself).
    txs: Vec<mpsc::Sender<EngineEvent>>,
}

/// Work handed from Rust threads to the asyncio loop.
#[derive(Default)]
struct Queues {
    starts: Vec<Pending>,
    cancels: Vec<String>,
    /// Requests whose full output channel has room again (see `OutputSink.wait_for_room`).
    ready: Vec<String>,
}

/// Shared between the server's engine handle and the Python-facing `Server`.
pub struct Bridge {
    queues: Mutex<Queues>,
    wake_tx: UnixStream,
    wake_rx: UnixStream,
    tokenizer: Option<Arc<dyn Tokenizer>>,
    load: Option<Py<PyAny>>,
    flush: Option<Py<PyAny>>,
    /// The engine samples `n` choices of one request itself (one prefill).
    accepts_n: bool,
}

impl Bridge {
    pub fn new(
        tokenizer: Option<Arc<dyn Tokenizer>>,
        load: Option<Py<PyAny>>,
        flush: Option<Py<PyAny>>,
        accepts_n: bool,
    ) -> std::io::Result<Arc<Self>> {
        let (wake_tx, wake_rx) = UnixStream::pair()?;
        wake_tx.set_nonblocking(true)?;
        wake_rx.set_nonblocking(true)?;
        Ok(Arc::new(Self {
            queues: Mutex::new(Queues::default()),
            wake_tx,
            wake_rx,
            tokenizer,
            load,
            flush,
            accepts_n,
        }))
    }

    /// File descriptor the asyncio loop watches.
    pub fn wake_fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.wake_rx.as_raw_fd()
    }

    pub(crate) fn wake(&self) {
        // A full socket buffer means a wake-up is already pending: nothing is lost.
        let _ = (&self.wake_tx).write(&[1]);
    }

    fn cancel(&self, rid: String) {
        if let Ok(mut q) = self.queues.lock() {
            q.cancels.push(rid);
        }
        self.wake();
    }

    fn room(&self, rid: String) {
        if let Ok(mut q) = self.queues.lock() {
            q.ready.push(rid);
        }
        self.wake();
    }

    /// Drain the wake-up bytes and the queues (called on the loop thread).
    fn take(&self) -> Queues {
        let mut buf = [0u8; 256];
        while matches!((&self.wake_rx).read(&mut buf), Ok(n) if n > 0) {}
        self.queues
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }
}

/// The engine as the server sees it.
pub struct PyEngine(pub Arc<Bridge>);

struct CancelOnDrop {
    bridge: Arc<Bridge>,
    rid: String,
}

impl Abort for CancelOnDrop {
    fn abort(self: Box<Self>) {
        self.bridge.cancel(self.rid);
    }
}

/// One choice of a request whose `n` choices are one engine request: the engine request is
/// cancelled when the last choice goes, if any choice went before it finished.
struct ChoiceOfGroup(Arc<Group>);

struct Group {
    bridge: Arc<Bridge>,
    rid: String,
    live: AtomicUsize,
    aborted: AtomicBool,
}

impl Abort for ChoiceOfGroup {
    fn abort(self: Box<Self>) {
        self.0.aborted.store(true, Ordering::Release);
    }
}

impl Drop for ChoiceOfGroup {
    fn drop(&mut self) {
        if self.0.live.fetch_sub(1, Ordering::AcqRel) == 1 && self.0.aborted.load(Ordering::Acquire) {
            self.0.bridge.cancel(self.0.rid.clone());
        }
    }
}

impl PyEngine {
    fn start(&self, req: GenerateRequest, txs: Vec<mpsc::Sender<EngineEvent>>) -> Result<(), EngineError> {
        self.0
            .queues
            .lock()
            .map_err(|_| EngineError::Internal("engine queue poisoned".into()))?
            .starts
            .push(Pending { req, txs });
        self.0.wake();
        Ok(())
    }
}

impl Engine for PyEngine {
    fn generate(&self, req: GenerateRequest) -> Result<EngineStream, EngineError> {
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        let rid = req.rid.clone();
        self.start(req, vec![tx])?;
        Ok(EngineStream::new(
            rx,
            Box::new(CancelOnDrop {
                bridge: self.0.clone(),
                rid,
            }),
        ))
    }

    fn generate_n(&self, req: GenerateRequest, n: u32) -> Result<Vec<EngineStream>, EngineError> {
        if n <= 1 || !self.0.accepts_n {
            return smgpy_server::engine::fan_out(self, req, n);
        }
        let group = Arc::new(Group {
            bridge: self.0.clone(),
            rid: req.rid.clone(),
            live: AtomicUsize::new(n as usize),
            aborted: AtomicBool::new(false),
        });
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| mpsc::channel(CHANNEL_CAPACITY)).unzip();
        let streams = rxs
            .into_iter()
            .map(|rx| EngineStream::new(rx, Box::new(ChoiceOfGroup(group.clone()))))
            .collect();
        self.start(req, txs)?;
        Ok(streams)
    }

    fn tokenizer(&self) -> Option<Arc<dyn Tokenizer>> {
        self.0.tokenizer.clone()
    }

    fn flush_cache(&self) -> Result<bool, EngineError> {
        let Some(f) = self.0.flush.as_ref() else {
            return Ok(false);
        };
        Python::attach(|py| f.call0(py).map(|_| true))
            .map_err(|e| EngineError::Internal(format!("the engine's flush_cache failed: {e}")))
    }

    fn load(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        let f = self.0.load.as_ref()?;
        Python::attach(|py| {
            let v = f.call0(py).ok()?;
            match crate::convert::py_to_value(v.bind(py)).ok()? {
                serde_json::Value::Object(m) => Some(m),
                _ => None,
            }
        })
    }
}

/// Take queued starts, cancellations and wake-ups for full sinks:
/// `([(rid, fields, sink), ...], [rid, ...], [rid, ...])`.
#[allow(clippy::type_complexity)]
pub fn take_work<'py>(
    py: Python<'py>,
    bridge: &Arc<Bridge>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, Bound<'py, PyList>)> {
    let q = bridge.take();
    let starts = PyList::empty(py);
    for p in q.starts {
        let fields = request_fields(py, &p.req)?;
        let sink = Py::new(py, OutputSink::new(p.txs, bridge.clone(), p.req.rid.clone()))?;
        starts.append(PyTuple::new(
            py,
            [
                p.req.rid.into_bound_py_any(py)?,
                fields.into_any(),
                sink.into_bound(py).into_any(),
            ],
        )?)?;
    }
    let cancels = PyList::new(py, q.cancels)?;
    let ready = PyList::new(py, q.ready)?;
    Ok((starts, cancels, ready))
}

/// The `GenerateReqInput` fields of a request, as keyword arguments.
fn request_fields<'py>(py: Python<'py>, r: &GenerateRequest) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    if let Some(t) = &r.text {
        d.set_item(intern!(py, "text"), t)?;
    }
    if let Some(ids) = &r.input_ids {
        d.set_item(intern!(py, "input_ids"), ids)?;
    }
    if !r.image_data.is_empty() {
        d.set_item(intern!(py, "image_data"), &r.image_data)?;
    }
    let s = &r.sampling;
    let sp = PyDict::new(py);
    macro_rules! opt {
        ($k:literal, $v:expr) => {
            if let Some(v) = &$v {
                sp.set_item(intern!(py, $k), v)?;
            }
        };
    }
    opt!("max_new_tokens", s.max_new_tokens);
    opt!("min_new_tokens", s.min_new_tokens);
    opt!("temperature", s.temperature);
    opt!("top_p", s.top_p);
    opt!("top_k", s.top_k);
    opt!("min_p", s.min_p);
    opt!("repetition_penalty", s.repetition_penalty);
    opt!("frequency_penalty", s.frequency_penalty);
    opt!("presence_penalty", s.presence_penalty);
    opt!("ignore_eos", s.ignore_eos);
    opt!("seed", s.seed);
    opt!("n", s.n);
    if !s.stop.is_empty() {
        sp.set_item(intern!(py, "stop"), &s.stop)?;
    }
    if !s.stop_token_ids.is_empty() {
        sp.set_item(intern!(py, "stop_token_ids"), &s.stop_token_ids)?;
    }
    if let Some(b) = &s.logit_bias {
        sp.set_item(
            intern!(py, "logit_bias"),
            crate::convert::value_to_py(py, &serde_json::Value::Object(b.clone()))?,
        )?;
    }
    if let Some(c) = &s.structured {
        // SGLang's keys: `json_schema` (JSON text), `regex`, `ebnf`, `structural_tag`.
        let (key, text) = c.constraint.engine_param();
        sp.set_item(key, text)?;
    }
    if let Some(j) = &s.response_format {
        sp.set_item(intern!(py, "response_format"), crate::convert::value_to_py(py, j)?)?;
    }
    d.set_item(intern!(py, "sampling_params"), sp)?;
    d.set_item(intern!(py, "stream"), r.stream)?;
    d.set_item(intern!(py, "return_logprob"), r.return_logprob)?;
    d.set_item(intern!(py, "top_logprobs_num"), r.top_logprobs_num)?;
    Ok(d)
}

/// Why an engine request failed, as the pump reports it (`OutputSink.fail`): one variant per
/// answer the client gets, so no string is parsed on the way.
#[pyclass(module = "smgpy._native", name = "FailKind", eq, eq_int, frozen)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailKind {
    /// `EngineRequestError`: 400 with the message.
    #[pyo3(name = "BAD_REQUEST")]
    BadRequest,
    /// `ContextLengthExceeded`: 400 with `code: context_length_exceeded`.
    #[pyo3(name = "CONTEXT_LENGTH")]
    ContextLength,
    /// `EngineOverloaded`: 429 with `Retry-After`.
    #[pyo3(name = "OVERLOADED")]
    Overloaded,
    /// Anything else: 500 with the (safe) message.
    #[pyo3(name = "INTERNAL")]
    Internal,
}

/// Receives one request's outputs from its Python pump task.
#[pyclass(module = "smgpy._native", name = "OutputSink")]
pub struct OutputSink {
    /// One per choice; an output goes to the choice its `index` names (0 when absent).
    choices: Vec<ChoiceSink>,
    /// An output that did not fit in its choice's channel; the pump retries with `flush`.
    stash: Option<(usize, EngineEvent)>,
    /// Told when a full channel has room again, so the pump waits without polling.
    bridge: Arc<Bridge>,
    rid: String,
}

struct ChoiceSink {
    tx: mpsc::Sender<EngineEvent>,
    /// Bytes of cumulative text already forwarded (engines that yield `text`).
    seen_text: usize,
    /// Token ids already forwarded (engines that yield cumulative `output_ids`).
    seen_ids: usize,
}

/// `push` / `flush` results.
const OK: u8 = 0;
const FULL: u8 = 1;
const CLOSED: u8 = 2;

impl OutputSink {
    fn new(txs: Vec<mpsc::Sender<EngineEvent>>, bridge: Arc<Bridge>, rid: String) -> Self {
        Self {
            choices: txs
                .into_iter()
                .map(|tx| ChoiceSink {
                    tx,
                    seen_text: 0,
                    seen_ids: 0,
                })
                .collect(),
            stash: None,
            bridge,
            rid,
        }
    }

    fn all_closed(&self) -> bool {
        self.choices.iter().all(|c| c.tx.is_closed())
    }

    fn send(&mut self, index: usize, ev: EngineEvent) -> u8 {
        let Some(choice) = self.choices.get(index) else {
            return OK;
        };
        match choice.tx.try_send(ev) {
            Ok(()) => OK,
            Err(mpsc::error::TrySendError::Full(ev)) => {
                self.stash = Some((index, ev));
                FULL
            }
            // This choice is gone (its client, or a stop string); its siblings may still listen.
            Err(mpsc::error::TrySendError::Closed(_)) if self.all_closed() => CLOSED,
            Err(mpsc::error::TrySendError::Closed(_)) => OK,
        }
    }

    /// The choice an output belongs to: its `index`, 0 when it has none.
    fn index_of(&self, d: &Bound<'_, PyDict>) -> PyResult<usize> {
        let Some(i) = d.get_item(intern!(d.py(), "index"))?.filter(|i| !i.is_none()) else {
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
}

#[pymethods]
impl OutputSink {
    /// Forward one engine output dict. Returns 0 (sent), 1 (buffer full: await a little and call
    /// `flush` until it returns 0) or 2 (the client is gone: stop generating).
    fn push(&mut self, out: &Bound<'_, PyAny>) -> PyResult<u8> {
        if self.stash.is_some() {
            return Err(crate::errors::misuse(
                "OutputSink.push called while full: call flush() first",
            ));
        }
        let d = out
            .cast::<PyDict>()
            .map_err(|_| crate::errors::wrong_type("engine outputs must be dicts (see smgpy.engine)"))?;
        let index = self.index_of(d)?;
        let ev = match self.choices.get_mut(index) {
            Some(c) => EngineEvent::Output(c.convert(d)?),
            None => return Ok(OK),
        };
        Ok(self.send(index, ev))
    }

    /// After `push` returned 1 (full): have the server's wake-up report this request's rid in
    /// `Server.take_work()`'s third list once the channel has room (or its reader is gone), so
    /// the pump awaits that instead of polling. A no-op when nothing is waiting to be sent.
    fn wait_for_room(&self) -> PyResult<()> {
        let Some((index, _)) = &self.stash else {
            return Ok(());
        };
        let Some(choice) = self.choices.get(*index) else {
            return Ok(());
        };
        let tx = choice.tx.clone();
        let bridge = self.bridge.clone();
        let rid = self.rid.clone();
        crate::server::runtime()?.spawn(async move {
            // A permit is a free slot; dropping it frees the slot again for the pump's `flush`.
            // An error means the reader is gone, which `flush` then reports.
            drop(tx.reserve().await);
            drop(tx);
            bridge.room(rid);
        });
        Ok(())
    }

    /// Retry the output that did not fit; same return codes as `push`.
    fn flush(&mut self) -> u8 {
        match self.stash.take() {
            None => OK,
            Some((index, ev)) => self.send(index, ev),
        }
    }

    /// Report that the engine raised; `kind` says how the client is answered (every choice).
    fn fail(&mut self, kind: PyRef<'_, FailKind>, message: String) -> u8 {
        let e = match *kind {
            FailKind::BadRequest => EngineError::BadRequest(message),
            FailKind::ContextLength => EngineError::ContextLength(message),
            FailKind::Overloaded => EngineError::Overloaded(message),
            FailKind::Internal => EngineError::Internal(message),
        };
        self.stash = None;
        // A full channel drops the error; its stream then ends at the sink's drop, which the
        // request reports as a failure too.
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

impl ChoiceSink {
    fn convert(&mut self, d: &Bound<'_, PyDict>) -> PyResult<EngineOutput> {
        let py = d.py();
        let mut o = EngineOutput::default();
        let delta_mode;
        if let Some(delta) = d.get_item(intern!(py, "delta"))? {
            delta_mode = true;
            if !delta.is_none() {
                o.text_delta = delta.extract()?;
            }
        } else {
            delta_mode = false;
            if let Some(text) = d.get_item(intern!(py, "text"))? {
                if !text.is_none() {
                    let s: pyo3::pybacked::PyBackedStr = text.extract()?;
                    o.text_delta = new_suffix(&s, &mut self.seen_text).to_string();
                }
            }
        }
        if let Some(ids) = d.get_item(intern!(py, "output_ids"))? {
            if !ids.is_none() {
                let ids: Vec<i64> = ids.extract()?;
                if delta_mode {
                    o.token_ids = ids;
                } else {
                    o.token_ids = ids.get(self.seen_ids..).map(<[i64]>::to_vec).unwrap_or_default();
                    self.seen_ids = self.seen_ids.max(ids.len());
                }
            }
        }
        if let Some(meta) = d.get_item(intern!(py, "meta_info"))? {
            if let Ok(meta) = meta.cast::<PyDict>() {
                self.convert_meta(meta, &mut o, delta_mode)?;
            }
        }
        Ok(o)
    }

    fn convert_meta(&mut self, meta: &Bound<'_, PyDict>, o: &mut EngineOutput, delta_mode: bool) -> PyResult<()> {
        let py = meta.py();
        let get_u32 = |k: &Bound<'_, pyo3::types::PyString>| -> PyResult<Option<u32>> {
            match meta.get_item(k)? {
                Some(v) if !v.is_none() => Ok(Some(v.extract()?)),
                _ => Ok(None),
            }
        };
        o.prompt_tokens = get_u32(intern!(py, "prompt_tokens"))?;
        o.completion_tokens = get_u32(intern!(py, "completion_tokens"))?;
        o.cached_tokens = get_u32(intern!(py, "cached_tokens"))?;
        if let Some(f) = meta.get_item(intern!(py, "finish_reason"))? {
            o.finish = finish_of(&f)?;
        }
        if let Some(lp) = meta.get_item(intern!(py, "output_token_logprobs"))? {
            if !lp.is_none() {
                let tops = meta.get_item(intern!(py, "output_top_logprobs"))?;
                o.logprobs = logprobs_of(&lp, tops.as_ref(), delta_mode, o.token_ids.len())?;
            }
        }
        Ok(())
    }
}

/// The part of cumulative `text` not forwarded yet (tolerates an engine that re-decoded the tail).
fn new_suffix<'a>(text: &'a str, seen: &mut usize) -> &'a str {
    let start = if text.is_char_boundary(*seen) && *seen <= text.len() {
        *seen
    } else {
        text.len()
    };
    *seen = text.len().max(*seen);
    &text[start..]
}

fn finish_of(f: &Bound<'_, PyAny>) -> PyResult<Option<EngineFinish>> {
    if f.is_none() {
        return Ok(None);
    }
    let py = f.py();
    let (kind, matched, message): (String, Option<Bound<'_, PyAny>>, Option<String>) = if let Ok(d) = f.cast::<PyDict>()
    {
        let kind = d
            .get_item(intern!(py, "type"))?
            .map(|k| k.extract::<String>())
            .transpose()?
            .unwrap_or_default();
        let matched = d.get_item(intern!(py, "matched"))?.filter(|m| !m.is_none());
        let message = d
            .get_item(intern!(py, "message"))?
            .filter(|m| !m.is_none())
            .map(|m| m.str().map(|s| s.to_string()))
            .transpose()?;
        (kind, matched, message)
    } else {
        (f.extract::<String>()?, None, None)
    };
    let matched = match matched {
        None => None,
        Some(m) => match m.extract::<i64>() {
            Ok(t) => Some(MatchedBy::Token(t)),
            Err(_) => Some(MatchedBy::Text(m.str()?.to_string())),
        },
    };
    Ok(Some(match kind.as_str() {
        "length" => EngineFinish::Length,
        "abort" => EngineFinish::Abort { message },
        _ => EngineFinish::Stop { matched },
    }))
}

fn logprobs_of(
    lp: &Bound<'_, PyAny>,
    tops: Option<&Bound<'_, PyAny>>,
    delta_mode: bool,
    new_tokens: usize,
) -> PyResult<Vec<TokenLogprobs>> {
    type Entry = (f64, i64, Option<String>);
    let all: Vec<Entry> = lp.extract()?;
    let tops: Vec<Option<Vec<Entry>>> = match tops {
        Some(t) if !t.is_none() => t.extract()?,
        _ => Vec::new(),
    };
    let skip = if delta_mode {
        0
    } else {
        all.len().saturating_sub(new_tokens)
    };
    Ok(all
        .into_iter()
        .enumerate()
        .skip(skip)
        .map(|(i, (logprob, token_id, token))| TokenLogprobs {
            token_id,
            token,
            logprob: logprob as f32,
            top: tops
                .get(i)
                .cloned()
                .flatten()
                .unwrap_or_default()
                .into_iter()
                .map(|(l, id, t)| (id, t, l as f32))
                .collect(),
        })
        .collect())
}

/// A Python tokenizer (`encode(text) -> list[int]`, `decode(ids) -> str`).
pub struct PyTokenizer(pub Py<PyAny>);

impl Tokenizer for PyTokenizer {
    fn encode(&self, text: &str) -> Result<Vec<i64>, EngineError> {
        Python::attach(|py| {
            self.0
                .call_method1(py, intern!(py, "encode"), (text,))?
                .extract::<Vec<i64>>(py)
        })
        .map_err(|e| EngineError::Internal(format!("tokenizer.encode failed: {e}")))
    }

    fn decode(&self, ids: &[i64]) -> Result<String, EngineError> {
        Python::attach(|py| {
            self.0
                .call_method1(py, intern!(py, "decode"), (ids.to_vec(),))?
                .extract::<String>(py)
        })
        .map_err(|e| EngineError::BadRequest(format!("cannot decode these token ids: {e}")))
    }
}
