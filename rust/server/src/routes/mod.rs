//! HTTP routes. Handlers are small: validate, render, start the engine, shape the output.

pub mod chat;
pub mod completions;
pub mod embeddings;
pub mod generate;
pub mod info;
pub mod loads;
pub mod messages;
pub mod openapi;
pub mod prelude;
pub mod response_store;
pub mod responses;
pub mod tokenize;
pub mod worker;

use smgpy_protocol::ErrorCode;
use std::time::Duration;

use crate::driver::ChoiceDriver;
use crate::engine::GenerateRequest;
use crate::error::ApiError;
use crate::pipeline::{Pipeline, PipelineSpec};
use crate::state::AppState;

/// The SSE stream terminator of the OpenAI API.
pub const DONE: &str = "[DONE]";

/// How long a request waits for the engine's first event before its response is committed
/// (see [`ChoiceDriver::admit`]). Refusals arrive within microseconds; prefill usually takes longer.
const ADMISSION_WAIT: Duration = Duration::from_millis(500);

/// Start the request's `n` choices. The engine decides how ([`crate::Engine::generate_n`]): one
/// request whose samples share a single prefill when it can, else one request per choice.
/// `ids_param` names the request field that `base.input_ids` came from, for the error that an
/// out-of-vocabulary id gets; `max_param` names the request's `max_tokens` field (for the
/// operator's cap, see [`limit_max_tokens`]).
pub async fn start_choices(
    state: &AppState,
    mut base: GenerateRequest,
    spec: &PipelineSpec,
    ids_param: &str,
    max_param: &str,
) -> Result<Vec<ChoiceDriver>, ApiError> {
    if state.0.health.draining() {
        return Err(ApiError::Unavailable(
            "the server is shutting down and takes no new requests; retry on another server".into(),
        ));
    }
    limit_max_tokens(state, &mut base, max_param)?;
    check_request(state, &base, ids_param)?;
    crate::structured::compile(state.config(), &mut base).await?;
    let n = base.sampling.n.unwrap_or(1).max(1);
    let rid = base.rid.clone();
    // Dropping the streams (an error below) aborts their engine requests.
    let streams = state.0.engine.generate_n(base, n)?;
    let mut drivers: Vec<ChoiceDriver> = (0u32..)
        .zip(streams)
        .map(|(i, stream)| ChoiceDriver::new(i, rid.clone(), stream, Pipeline::new(spec), state.clone()))
        .collect();
    for d in &mut drivers {
        d.admit(ADMISSION_WAIT).await.map_err(|e| name_prompt(e, ids_param))?;
    }
    Ok(drivers)
}

/// The URLs of a request's images, or a 400 naming the first one when the engine takes none,
/// or the first whose URL an engine must not be given (see [`smgpy_protocol::image_urls`]).
/// `file://` URLs pass only to an engine that reads them within its operator's directory.
pub fn image_data(state: &AppState, images: &[smgpy_protocol::images::ImageRef]) -> Result<Vec<String>, ApiError> {
    match images.first() {
        Some(first) if !state.config().accepts_images => Err(smgpy_protocol::images::not_accepted(&first.param).into()),
        _ => images
            .iter()
            .map(|i| {
                let local = i.url.get(..7).is_some_and(|s| s.eq_ignore_ascii_case("file://"));
                if !(local && state.config().local_images) {
                    smgpy_protocol::image_urls::check(&i.param, &i.url)?;
                }
                Ok(i.url.clone())
            })
            .collect(),
    }
}

/// Prompts up to this many bytes are tokenized on the request's own task (see [`prompt_of`]).
const INLINE_ENCODE_BYTES: usize = 8 * 1024;

/// Long prompts tokenized at once: one less than the machine's cores, at least one.
fn long_encode_slots() -> &'static tokio::sync::Semaphore {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        tokio::sync::Semaphore::new(cores.saturating_sub(1).max(1))
    })
}

/// The prompt as the engine gets it: token ids made here from the rendered text, when the
/// server has the model's tokenizer in Rust and the engine takes ids (so the engine's event loop
/// never spends time encoding), else the text itself. Literal spans of a chat render (request
/// content that spells special tokens) are encoded as text (see [`crate::literal`]).
pub async fn prompt_of(
    state: &AppState,
    prompt: impl Into<crate::literal::Rendered>,
) -> Result<(Option<String>, Option<Vec<i64>>), ApiError> {
    let crate::literal::Rendered { text, literal } = prompt.into();
    let cfg = state.config();
    let Some(tok) = cfg.tokenizer.clone().filter(|_| cfg.prompt_ids) else {
        return Ok((Some(text), None));
    };
    // A short prompt is encoded right here (tens of microseconds); handing it to the blocking
    // pool would cost two thread switches, more than the encoding. A long one moves off the
    // async workers so that it does not hold up other requests' streams.
    let ids = if text.len() <= INLINE_ENCODE_BYTES {
        tok.encode_prompt_literal(&text, &literal)
    } else {
        // Long prompts take turns on all but one core, so a burst of them leaves a core to the
        // engine's event loop and the streams it feeds.
        let _turn = long_encode_slots()
            .acquire()
            .await
            .map_err(|e| ApiError::Internal(format!("tokenizer slots closed: {e}")))?;
        tokio::task::spawn_blocking(move || tok.encode_prompt_literal(&text, &literal))
            .await
            .map_err(|e| ApiError::Internal(format!("tokenizer task failed: {e}")))?
    }
    .map_err(|e| ApiError::bad_request(None, e.to_string()))?;
    Ok((None, Some(ids.into_iter().map(i64::from).collect())))
}

/// A context-length refusal names the request's prompt field (`messages`, `prompt`, `input`),
/// as OpenAI's does, so clients that detect overflow by `code` and `param` see it.
fn name_prompt(e: ApiError, ids_param: &str) -> ApiError {
    match e {
        ApiError::BadRequest {
            message,
            param: None,
            code: Some(ErrorCode::ContextLengthExceeded),
        } => {
            let field = ids_param.split('[').next().unwrap_or(ids_param);
            ApiError::BadRequest {
                message,
                param: Some(field.to_string()),
                code: Some(ErrorCode::ContextLengthExceeded),
            }
        }
        other => other,
    }
}

/// The operator's `default_max_tokens`: the default for a request that sets no `max_tokens`
/// (fewer when the prompt's token ids leave less of the context), and a cap on one that does.
pub(crate) fn limit_max_tokens(state: &AppState, req: &mut GenerateRequest, max_param: &str) -> Result<(), ApiError> {
    let cfg = state.config();
    let Some(cap) = cfg.default_max_tokens else {
        return Ok(());
    };
    match req.sampling.max_new_tokens {
        Some(m) if m > cap => Err(ApiError::bad_request(
            Some(max_param),
            format!(
                "{max_param} is {m}, more than this server allows per request: {cap} tokens (its operator's \
                 --default-max-tokens); ask for at most {cap}"
            ),
        )),
        Some(_) => Ok(()),
        None => {
            let room = match (&req.input_ids, cfg.context_length) {
                (Some(ids), Some(ctx)) => u32::try_from(ids.len()).ok().map(|n| ctx.saturating_sub(n).max(1)),
                _ => None,
            };
            req.sampling.max_new_tokens = Some(room.map_or(cap, |r| r.min(cap)));
            Ok(())
        }
    }
}

/// What only the server can check: token ids within the engine's vocabulary (a prompt id past
/// it would make the engine read out of bounds), and `n` within what the engine ever runs at once.
pub(crate) fn check_request(state: &AppState, req: &GenerateRequest, ids_param: &str) -> Result<(), ApiError> {
    let cfg = state.config();
    if let (Some(n), Some(max)) = (req.sampling.n, cfg.max_running_requests) {
        if n > max {
            return Err(ApiError::bad_request(
                Some("n"),
                format!("n is {n}, but this engine runs at most {max} sequences at once, so it could never start"),
            ));
        }
    }
    if let (Some(ids), Some(ctx)) = (&req.input_ids, cfg.context_length) {
        let n = ids.len() as u64;
        let field = ids_param.split('[').next().unwrap_or(ids_param);
        let over = |message: String| ApiError::BadRequest {
            message,
            param: Some(field.to_string()),
            code: Some(ErrorCode::ContextLengthExceeded),
        };
        if n >= u64::from(ctx) {
            return Err(over(format!(
                "the prompt has {n} tokens, but the model's context length is {ctx} tokens"
            )));
        }
        if let Some(max) = req.sampling.max_new_tokens {
            if n + u64::from(max) > u64::from(ctx) {
                return Err(over(format!(
                    "the prompt ({n} tokens) plus max_tokens ({max}) is {} tokens, more than the model's \
                     context length of {ctx} tokens",
                    n + u64::from(max)
                )));
            }
        }
    }
    let Some(vocab) = cfg.vocab_size else { return Ok(()) };
    let out_of_range = |param: String, id: i64| {
        ApiError::bad_request(
            Some(&param),
            format!("token id {id} is outside the vocabulary: ids must be at least 0 and below {vocab}"),
        )
    };
    let bad = |id: i64| id < 0 || id >= i64::from(vocab);
    if let Some(ids) = &req.input_ids {
        if let Some(i) = ids.iter().position(|&t| bad(t)) {
            return Err(out_of_range(format!("{ids_param}[{i}]"), ids[i]));
        }
    }
    let s = &req.sampling;
    if let Some(i) = s.stop_token_ids.iter().position(|&t| bad(t)) {
        return Err(out_of_range(format!("stop_token_ids[{i}]"), s.stop_token_ids[i]));
    }
    for key in s.logit_bias.iter().flat_map(|b| b.keys()) {
        // The protocol layer checked that keys are integers.
        if let Ok(id) = key.trim().parse::<i64>() {
            if bad(id) {
                return Err(out_of_range(format!("logit_bias.{key}"), id));
            }
        }
    }
    Ok(())
}

/// Serialised size of a JSON value, counted without building the text.
pub fn json_size(v: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}
