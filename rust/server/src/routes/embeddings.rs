//! `POST /v1/embeddings` (OpenAI's shape).
//!
//! With the embedding model's tokenizer in Rust the server tokenizes texts itself (no special
//! tokens: the engine adds its model's own), so an over-long input is a 400 naming it before the
//! engine sees anything, and `usage` counts what was sent. `dimensions` shortens vectors only for
//! a model trained for it (Matryoshka): cutting an ordinary model's vector loses meaning silently,
//! so there any size but the full one is a 400.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};
use smgpy_protocol::embeddings::{base64_f32, truncate_normalized, EmbeddingInput, EmbeddingRequest, EncodingFormat};
use smgpy_protocol::ErrorCode;

use crate::engine::EmbedRequest;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// The embedding model an engine serves, as the server needs to know it.
#[derive(Debug, Clone, Default)]
pub struct EmbeddingConfig {
    /// Name in answers and in `/v1/models`.
    pub model_name: String,
    /// Size of the model's vectors, when known (checked against `dimensions`).
    pub dimensions: Option<u32>,
    /// Shorter sizes the model was trained to be cut to (Matryoshka); empty for most models.
    pub matryoshka_dimensions: Vec<u32>,
    /// Most token ids one input may have, special tokens excluded (`None`: the engine checks).
    pub max_input_tokens: Option<u32>,
    /// The model's tokenizer in Rust: texts become ids here, off the engine's event loop.
    pub tokenizer: Option<smgpy_tokenizer::Tokenizer>,
}

/// Texts up to this many bytes in all are tokenized on the request's own task.
const INLINE_ENCODE_BYTES: usize = 16 * 1024;

pub async fn embeddings(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<EmbeddingRequest>,
) -> Result<Json<Value>, ApiError> {
    let cfg = state.config();
    let Some(emb) = cfg.embedding.clone() else {
        return Err(ApiError::bad_request(
            Some("model"),
            format!(
                "this server serves no embedding model (`{}` generates text): start smgpy with \
                 `--embedding-model DIR` beside it, or serve an engine that has `embed_request`",
                cfg.model_name
            ),
        ));
    };
    if state.0.health.draining() {
        return Err(ApiError::Unavailable(
            "the server is shutting down and takes no new requests; retry on another server".into(),
        ));
    }
    let valid = req.validate()?;
    // A lone string or a lone list of ids is `input` itself; otherwise inputs are `input[i]`.
    let single =
        !matches!(&req.input, Some(Value::Array(a)) if a.first().is_some_and(|x| x.is_string() || x.is_array()));
    let place = |i: usize| {
        if single {
            "input".to_string()
        } else {
            format!("input[{i}]")
        }
    };
    let cut = dimensions(&emb, valid.dimensions)?;
    let n = valid.input.len();
    let (text, input_ids) = match valid.input {
        EmbeddingInput::Texts(texts) => match emb.tokenizer.clone() {
            Some(tok) => (None, Some(encode_all(tok, texts).await?)),
            None => (Some(texts), None),
        },
        EmbeddingInput::Ids(ids) => (None, Some(ids)),
    };
    if let Some(ids) = &input_ids {
        check_ids(&emb, ids, &place)?;
    }
    let counted = input_ids
        .as_ref()
        .map(|v| v.iter().map(|x| x.len() as u64).sum::<u64>());
    let reply = state.0.engine.embed(EmbedRequest {
        rid: state.new_id("embd"),
        text,
        input_ids,
    })?;
    let out = reply
        .await
        .map_err(|_| ApiError::EngineFailed("the engine dropped this embedding request; retry it".into()))??;
    if out.rows() != n || out.dim == 0 {
        tracing::error!(
            rows = out.rows(),
            dim = out.dim,
            inputs = n,
            "embed_request answered the wrong shape"
        );
        return Err(ApiError::EngineFailed(format!(
            "the engine returned {} vectors for {n} inputs (the server log has the details)",
            out.rows()
        )));
    }
    let data: Vec<Value> = (0..n)
        .map(|i| {
            let row = out.row(i);
            let v = match cut {
                Some(d) if d < row.len() => truncate_normalized(row, d),
                _ => row.to_vec(),
            };
            let embedding = match valid.format {
                EncodingFormat::Float => json!(v),
                EncodingFormat::Base64 => Value::String(base64_f32(&v)),
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    let tokens = out.prompt_tokens.or(counted).unwrap_or(0);
    Ok(Json(json!({
        "object": "list",
        "data": data,
        "model": emb.model_name,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })))
}

/// The size vectors are cut to (`None`: as the model makes them), or a 400 when the model was
/// not trained for the size asked.
fn dimensions(emb: &EmbeddingConfig, asked: Option<u32>) -> Result<Option<usize>, ApiError> {
    let Some(d) = asked else { return Ok(None) };
    if emb.dimensions == Some(d) {
        return Ok(None);
    }
    if emb.matryoshka_dimensions.contains(&d) && emb.dimensions.is_none_or(|full| d < full) {
        return Ok(Some(d as usize));
    }
    let full = emb.dimensions.map_or("its full size".to_string(), |f| f.to_string());
    let message = if emb.matryoshka_dimensions.is_empty() {
        format!(
            "`{}` makes {full}-dimensional vectors and was not trained to be shortened (no Matryoshka \
             dimensions): leave dimensions out or set it to {full}",
            emb.model_name
        )
    } else {
        format!(
            "`{}` can shorten its {full}-dimensional vectors only to {:?}: dimensions must be one of those or {full}",
            emb.model_name, emb.matryoshka_dimensions
        )
    };
    Err(ApiError::bad_request(Some("dimensions"), message))
}

/// Token ids of each text, special tokens excluded; long batches are encoded off the async workers.
async fn encode_all(tok: smgpy_tokenizer::Tokenizer, texts: Vec<String>) -> Result<Vec<Vec<i64>>, ApiError> {
    let texts_bytes: usize = texts.iter().map(String::len).sum();
    let encode = move || {
        texts
            .iter()
            .map(|t| {
                tok.encode(t, false)
                    .map(|ids| ids.into_iter().map(i64::from).collect::<Vec<i64>>())
            })
            .collect::<Result<Vec<_>, _>>()
    };
    // A few short texts take microseconds: a thread switch would cost more than the encoding.
    let ids = if texts_bytes <= INLINE_ENCODE_BYTES {
        encode()
    } else {
        tokio::task::spawn_blocking(encode)
            .await
            .map_err(|e| ApiError::Internal(format!("tokenizer task failed: {e}")))?
    };
    ids.map_err(|e| ApiError::bad_request(Some("input"), e.to_string()))
}

/// Every input within the model's length and vocabulary.
fn check_ids(emb: &EmbeddingConfig, ids: &[Vec<i64>], place: &dyn Fn(usize) -> String) -> Result<(), ApiError> {
    let vocab = emb.tokenizer.as_ref().map(|t| t.vocab_size() as i64);
    for (i, one) in ids.iter().enumerate() {
        if let Some(max) = emb.max_input_tokens {
            if one.len() > max as usize {
                return Err(ApiError::BadRequest {
                    message: format!(
                        "{} has {} tokens, more than the {max} that `{}` reads in one input: shorten or split it",
                        place(i),
                        one.len(),
                        emb.model_name
                    ),
                    param: Some(place(i)),
                    code: Some(ErrorCode::ContextLengthExceeded),
                });
            }
        }
        if let Some(v) = vocab {
            if let Some(j) = one.iter().position(|&t| t < 0 || t >= v) {
                let at = if ids.len() == 1 && place(0) == "input" {
                    format!("input[{j}]")
                } else {
                    format!("{}[{j}]", place(i))
                };
                return Err(ApiError::bad_request(
                    Some(&at),
                    format!("token id {} is outside the vocabulary: ids must be below {v}", one[j]),
                ));
            }
        }
    }
    Ok(())
}
