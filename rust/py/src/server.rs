//! `smgpy._native.Server`: configuration, binding, serving on the tokio runtime, shutdown.
//! The Python side (`smgpy.server`) drives it from its asyncio loop.

use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use smgpy_parsers::{ReasoningFormat, ToolFormat};
use smgpy_server::{AppState, ServerConfig};
use tokio::sync::watch;

use crate::engine_bridge::{take_embeds, take_work, Bridge, EngineTokenizer, PyEngine};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Server>()?;
    m.add_class::<crate::output_sink::OutputSink>()?;
    m.add_class::<crate::engine_bridge::FailKind>()?;
    m.add_function(wrap_pyfunction!(init_logging, m)?)?;
    m.add_function(wrap_pyfunction!(server_defaults, m)?)?;
    Ok(())
}

/// The server's defaults, `ServerConfig::default()` in Python's units (seconds, bytes, `None`):
/// the one set that `smgpy.ServerOptions`, `serve_oai` and `smgpy serve` all start from, so
/// they cannot drift apart. `Server(...)` itself has no defaults for these.
#[pyfunction]
fn server_defaults(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = ServerConfig::default();
    let secs = |t: Duration| t.as_secs_f64();
    let out = PyDict::new(py);
    out.set_item("max_body_bytes", d.max_body_bytes)?;
    out.set_item("request_timeout", d.request_timeout.map(secs))?;
    out.set_item("keep_alive", secs(d.keep_alive))?;
    out.set_item("shutdown_timeout", secs(d.shutdown_timeout))?;
    out.set_item("header_read_timeout", secs(d.header_read_timeout))?;
    out.set_item("body_read_timeout", secs(d.body_read_timeout))?;
    out.set_item("max_connections", d.max_connections)?;
    out.set_item("max_connections_per_client", d.max_connections_per_client)?;
    out.set_item("engine_stall_timeout", secs(d.engine_stall_timeout))?;
    out.set_item("response_store_bytes", d.response_store_bytes)?;
    out.set_item("response_store_ttl", d.response_store_ttl.map(secs))?;
    out.set_item("default_max_tokens", d.default_max_tokens)?;
    Ok(out)
}

/// Route Rust `tracing` logs (access log, errors) to stderr at `level` (`error` .. `trace`).
/// Only the first call takes effect.
#[pyfunction]
#[pyo3(signature = (level = "info"))]
fn init_logging(level: &str) -> PyResult<()> {
    // Python's logging spells it `warning`; tracing's filter wants `warn`.
    let level = match level.to_ascii_lowercase().as_str() {
        "warning" => "warn".to_string(),
        "critical" => "error".to_string(),
        other => other.to_string(),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(format!("warn,smgpy_server={level},smgpy_py={level}"))
        .map_err(|e| crate::errors::invalid(format!("invalid log level `{level}`: {e}")))?;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(|| EscapingStderr)
        .with_ansi(false)
        .try_init();
    Ok(())
}

/// Standard error, with each log event's control characters escaped (its own final line break
/// excepted): a request field holding `\n` cannot start a forged log line. tracing's formatter
/// writes one event per `write`.
struct EscapingStderr;

impl std::io::Write for EscapingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr()
            .lock()
            .write_all(smgpy_server::logging::escape_event(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The tokio runtime every server of this process runs on, with the HTTP worker thread count
/// it was started with.
static RUNTIME: std::sync::OnceLock<(tokio::runtime::Runtime, usize)> = std::sync::OnceLock::new();

/// The process's HTTP runtime, started with `threads` workers on first use. A later server that
/// asks for another count shares the running one (a warning says so).
pub(crate) fn runtime_with(threads: usize) -> PyResult<&'static tokio::runtime::Runtime> {
    if let Some((rt, running)) = RUNTIME.get() {
        if *running != threads {
            tracing::warn!(
                requested = threads,
                running,
                "the HTTP runtime is already running; this server shares its worker threads"
            );
        }
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .thread_name("smgpy-http")
        .on_thread_park(crate::release_idle_memory)
        .enable_all()
        .build()
        .map_err(|e| crate::errors::os(format!("cannot start the HTTP runtime: {e}")))?;
    Ok(&RUNTIME.get_or_init(|| (rt, threads.max(1))).0)
}

/// The process's HTTP runtime (a server has started it; otherwise it starts with one worker).
pub(crate) fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    match RUNTIME.get() {
        Some((rt, _)) => Ok(rt),
        None => runtime_with(1),
    }
}

/// An HTTP server bound to one engine.
#[pyclass(module = "smgpy._native", name = "Server")]
pub struct Server {
    bridge: Arc<Bridge>,
    config: Option<ServerConfig>,
    bind: String,
    address: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    done: watch::Receiver<bool>,
    done_tx: Option<watch::Sender<bool>>,
    /// The running server's lifecycle state (set by `start`), for `heartbeat`.
    health: Option<Arc<smgpy_server::health::Health>>,
    /// Names of the parsers in effect, kept when `start` takes the configuration.
    parser_names: (Option<&'static str>, Option<&'static str>),
    /// HTTP worker threads (see `runtime_with`).
    http_threads: usize,
}

/// The parser a `tool_parser` / `reasoning_parser` setting names: `None`, `""` or `"none"` is
/// off, `"auto"` is whatever `detect` finds, anything else must be a known parser name.
fn parser_setting<F>(name: Option<&str>, detect: impl FnOnce() -> Option<F>) -> PyResult<Option<F>>
where
    F: FromStr,
    F::Err: std::fmt::Display,
{
    match name {
        None | Some("") | Some("none") => Ok(None),
        Some("auto") => Ok(detect()),
        Some(n) => F::from_str(n)
            .map(Some)
            .map_err(|e| crate::errors::invalid(e.to_string())),
    }
}

#[pymethods]
impl Server {
    /// Validate the configuration (unknown parser names and bad templates raise `ValueError`).
    /// `tool_parser` / `reasoning_parser`: a name, `"auto"` (pick from the model name or the chat
    /// template) or `None` / `"none"` (off). The operator's limits have no defaults here: they
    /// come from `smgpy.ServerOptions` (see `server_defaults`).
    #[new]
    #[pyo3(signature = (*, host, port, model_name, chat_template = None, special_tokens = None,
        tool_parser = None, reasoning_parser = None, api_key = None, allowed_origins = None,
        max_body_bytes, request_timeout, context_length = None,
        keep_alive, shutdown_timeout, tokenizer = None, get_load = None,
        header_read_timeout, body_read_timeout, max_connections,
        engine_stall_timeout, vocab_size = None, max_running_requests = None,
        response_store_bytes, response_store = None, response_store_ttl,
        flush_cache = None, worker_id = None, model_path = None,
        max_total_num_tokens = None, accepts_images = false, local_images = false, lark_grammars = false, prompt_ids = false, accepts_n = false,
        http_threads = 1, default_max_tokens, max_connections_per_client,
        embedding_model_name = None, embedding_dimensions = None, embedding_max_tokens = None,
        embedding_tokenizer = None, matryoshka_dimensions = Vec::new(), vocabulary = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        host: &str,
        port: u16,
        model_name: String,
        chat_template: Option<&Bound<'_, PyAny>>,
        special_tokens: Option<&Bound<'_, PyDict>>,
        tool_parser: Option<&str>,
        reasoning_parser: Option<&str>,
        api_key: Option<String>,
        allowed_origins: Option<Vec<String>>,
        max_body_bytes: usize,
        request_timeout: Option<f64>,
        context_length: Option<u32>,
        keep_alive: f64,
        shutdown_timeout: f64,
        tokenizer: Option<Py<PyAny>>,
        get_load: Option<Py<PyAny>>,
        header_read_timeout: f64,
        body_read_timeout: f64,
        max_connections: usize,
        engine_stall_timeout: f64,
        vocab_size: Option<u32>,
        max_running_requests: Option<u32>,
        response_store_bytes: usize,
        response_store: Option<std::path::PathBuf>,
        response_store_ttl: Option<f64>,
        flush_cache: Option<Py<PyAny>>,
        worker_id: Option<String>,
        model_path: Option<String>,
        max_total_num_tokens: Option<u64>,
        accepts_images: bool,
        local_images: bool,
        lark_grammars: bool,
        prompt_ids: bool,
        accepts_n: bool,
        http_threads: usize,
        default_max_tokens: Option<u32>,
        max_connections_per_client: usize,
        embedding_model_name: Option<String>,
        embedding_dimensions: Option<u32>,
        embedding_max_tokens: Option<u32>,
        embedding_tokenizer: Option<Py<PyAny>>,
        matryoshka_dimensions: Vec<u32>,
        vocabulary: Option<PyRef<'_, crate::structured::PyVocabulary>>,
    ) -> PyResult<Self> {
        if default_max_tokens == Some(0) {
            return Err(crate::errors::invalid(
                "default_max_tokens must be at least 1 (None: no default and no cap)",
            ));
        }
        if http_threads == 0 {
            return Err(crate::errors::invalid("http_threads must be at least 1"));
        }
        let template = match chat_template {
            None => None,
            Some(t) => Some(crate::template::template_from_py(t, special_tokens)?),
        };
        // "auto": by the model's name, else by what its chat template looks like.
        let source = template.as_ref().map(|t| t.source());
        let tool_format = parser_setting(tool_parser, || {
            ToolFormat::for_model(&model_name).or_else(|| source.and_then(ToolFormat::from_chat_template))
        })?;
        let reasoning_format = parser_setting(reasoning_parser, || {
            ReasoningFormat::for_model(&model_name).or_else(|| source.and_then(ReasoningFormat::from_chat_template))
        })?;
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(Duration::from_secs_f64(v))
            } else {
                Err(crate::errors::invalid(format!(
                    "{name} must be a positive number of seconds, got {v}"
                )))
            }
        };
        let native_tokenizer = tokenizer.as_ref().and_then(|t| {
            Python::attach(|py| {
                t.bind(py)
                    .cast::<crate::tokenizer::PyTokenizer>()
                    .ok()
                    .map(|n| n.get().inner.clone())
            })
        });
        // `embedding_model_name` turns `/v1/embeddings` on; only a native tokenizer is used (the
        // server tokenizes texts with it), anything else leaves tokenizing to the engine.
        let embedding = embedding_model_name.map(|name| smgpy_server::routes::embeddings::EmbeddingConfig {
            model_name: name,
            dimensions: embedding_dimensions,
            matryoshka_dimensions,
            max_input_tokens: embedding_max_tokens,
            tokenizer: embedding_tokenizer.as_ref().and_then(|t| {
                Python::attach(|py| {
                    t.bind(py)
                        .cast::<crate::tokenizer::PyTokenizer>()
                        .ok()
                        .map(|n| n.get().inner.clone())
                })
            }),
        });
        let config = ServerConfig {
            embedding,
            model_name,
            chat_template: template,
            tool_format,
            reasoning_format,
            api_key: api_key.filter(|k| !k.is_empty()),
            allowed_origins: allowed_origins.unwrap_or_default(),
            max_body_bytes,
            request_timeout: request_timeout.map(|t| positive("request_timeout", t)).transpose()?,
            header_read_timeout: positive("header_read_timeout", header_read_timeout)?,
            body_read_timeout: positive("body_read_timeout", body_read_timeout)?,
            max_connections: if max_connections == 0 {
                return Err(crate::errors::invalid("max_connections must be at least 1"));
            } else {
                max_connections
            },
            max_connections_per_client: if max_connections_per_client == 0 {
                return Err(crate::errors::invalid("max_connections_per_client must be at least 1"));
            } else {
                max_connections_per_client
            },
            engine_stall_timeout: positive("engine_stall_timeout", engine_stall_timeout)?,
            vocab_size,
            max_running_requests,
            default_max_tokens,
            accepts_images,
            local_images,
            response_store_bytes,
            response_store_ttl: response_store_ttl
                .map(|t| positive("response_store_ttl", t))
                .transpose()?,
            response_store_path: response_store,
            worker_id,
            model_path,
            max_total_num_tokens,
            context_length,
            keep_alive: positive("keep_alive", keep_alive)?,
            shutdown_timeout: positive("shutdown_timeout", shutdown_timeout)?,
            lark_grammars,
            vocabulary: vocabulary.map(|v| v.inner.clone()),
            tokenizer: native_tokenizer.clone(),
            prompt_ids: prompt_ids && native_tokenizer.is_some(),
        };
        // A Rust tokenizer is used directly; any other object is called through Python.
        let tokenizer = if native_tokenizer.is_some() {
            None
        } else {
            tokenizer.map(|t| Arc::new(EngineTokenizer(t)) as Arc<dyn smgpy_server::engine::Tokenizer>)
        };
        let bridge = Bridge::new(tokenizer, get_load, flush_cache, accepts_n)
            .map_err(|e| crate::errors::os(format!("cannot create the engine wake-up socket: {e}")))?;
        let (shutdown, _) = watch::channel(false);
        let (done_tx, done) = watch::channel(false);
        Ok(Self {
            bridge,
            config: Some(config),
            bind: format!("{host}:{port}"),
            address: None,
            shutdown,
            done,
            done_tx: Some(done_tx),
            health: None,
            parser_names: (
                tool_format.map(ToolFormat::name),
                reasoning_format.map(ReasoningFormat::name),
            ),
            http_threads,
        })
    }

    /// Names of the parsers in effect (after `"auto"` resolution): `(tool, reasoning)`.
    #[getter]
    fn parsers(&self) -> (Option<&'static str>, Option<&'static str>) {
        self.parser_names
    }

    /// File descriptor to watch with `loop.add_reader`; readable when work is queued.
    fn wake_fd(&self) -> i32 {
        self.bridge.wake_fd()
    }

    /// Hand engine outputs to the HTTP side once per turn of the serving loop, whose `call_soon`
    /// this is, instead of once per push (fewer thread wake-ups). Call once, before `start`.
    fn bind_loop(&self, call_soon: Py<PyAny>) -> PyResult<()> {
        if self.bridge.bind_loop(call_soon) {
            Ok(())
        } else {
            Err(crate::errors::misuse("this server is already bound to a loop"))
        }
    }

    /// Queued work: `([(rid, fields, sink), ...], [cancelled rid, ...], [rid with room again, ...])`.
    #[allow(clippy::type_complexity)]
    fn take_work<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, Bound<'py, PyList>)> {
        take_work(py, &self.bridge)
    }

    /// Queued embedding requests: `[(rid, fields, sink), ...]` (call right after `take_work`).
    fn take_embeds<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        take_embeds(py, &self.bridge)
    }

    /// Bind and start serving in the background. Returns `(host, port)` actually bound.
    fn start(&mut self, py: Python<'_>) -> PyResult<(String, u16)> {
        let config = self
            .config
            .take()
            .ok_or_else(|| crate::errors::misuse("this server was already started"))?;
        let done_tx = self
            .done_tx
            .take()
            .ok_or_else(|| crate::errors::misuse("this server was already started"))?;
        let rt = runtime_with(self.http_threads)?;
        let bind = self.bind.clone();
        let (listener, addr) = py
            .detach(|| rt.block_on(smgpy_server::bind(&bind)))
            .map_err(|e| crate::errors::os(format!("cannot listen on {bind}: {e}")))?;
        // Opening a store file reads and checks it: off the GIL.
        let engine = Arc::new(PyEngine(self.bridge.clone()));
        let state = py
            .detach(|| AppState::new(engine, config))
            .map_err(crate::errors::response_store)?;
        self.health = Some(state.health());
        let mut sd = self.shutdown.subscribe();
        let bridge = self.bridge.clone();
        rt.spawn(async move {
            let signal = async move {
                let _ = sd.wait_for(|v| *v).await;
            };
            // `serve` drains on shutdown: running requests get `shutdown_timeout` to finish.
            if let Err(e) = smgpy_server::serve(listener, state, signal).await {
                tracing::error!(error = %e, "server stopped");
            }
            let _ = done_tx.send(true);
            // The loop learns it through the wake-up socket, like queued work: no Rust thread
            // calls into Python to report it (one that did could still be inside Python while
            // the interpreter shuts down after `serve_oai` returns).
            bridge.wake();
        });
        self.address = Some(addr);
        Ok((addr.ip().to_string(), addr.port()))
    }

    /// `(host, port)` once started.
    #[getter]
    fn address(&self) -> Option<(String, u16)> {
        self.address.map(|a| (a.ip().to_string(), a.port()))
    }

    /// The engine's event loop turned over (called from that loop about once a second);
    /// `/health` fails when these stop for longer than `engine_stall_timeout`.
    fn heartbeat(&self) {
        if let Some(h) = &self.health {
            h.beat();
        }
    }

    /// Begin a graceful shutdown: `/health` and new requests answer 503, running requests
    /// finish (or end with an error after `shutdown_timeout`), then the server stops.
    fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Whether the server has stopped (after `shutdown()`, or on its own after an error). The
    /// wake-up file descriptor becomes readable when this turns true.
    #[getter]
    fn stopped(&self) -> bool {
        *self.done.borrow()
    }
}
