//! The engine abstraction the server drives. `rust/py` implements it on top of a Python engine;
//! tests implement it with scripted fakes, so the whole HTTP pipeline runs without Python.

use smgpy_protocol::SamplingParams;
use tokio::sync::mpsc;

/// One generation request, as the engine receives it.
#[derive(Debug, Clone, Default)]
pub struct GenerateRequest {
    pub rid: String,
    /// Rendered prompt text.
    pub text: Option<String>,
    /// Prompt token ids (instead of `text`).
    pub input_ids: Option<Vec<i64>>,
    /// Images of the prompt, in order (URLs or `data:` URLs), for engines that take images.
    pub image_data: Vec<String>,
    pub sampling: SamplingParams,
    pub stream: bool,
    pub return_logprob: bool,
    pub top_logprobs_num: u32,
    /// The client's `prompt_cache_key`: a conversation whose prefix the engine should keep.
    pub prompt_cache_key: Option<String>,
    /// Prompt token positions the client marked with Anthropic `cache_control` (ascending).
    pub cache_breakpoints: Vec<u32>,
    /// The request's structured-output constraint compiled against the engine's vocabulary
    /// (only when the engine declared one: [`crate::state::ServerConfig::vocabulary`]).
    pub grammar: Option<smgpy_structured::Grammar>,
}

/// Why the engine finished.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineFinish {
    /// EOS (`matched: None`), a stop token id (`Token`) or a stop string the engine matched itself.
    Stop {
        matched: Option<MatchedBy>,
    },
    Length,
    Abort {
        message: Option<String>,
        /// The HTTP status the engine gave the abort (SGLang's `status_code`). A 4xx says the
        /// request itself was refused (input too long, an image the model cannot take), and its
        /// message is written for the client; any other abort is the engine's failure.
        status: Option<u16>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchedBy {
    Token(i64),
    Text(String),
}

/// Log-probability of one generated token and its top alternatives.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprobs {
    pub token_id: i64,
    pub token: Option<String>,
    pub logprob: f32,
    pub top: Vec<(i64, Option<String>, f32)>,
}

/// One engine step, converted from the engine's output dict.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineOutput {
    /// New text since the previous output (the bridge turns cumulative text into deltas).
    pub text_delta: String,
    /// New token ids of this step.
    pub token_ids: Vec<i64>,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    pub cached_tokens: Option<u32>,
    pub finish: Option<EngineFinish>,
    pub logprobs: Vec<TokenLogprobs>,
}

/// Errors an engine reports.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    /// The engine refuses this request (e.g. prompt longer than the context): HTTP 400.
    #[error("{0}")]
    BadRequest(String),
    /// The prompt does not fit the model's context: HTTP 400 with `code: context_length_exceeded`.
    #[error("{0}")]
    ContextLength(String),
    /// The engine's waiting queue is full: HTTP 429.
    #[error("{0}")]
    Overloaded(String),
    /// The engine failed: HTTP 500. The message is shown to the client, so it carries no trace.
    #[error("{0}")]
    Internal(String),
}

/// What flows from the engine to a request handler.
#[derive(Debug)]
pub enum EngineEvent {
    Output(EngineOutput),
    Error(EngineError),
}

/// Called once when a stream is dropped before the engine finished (client gone, stop string
/// matched, shutdown): the engine must abort the request.
pub trait Abort: Send + 'static {
    fn abort(self: Box<Self>);
}

/// The receiving end of one request. Dropping it before the engine finished aborts the request.
pub struct EngineStream {
    rx: mpsc::Receiver<EngineEvent>,
    abort: Option<Box<dyn Abort>>,
}

impl EngineStream {
    pub fn new(rx: mpsc::Receiver<EngineEvent>, abort: Box<dyn Abort>) -> Self {
        Self { rx, abort: Some(abort) }
    }

    /// Next event; `None` when the engine closed the stream.
    pub async fn recv(&mut self) -> Option<EngineEvent> {
        let ev = self.rx.recv().await;
        self.settle(&ev);
        ev
    }

    /// The next event if one is already waiting (`None` also when the stream is closed: `recv`
    /// then says so).
    pub fn try_recv(&mut self) -> Option<EngineEvent> {
        let ev = self.rx.try_recv().ok();
        if ev.is_some() {
            self.settle(&ev);
        }
        ev
    }

    /// A finished, failed or closed stream has nothing left to abort.
    fn settle(&mut self, ev: &Option<EngineEvent>) {
        match ev {
            Some(EngineEvent::Output(o)) if o.finish.is_some() => self.abort = None,
            Some(EngineEvent::Error(_)) | None => self.abort = None,
            _ => {}
        }
    }

    /// Abort now (e.g. a stop string matched) instead of waiting for the drop.
    pub fn abort(&mut self) {
        if let Some(a) = self.abort.take() {
            a.abort();
        }
    }
}

impl Drop for EngineStream {
    fn drop(&mut self) {
        self.abort();
    }
}

/// A tokenizer the engine exposes (for `/v1/tokenize`, `/v1/detokenize`, token counting).
pub trait Tokenizer: Send + Sync + 'static {
    fn encode(&self, text: &str) -> Result<Vec<i64>, EngineError>;
    fn decode(&self, ids: &[i64]) -> Result<String, EngineError>;
}

/// A tokenizer in Rust: encodes and decodes on the caller's thread, no GIL.
impl Tokenizer for smgpy_tokenizer::Tokenizer {
    fn encode(&self, text: &str) -> Result<Vec<i64>, EngineError> {
        smgpy_tokenizer::Tokenizer::encode(self, text, false)
            .map(|ids| ids.into_iter().map(i64::from).collect())
            .map_err(|e| EngineError::BadRequest(e.to_string()))
    }

    fn decode(&self, ids: &[i64]) -> Result<String, EngineError> {
        let ids: Vec<u32> = ids
            .iter()
            .map(|&i| u32::try_from(i))
            .collect::<Result<_, _>>()
            .map_err(|_| EngineError::BadRequest("token ids must be between 0 and 2^32 - 1".into()))?;
        smgpy_tokenizer::Tokenizer::decode(self, &ids, false).map_err(|e| EngineError::BadRequest(e.to_string()))
    }
}

/// One embedding request: the inputs of one `/v1/embeddings` call, in order, as texts or as token
/// ids (the server's own tokenization, or the client's ids, without special tokens).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmbedRequest {
    pub rid: String,
    pub text: Option<Vec<String>>,
    pub input_ids: Option<Vec<Vec<i64>>>,
}

/// The vectors of one [`EmbedRequest`]: `rows` vectors of `dim` numbers, row after row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Embeddings {
    pub dim: usize,
    pub data: Vec<f32>,
    /// Tokens the engine read, when it reports them (else the server counts the ids it sent).
    pub prompt_tokens: Option<u64>,
}

impl Embeddings {
    /// Vector `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        self.data.get(i * self.dim..(i + 1) * self.dim).unwrap_or(&[])
    }

    pub fn rows(&self) -> usize {
        self.data.len().checked_div(self.dim).unwrap_or(0)
    }
}

/// Where an engine's answer to an [`EmbedRequest`] arrives.
pub type EmbedReply = tokio::sync::oneshot::Receiver<Result<Embeddings, EngineError>>;

/// An LLM engine.
pub trait Engine: Send + Sync + 'static {
    /// Start a request. Must not block: hand the request over and return its stream.
    fn generate(&self, req: GenerateRequest) -> Result<EngineStream, EngineError>;

    /// Start `n` samples of one prompt, one stream per sample, in order.
    ///
    /// The default starts `n` independent requests (`rid-0`, `rid-1`, ...; with a seed, sample
    /// `i` uses `seed + i`, so the samples differ yet stay reproducible). That prefills the
    /// prompt `n` times: an engine that samples `n` from one prefill overrides this.
    fn generate_n(&self, req: GenerateRequest, n: u32) -> Result<Vec<EngineStream>, EngineError> {
        fan_out(self, req, n)
    }

    /// The engine's tokenizer, when it exposes one.
    fn tokenizer(&self) -> Option<std::sync::Arc<dyn Tokenizer>> {
        None
    }

    /// Current load (running / waiting requests, token usage) for `/v1/loads` and `/metrics`.
    fn load(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        None
    }

    /// Start an embedding request. Must not block. The default refuses: only engines that serve
    /// an embedding model override it (and the server routes nothing here unless configured).
    fn embed(&self, req: EmbedRequest) -> Result<EmbedReply, EngineError> {
        let _ = req;
        Err(EngineError::BadRequest("this engine serves no embedding model".into()))
    }

    /// Drop cached prompt state (`POST /flush_cache`). `Ok(false)`: the engine has no cache to
    /// flush. May block (called off the async workers).
    fn flush_cache(&self) -> Result<bool, EngineError> {
        Ok(false)
    }
}

/// `n` samples as `n` independent requests: the default of [`Engine::generate_n`], for an
/// engine that overrides it only for some requests.
pub fn fan_out<E: Engine + ?Sized>(engine: &E, req: GenerateRequest, n: u32) -> Result<Vec<EngineStream>, EngineError> {
    if n <= 1 {
        let mut req = req;
        req.sampling.n = None;
        return Ok(vec![engine.generate(req)?]);
    }
    (0..n)
        .map(|i| {
            let mut one = req.clone();
            one.sampling.n = None;
            one.rid = format!("{}-{i}", req.rid);
            one.sampling.seed = req.sampling.seed.map(|s| s.wrapping_add(i64::from(i)));
            engine.generate(one)
        })
        .collect()
}
