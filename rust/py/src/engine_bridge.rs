//! The bridge between the Rust server and a Python engine.
//!
//! Per request, Rust never takes the GIL: `generate` puts the request on a queue and writes one
//! byte to a socket pair that the asyncio loop watches (`loop.add_reader`). The Python side
//! (`smgpy.server`) drains the queue on the loop thread, starts one pump task per request, and
//! the pump pushes each engine output into an [`OutputSink`](crate::output_sink::OutputSink),
//! whose synchronous `push` converts the dict (no JSON) and hands it to a bounded tokio channel,
//! at the latest when the loop's turn ends. Dropping the Rust stream (client gone, stop string
//! matched, shutdown) queues a cancellation the same way; the pump task is cancelled and calls
//! `engine.abort_request(rid)`. A start or cancel writes a wake-up byte only when none is pending,
//! so a burst of requests wakes the loop once.
//!
//! An engine that samples `n` choices from one prefill (`accepts_n`) gets one request with `n`
//! in its sampling parameters; its outputs carry `index`, and the sink sends each to its
//! choice's channel. The request is aborted only when every choice is finished or dropped, and
//! one of them was dropped early: a choice cut by a stop string must not end its siblings.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{intern, IntoPyObjectExt};
use smgpy_server::engine::{
    Abort, EmbedReply, EmbedRequest, Embeddings, EngineError, EngineEvent, EngineStream, GenerateRequest, Tokenizer,
};
use smgpy_server::Engine;
use tokio::sync::mpsc;

use crate::doorbell::Bell;
use crate::output_sink::OutputSink;

/// Outputs buffered per request before the pump is asked to wait (back-pressure).
const CHANNEL_CAPACITY: usize = 1024;

type EmbedSender = tokio::sync::oneshot::Sender<Result<Embeddings, EngineError>>;

struct Pending {
    req: GenerateRequest,
    /// One channel per choice (one unless the engine samples `n` itself).
    txs: Vec<mpsc::Sender<EngineEvent>>,
}

/// Work handed from Rust threads to the asyncio loop.
#[derive(Default)]
struct Queues {
    starts: Vec<Pending>,
    /// Embedding requests and where their answers go (see `take_embeds`).
    embeds: Vec<(EmbedRequest, EmbedSender)>,
    cancels: Vec<String>,
    /// Requests whose full output channel has room again (see `OutputSink.wait_for_room`).
    ready: Vec<String>,
}

/// Shared between the server's engine handle and the Python-facing `Server`.
pub struct Bridge {
    queues: Mutex<Queues>,
    /// Wakes the loop for queued work.
    bell: Bell,
    /// Sinks holding outputs for the next flush (touched on the loop thread only, GIL held).
    pub(crate) dirty: Mutex<Vec<Py<OutputSink>>>,
    /// The serving loop's `call_soon`; without it every push is handed over at once.
    pub(crate) call_soon: OnceLock<Py<PyAny>>,
    /// When the last output was pushed (nanoseconds since `epoch`), to tell a burst of pushes in
    /// one loop turn from pushes an engine spaces out (see `output_sink`).
    pub(crate) last_push: AtomicU64,
    pub(crate) epoch: std::time::Instant,
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
        Ok(Arc::new(Self {
            queues: Mutex::new(Queues::default()),
            bell: Bell::new()?,
            dirty: Mutex::new(Vec::new()),
            call_soon: OnceLock::new(),
            last_push: AtomicU64::new(0),
            epoch: std::time::Instant::now(),
            tokenizer,
            load,
            flush,
            accepts_n,
        }))
    }

    /// Hand outputs over once per turn of the loop whose `call_soon` this is (set once).
    pub fn bind_loop(&self, call_soon: Py<PyAny>) -> bool {
        self.call_soon.set(call_soon).is_ok()
    }

    /// File descriptor the asyncio loop watches.
    pub fn wake_fd(&self) -> i32 {
        self.bell.fd()
    }

    pub(crate) fn wake(&self) {
        self.bell.ring();
    }

    fn cancel(&self, rid: String) {
        if let Ok(mut q) = self.queues.lock() {
            q.cancels.push(rid);
        }
        self.wake();
    }

    pub(crate) fn room(&self, rid: String) {
        if let Ok(mut q) = self.queues.lock() {
            q.ready.push(rid);
        }
        self.wake();
    }

    /// Drain the wake-up bytes and the queues (called on the loop thread).
    fn take(&self) -> Queues {
        // Before the queues are read: work queued before this is in them, later work rings again.
        self.bell.take();
        // Embedding requests stay for `take_embeds`, which the loop calls right after.
        self.queues
            .lock()
            .map(|mut q| Queues {
                starts: std::mem::take(&mut q.starts),
                embeds: Vec::new(),
                cancels: std::mem::take(&mut q.cancels),
                ready: std::mem::take(&mut q.ready),
            })
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

    /// The engine's answer reaches the route through a relay task, which also notices the route
    /// going away (its client hung up) and then cancels the engine's `embed_request`, as a
    /// generation is aborted.
    fn embed(&self, req: EmbedRequest) -> Result<EmbedReply, EngineError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (mut to_route, route) = tokio::sync::oneshot::channel();
        let rid = req.rid.clone();
        self.0
            .queues
            .lock()
            .map_err(|_| EngineError::Internal("engine queue poisoned".into()))?
            .embeds
            .push((req, tx));
        self.0.wake();
        let bridge = self.0.clone();
        tokio::spawn(async move {
            tokio::select! {
                answer = rx => {
                    if let Ok(answer) = answer {
                        let _ = to_route.send(answer);
                    }
                }
                () = to_route.closed() => bridge.cancel(rid),
            }
        });
        Ok(route)
    }

    fn flush_cache(&self) -> Result<bool, EngineError> {
        let Some(f) = self.0.flush.as_ref() else {
            return Ok(false);
        };
        Python::attach(|py| f.call0(py).map(|_| true)).map_err(|e| hidden("the engine's flush_cache failed", &e))
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

/// Take queued embedding requests: `[(rid, fields, sink), ...]`, `fields` being the
/// `EmbeddingReqInput` keyword arguments (`text` or `input_ids`, lists with one item per input).
pub fn take_embeds<'py>(py: Python<'py>, bridge: &Arc<Bridge>) -> PyResult<Bound<'py, PyList>> {
    let embeds = bridge
        .queues
        .lock()
        .map(|mut q| std::mem::take(&mut q.embeds))
        .unwrap_or_default();
    let out = PyList::empty(py);
    for (req, tx) in embeds {
        let fields = PyDict::new(py);
        if let Some(t) = &req.text {
            fields.set_item(intern!(py, "text"), t)?;
        }
        if let Some(ids) = &req.input_ids {
            fields.set_item(intern!(py, "input_ids"), ids)?;
        }
        let sink = Py::new(py, crate::embed_sink::EmbedSink::new(tx))?;
        out.append(PyTuple::new(
            py,
            [
                req.rid.into_bound_py_any(py)?,
                fields.into_any(),
                sink.into_bound(py).into_any(),
            ],
        )?)?;
    }
    Ok(out)
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
    if let Some(k) = &r.prompt_cache_key {
        d.set_item(intern!(py, "prompt_cache_key"), k)?;
    }
    if !r.cache_breakpoints.is_empty() {
        d.set_item(intern!(py, "cache_breakpoints"), &r.cache_breakpoints)?;
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

impl FailKind {
    /// The error the client is answered with.
    pub(crate) fn error(&self, message: String) -> EngineError {
        match self {
            FailKind::BadRequest => EngineError::BadRequest(message),
            FailKind::ContextLength => EngineError::ContextLength(message),
            FailKind::Overloaded => EngineError::Overloaded(message),
            FailKind::Internal => EngineError::Internal(message),
        }
    }
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
        .map_err(|e| hidden("the tokenizer failed to encode this text", &e))
    }

    fn decode(&self, ids: &[i64]) -> Result<String, EngineError> {
        Python::attach(|py| {
            self.0
                .call_method1(py, intern!(py, "decode"), (ids.to_vec(),))?
                .extract::<String>(py)
        })
        .map_err(|e| {
            tracing::warn!(error = %e, "the tokenizer failed to decode token ids");
            EngineError::BadRequest(
                "the tokenizer cannot decode these token ids (the server log has the details)".into(),
            )
        })
    }
}

/// A Python exception from the engine's side, logged in full; the client sees only `what`
/// (exception text can hold paths, tracebacks, anything).
fn hidden(what: &str, e: &PyErr) -> EngineError {
    tracing::error!(error = %e, "{what}");
    EngineError::Internal(format!("{what} (the server log has the details)"))
}
