//! The bridge between the Rust server and a Python engine: [`PyEngine`] is the engine as the
//! server sees it, [`take_work`] / [`take_embeds`] hand the queued work to the serving loop as
//! Python objects.
//!
//! The queues, wake-ups and the group abort of `n` choices live in [`smgpy_bridge`] (no Python,
//! Rust-tested); this module only converts. Per request, Rust never takes the GIL: the request
//! is queued and the loop woken ([`smgpy_bridge::Inbox`]); the Python side (`smgpy.server`) drains
//! the queue on the loop thread, starts one pump task per request, and the pump pushes each
//! engine output into an [`OutputSink`], which converts the dict (no JSON) and hands it over
//! ([`smgpy_bridge::Outlets`]). A queued cancellation makes the pump cancel its task and call
//! `engine.abort_request(rid)`.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use pyo3::{intern, IntoPyObjectExt};
use smgpy_bridge::Inbox;
use smgpy_server::engine::{EmbedReply, EmbedRequest, EngineError, EngineStream, GenerateRequest, Tokenizer};
use smgpy_server::Engine;

use crate::output_sink::{FlushList, OutputSink};

/// Shared between the server's engine handle and the Python-facing `Server`.
pub struct Bridge {
    pub(crate) inbox: Arc<Inbox>,
    /// Sinks holding outputs for the loop turn's flush.
    pub(crate) flushes: Arc<FlushList>,
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
            inbox: Inbox::new()?,
            flushes: Arc::new(FlushList::default()),
            tokenizer,
            load,
            flush,
            accepts_n,
        }))
    }

    /// Hand outputs over once per turn of the loop whose `call_soon` this is (set once).
    pub fn bind_loop(&self, call_soon: Py<PyAny>) -> bool {
        self.flushes.bind_loop(call_soon)
    }

    /// File descriptor the asyncio loop watches.
    pub fn wake_fd(&self) -> i32 {
        self.inbox.wake_fd()
    }

    pub(crate) fn wake(&self) {
        self.inbox.wake();
    }
}

/// The engine as the server sees it.
pub struct PyEngine(pub Arc<Bridge>);

impl Engine for PyEngine {
    fn generate(&self, req: GenerateRequest) -> Result<EngineStream, EngineError> {
        self.0.inbox.generate(req)
    }

    fn generate_n(&self, req: GenerateRequest, n: u32) -> Result<Vec<EngineStream>, EngineError> {
        if n <= 1 || !self.0.accepts_n {
            return smgpy_server::engine::fan_out(self, req, n);
        }
        self.0.inbox.generate_group(req, n)
    }

    fn tokenizer(&self) -> Option<Arc<dyn Tokenizer>> {
        self.0.tokenizer.clone()
    }

    fn embed(&self, req: EmbedRequest) -> Result<EmbedReply, EngineError> {
        self.0.inbox.embed(req)
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
    let q = bridge.inbox.take();
    let starts = PyList::empty(py);
    for p in q.starts {
        let fields = request_fields(py, &p.req)?;
        let sink = Py::new(
            py,
            OutputSink::new(p.txs, bridge.inbox.clone(), bridge.flushes.clone(), p.req.rid.clone()),
        )?;
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
    let embeds = bridge.inbox.take_embeds();
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
    if let Some(g) = &r.grammar {
        d.set_item(intern!(py, "grammar"), crate::structured::PyGrammar::from(g.clone()))?;
    }
    let s = &r.sampling;
    let sp = PyDict::new(py);
    // The optional fields that are set, each under its own name.
    macro_rules! set_some {
        ($($field:ident),*) => {
            $(if let Some(v) = &s.$field {
                sp.set_item(intern!(py, stringify!($field)), v)?;
            })*
        };
    }
    set_some!(
        max_new_tokens,
        min_new_tokens,
        temperature,
        top_p,
        top_k,
        min_p,
        repetition_penalty,
        frequency_penalty,
        presence_penalty,
        ignore_eos,
        seed,
        n,
        num_draft_tokens
    );
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

/// The engine's own Python tokenizer (`encode(text) -> list[int]`, `decode(ids) -> str`) as the
/// server's [`Tokenizer`]; the opposite of [`crate::tokenizer::PyTokenizer`], which is smgpy's Rust
/// tokenizer as a Python object.
pub struct EngineTokenizer(pub Py<PyAny>);

impl Tokenizer for EngineTokenizer {
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
