//! `POST /v1/tokenize`, `POST /v1/detokenize` (vLLM / sglang shapes) and the token-counting
//! helpers other routes share. The tokenizer is the model's own in Rust when the engine exposes
//! one (no GIL), else the engine's Python tokenizer; either way calls run in `spawn_blocking`, so
//! a long text never stalls the async workers.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use smgpy_template::RenderArgs;

use crate::engine::Tokenizer;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::literal::Rendered;
use crate::prompt;
use crate::state::AppState;

/// `{"prompt": "..."}` or a chat-style `{"messages": [...]}` rendered with the chat template.
#[derive(Debug, Deserialize)]
pub struct TokenizeRequest {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub prompt: Option<String>,
    #[serde(default)]
    pub messages: Option<Vec<Value>>,
    #[serde(default = "default_true")]
    pub add_generation_prompt: bool,
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    #[serde(default)]
    pub chat_template_kwargs: Option<Map<String, Value>>,
    #[serde(default)]
    pub documents: Option<Vec<Value>>,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Deserialize)]
pub struct DetokenizeRequest {
    #[serde(default)]
    pub model: Option<String>,
    pub tokens: Vec<i64>,
}

fn tokenizer(state: &AppState, what: &str) -> Result<Arc<dyn Tokenizer>, ApiError> {
    if let Some(t) = &state.config().tokenizer {
        return Ok(Arc::new(t.clone()));
    }
    state.0.engine.tokenizer().ok_or_else(|| {
        ApiError::bad_request(
            None,
            format!(
                "{what} needs the engine's tokenizer, and this engine exposes none (give it a `tokenizer` attribute)"
            ),
        )
    })
}

/// Token ids of `text` with the engine's tokenizer.
pub async fn encode(state: &AppState, text: String, what: &str) -> Result<Vec<i64>, ApiError> {
    let tok = tokenizer(state, what)?;
    tokio::task::spawn_blocking(move || tok.encode(&text))
        .await
        .map_err(|e| ApiError::Internal(format!("tokenizer task failed: {e}")))?
        .map_err(ApiError::from)
}

/// Token ids of a chat render: as [`encode`], except that literal spans (special tokens spelled in
/// request content) are encoded as text, as the prompt the engine gets is.
pub async fn encode_rendered(state: &AppState, prompt: Rendered, what: &str) -> Result<Vec<i64>, ApiError> {
    let cfg = state.config();
    match cfg.tokenizer.clone().filter(|_| !prompt.literal.is_empty()) {
        Some(tok) => tokio::task::spawn_blocking(move || tok.encode_prompt_literal(&prompt.text, &prompt.literal))
            .await
            .map_err(|e| ApiError::Internal(format!("tokenizer task failed: {e}")))?
            .map(|ids| ids.into_iter().map(i64::from).collect())
            .map_err(|e| ApiError::bad_request(None, e.to_string())),
        None => encode(state, prompt.text, what).await,
    }
}

/// Text of `ids` with the engine's tokenizer.
pub async fn decode(state: &AppState, ids: Vec<i64>, what: &str) -> Result<String, ApiError> {
    let tok = tokenizer(state, what)?;
    tokio::task::spawn_blocking(move || tok.decode(&ids))
        .await
        .map_err(|e| ApiError::Internal(format!("tokenizer task failed: {e}")))?
        .map_err(ApiError::from)
}

pub async fn tokenize(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<TokenizeRequest>,
) -> Result<Json<Value>, ApiError> {
    let text = match (req.prompt, req.messages) {
        (Some(p), None) => p.into(),
        (None, Some(messages)) => prompt::render(
            &state,
            RenderArgs {
                messages,
                tools: req.tools,
                documents: req.documents,
                add_generation_prompt: req.add_generation_prompt,
                continue_final_message: false,
                kwargs: req.chat_template_kwargs.unwrap_or_default(),
            },
        )?,
        _ => {
            return Err(ApiError::bad_request(
                Some("prompt"),
                "send exactly one of `prompt` (a string) or `messages`",
            ))
        }
    };
    let ids = encode_rendered(&state, text, "/v1/tokenize").await?;
    Ok(Json(json!({
        "tokens": ids,
        "count": ids.len(),
        "max_model_len": state.config().context_length,
    })))
}

pub async fn detokenize(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<DetokenizeRequest>,
) -> Result<Json<Value>, ApiError> {
    if let Some(i) = req.tokens.iter().position(|t| *t < 0) {
        return Err(ApiError::bad_request(
            Some(&format!("tokens[{i}]")),
            "token ids must be non-negative",
        ));
    }
    let text = decode(&state, req.tokens, "/v1/detokenize").await?;
    Ok(Json(json!({ "prompt": text, "text": text })))
}
