//! Server configuration and the shared state every handler gets through `with_state`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smgpy_parsers::{ReasoningFormat, ToolFormat};
use smgpy_template::ChatTemplate;

use crate::engine::Engine;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::routes::response_store::{Bounds, ResponseStore, StoreError};

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
    /// Whole-request time limit, streams included (`None`: no limit). A request that reaches it
    /// is aborted in the engine and answered 504 (an error event in a stream).
    pub request_timeout: Option<Duration>,
    /// A request head must arrive within this; it also closes idle keep-alive connections.
    pub header_read_timeout: Duration,
    /// A request body must arrive within this once its head is in (408 otherwise).
    pub body_read_timeout: Duration,
    /// Most connections open at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Most connections one client address may hold open; more are closed at once, so one
    /// client cannot fill every slot. Raise it for a router or proxy in front.
    pub max_connections_per_client: usize,
    /// `/health` fails when the engine's loop has not turned over for this long.
    pub engine_stall_timeout: Duration,
    /// Vocabulary size: token ids from clients must be below it (`None`: not checked).
    pub vocab_size: Option<u32>,
    /// The model's tokenizer in Rust. With `prompt_ids`, the server tokenizes rendered prompts
    /// itself (off the engine's event loop) and sends the engine `input_ids`; `/v1/tokenize`,
    /// `/v1/detokenize` and `count_tokens` use it without the GIL.
    pub tokenizer: Option<smgpy_tokenizer::Tokenizer>,
    /// Send the engine `input_ids` instead of `text` (the engine accepts them).
    pub prompt_ids: bool,
    /// The engine takes images (`image_data`); otherwise an image in a request is a 400.
    pub accepts_images: bool,
    /// The engine reads `file://` image URLs itself, within a directory its operator allowed;
    /// otherwise they are a 400 here.
    pub local_images: bool,
    /// The operator's `--default-max-tokens`: a request that sets no `max_tokens` generates at
    /// most this many tokens (fewer when its prompt leaves less of the context), and one that
    /// asks for more is a 400 naming the field (`None`: no default, no cap).
    pub default_max_tokens: Option<u32>,
    /// Most sequences the engine runs at once: a larger `n` can never run (`None`: not checked).
    pub max_running_requests: Option<u32>,
    /// Byte budget of the Responses store (`store: true`), least recently used evicted first.
    pub response_store_bytes: usize,
    /// Stored responses are dropped this long after they were stored (`None`: kept until
    /// evicted or deleted). The default is OpenAI's: 30 days.
    pub response_store_ttl: Option<Duration>,
    /// Keep the Responses store in this SQLite file, so stored responses and their
    /// conversations survive a restart (`None`: in memory).
    pub response_store_path: Option<PathBuf>,
    /// This worker's name in `/metrics` and `/server_info` (e.g. behind a router).
    pub worker_id: Option<String>,
    /// Where the model came from (`/model_info`, `/server_info`).
    pub model_path: Option<String>,
    /// Tokens the engine can hold in its KV cache at once, if it knows (`/v1/loads`, `/server_info`).
    pub max_total_num_tokens: Option<u64>,
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
    /// The engine's vocabulary for structured output: each request's constraint is compiled
    /// against it once, here, and handed to the engine with the request
    /// ([`crate::engine::GenerateRequest::grammar`]). Without it the server only checks that
    /// the constraint compiles, and the engine compiles it for its own tokens.
    pub vocabulary: Option<std::sync::Arc<smgpy_structured::Vocabulary>>,
    /// The embedding model the engine serves on `/v1/embeddings` (`None`: that route says so).
    pub embedding: Option<crate::routes::embeddings::EmbeddingConfig>,
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
            request_timeout: Some(Duration::from_secs(1800)),
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_connections_per_client: 256,
            engine_stall_timeout: Duration::from_secs(10),
            vocab_size: None,
            max_running_requests: None,
            default_max_tokens: None,
            accepts_images: false,
            local_images: false,
            tokenizer: None,
            prompt_ids: false,
            response_store_bytes: 256 * 1024 * 1024,
            response_store_ttl: Some(Duration::from_secs(30 * 24 * 3600)),
            response_store_path: None,
            worker_id: None,
            model_path: None,
            max_total_num_tokens: None,
            context_length: None,
            keep_alive: Duration::from_secs(15),
            shutdown_timeout: Duration::from_secs(10),
            lark_grammars: false,
            vocabulary: None,
            embedding: None,
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
    pub metrics: Metrics,
    pub health: Arc<Health>,
    pub responses: ResponseStore,
}

impl AppState {
    /// The state of a server of `engine`. Fails only when `config.response_store_path` names a
    /// file that cannot be used as the Responses store (the error says why and what to do).
    pub fn new(engine: Arc<dyn Engine>, config: ServerConfig) -> Result<Self, StoreError> {
        let started = unix_now();
        let fingerprint = format!("fp_smgpy_{}", env!("CARGO_PKG_VERSION").replace('.', "_"));
        let health = Arc::new(Health::new(config.engine_stall_timeout));
        let bounds = Bounds {
            max_bytes: config.response_store_bytes,
            ttl_ms: config
                .response_store_ttl
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        };
        let responses = ResponseStore::open(config.response_store_path.as_deref(), bounds)?;
        Ok(Self(Arc::new(Inner {
            engine,
            config,
            started,
            fingerprint,
            metrics: Metrics::default(),
            health,
            responses,
        })))
    }

    /// The server's lifecycle state: the engine side calls [`Health::beat`] on it.
    pub fn health(&self) -> Arc<Health> {
        self.0.health.clone()
    }

    pub fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    /// Where the model came from, as clients see it (`root`, `model_path`): a hub id as it is, a
    /// filesystem path only by its last component (the server's directories are nobody's business).
    pub(crate) fn public_model_path(&self) -> String {
        let cfg = self.config();
        let path = cfg.model_path.as_deref().unwrap_or(&cfg.model_name);
        let local = path.starts_with(['/', '~', '.', '\\']) || path.get(1..3).is_some_and(|s| s == ":\\" || s == ":/");
        if !local {
            return path.to_string();
        }
        path.rsplit(['/', '\\'])
            .find(|c| !c.is_empty() && *c != "." && *c != "..")
            .unwrap_or(&cfg.model_name)
            .to_string()
    }

    /// A fresh request id with the given prefix (`chatcmpl`, `cmpl`, `gen`): 24 random
    /// characters (143 bits), so ids are unique without a counter that would tell clients how
    /// many requests the server has seen. Engine requests are keyed by these ids only.
    pub(crate) fn new_id(&self, prefix: &str) -> String {
        format!("{prefix}-{}", random_alnum(24))
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
