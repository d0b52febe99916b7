//! Server configuration and the shared state every handler gets through `with_state`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smgpy_parsers::{ReasoningFormat, ToolFormat};
use smgpy_template::ChatTemplate;

use crate::engine::Engine;
use crate::metrics::Metrics;

/// Everything `serve` needs besides the engine. Built once at start-up.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Name reported by `/v1/models` and in responses.
    pub model_name: String,
    pub chat_template: Option<ChatTemplate>,
    pub tool_format: Option<ToolFormat>,
    pub reasoning_format: Option<ReasoningFormat>,
    /// Required bearer key, if any (`/health` stays open).
    pub api_key: Option<String>,
    /// CORS origins; empty means CORS off.
    pub allowed_origins: Vec<String>,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Whole-request timeout for non-streaming requests.
    pub request_timeout: Option<Duration>,
    /// The engine's context length, if known (reported by `/v1/models`).
    pub context_length: Option<u32>,
    /// Interval of SSE keep-alive comments while a stream is idle (long prefill).
    pub keep_alive: Duration,
    /// How long a graceful shutdown waits for in-flight requests before aborting them.
    pub shutdown_timeout: Duration,
    /// The engine enforces llguidance Lark grammars sent as `ebnf` (smgpy's MLX engine does):
    /// tool calls are then constrained in the model's own format. Otherwise forced calls are
    /// constrained as JSON (a JSON Schema every structured-output backend takes).
    pub lark_grammars: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            model_name: "default".to_string(),
            chat_template: None,
            tool_format: None,
            reasoning_format: None,
            api_key: None,
            allowed_origins: Vec::new(),
            max_body_bytes: 32 * 1024 * 1024,
            request_timeout: None,
            context_length: None,
            keep_alive: Duration::from_secs(15),
            shutdown_timeout: Duration::from_secs(10),
            lark_grammars: false,
        }
    }
}

/// Shared state: cheap to clone (one `Arc`).
#[derive(Clone)]
pub struct AppState(pub(crate) Arc<Inner>);

pub(crate) struct Inner {
    pub engine: Arc<dyn Engine>,
    pub config: ServerConfig,
    pub started: u64,
    pub fingerprint: String,
    pub next_id: AtomicU64,
    pub metrics: Metrics,
}

impl AppState {
    pub fn new(engine: Arc<dyn Engine>, config: ServerConfig) -> Self {
        let started = unix_now();
        let fingerprint = format!("fp_smgpy_{}", env!("CARGO_PKG_VERSION").replace('.', "_"));
        Self(Arc::new(Inner {
            engine,
            config,
            started,
            fingerprint,
            next_id: AtomicU64::new(0),
            metrics: Metrics::default(),
        }))
    }

    pub fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    /// A fresh request id with the given prefix (`chatcmpl`, `cmpl`, `msg`, `resp`).
    pub(crate) fn new_id(&self, prefix: &str) -> String {
        let n = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}-{}{n:x}", random_alnum(16))
    }
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Random `[A-Za-z0-9]` string (ids such as `call_...`).
pub fn random_alnum(n: usize) -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..n)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}
