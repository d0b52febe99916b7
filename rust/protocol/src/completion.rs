//! OpenAI `POST /v1/completions` (legacy text completions): request, validation and wire types.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::common::{CompletionEnvelope, FinishReason, MatchedStop, StreamOptions};
use crate::error::ProtocolError;
use crate::sampling::{check_ranges, SamplingParams};

crate::with_sampling_fields! {
/// The request body. Unknown fields are ignored; wrong types are errors naming the field.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct CompletionRequest {
    pub model: Option<String>,
    /// A string, a list of strings, a list of token ids or a list of token-id lists: checked by
    /// [`CompletionRequest::validate`] so the error can say which shapes are accepted.
    pub prompt: Value,
    pub suffix: Option<String>,
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    /// OpenAI's default is 16 tokens; `None` keeps that default.
    pub max_tokens: Option<u32>,
    pub best_of: Option<u32>,
    /// Number of top alternatives per token (0..=5); any value turns logprobs on.
    pub logprobs: Option<u32>,
    pub echo: bool,
    pub user: Option<String>,
}
}

/// OpenAI's default `max_tokens` for completions.
pub const DEFAULT_MAX_TOKENS: u32 = 16;

/// The most top alternatives the completions API allows per token.
pub const MAX_LOGPROBS: u32 = 5;

/// One prompt of a (possibly batched) completion request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<i64>),
}

impl CompletionRequest {
    /// Engine sampling parameters (shared by every prompt of the batch).
    pub fn sampling(&self) -> SamplingParams {
        self.shared_sampling(Some(self.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)))
    }

    /// Validate and return the prompts in order (a batch yields one entry per prompt).
    pub fn validate(&self) -> Result<Vec<Prompt>, ProtocolError> {
        self.structured()?;
        if self.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
            return Err(ProtocolError::new(
                "suffix",
                "`suffix` (fill-in-the-middle) is not supported by this server; send the text before the gap as `prompt`",
            ));
        }
        check_ranges(&self.sampling())?;
        crate::common::check_stream_options(self.stream, self.stream_options.as_ref())?;
        let n = self.n.unwrap_or(1);
        if let Some(b) = self.best_of {
            // best_of > n needs server-side ranking by logprob, which the engine bridge does not do.
            if b != n && b != 1 {
                return Err(ProtocolError::new(
                    "best_of",
                    format!("best_of must equal n ({n}) or be 1: ranking extra candidates is not supported, got {b}"),
                ));
            }
        }
        if let Some(k) = self.logprobs {
            if k > MAX_LOGPROBS {
                return Err(ProtocolError::new(
                    "logprobs",
                    format!("logprobs must be at most {MAX_LOGPROBS}, got {k}"),
                ));
            }
        }
        parse_prompts(&self.prompt)
    }
}

fn parse_prompts(v: &Value) -> Result<Vec<Prompt>, ProtocolError> {
    const SHAPES: &str =
        "`prompt` must be a string, a list of strings, a list of token ids or a list of token-id lists";
    let token = |x: &Value| x.as_i64().filter(|t| *t >= 0);
    let prompts = match v {
        Value::String(s) => vec![Prompt::Text(s.clone())],
        Value::Array(items) if items.is_empty() => {
            return Err(ProtocolError::new("prompt", "`prompt` must not be an empty list"))
        }
        Value::Array(items) if items.iter().all(Value::is_number) => {
            let ids: Option<Vec<i64>> = items.iter().map(token).collect();
            vec![Prompt::Tokens(ids.ok_or_else(|| {
                ProtocolError::new("prompt", "token ids must be non-negative integers")
            })?)]
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(Prompt::Text(s.clone())),
                Value::Array(ids) if !ids.is_empty() => ids
                    .iter()
                    .map(token)
                    .collect::<Option<Vec<i64>>>()
                    .map(Prompt::Tokens)
                    .ok_or_else(|| {
                        ProtocolError::new(format!("prompt[{i}]"), "token ids must be non-negative integers")
                    }),
                _ => Err(ProtocolError::new(format!("prompt[{i}]"), SHAPES)),
            })
            .collect::<Result<_, _>>()?,
        Value::Null => return Err(ProtocolError::new("prompt", "missing field `prompt`")),
        _ => return Err(ProtocolError::new("prompt", SHAPES)),
    };
    Ok(prompts)
}

/// Completions-form logprobs (`tokens`, `token_logprobs`, `top_logprobs`, `text_offset`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct CompletionLogprobs {
    pub tokens: Vec<String>,
    pub token_logprobs: Vec<f32>,
    pub top_logprobs: Vec<Map<String, Value>>,
    pub text_offset: Vec<usize>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompletionChoice {
    pub index: u32,
    pub text: String,
    pub logprobs: Option<CompletionLogprobs>,
    pub finish_reason: Option<FinishReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_stop: Option<MatchedStop>,
}

/// The non-streaming response and, with one choice per chunk, each stream chunk.
pub type CompletionResponse = CompletionEnvelope<String, CompletionChoice>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_json;

    fn check(body: &str) -> Result<Vec<Prompt>, ProtocolError> {
        parse_json::<CompletionRequest>(body.as_bytes())?.validate()
    }

    #[test]
    fn prompt_shapes() {
        assert_eq!(check(r#"{"prompt":"a"}"#).unwrap(), vec![Prompt::Text("a".into())]);
        assert_eq!(check(r#"{"prompt":["a","b"]}"#).unwrap().len(), 2);
        assert_eq!(
            check(r#"{"prompt":[1,2,3]}"#).unwrap(),
            vec![Prompt::Tokens(vec![1, 2, 3])]
        );
        assert_eq!(check(r#"{"prompt":[[1],[2,3]]}"#).unwrap().len(), 2);
        assert_eq!(check(r#"{"prompt":[]}"#).unwrap_err().param.as_deref(), Some("prompt"));
        assert_eq!(
            check(r#"{"prompt":["a",3]}"#).unwrap_err().param.as_deref(),
            Some("prompt[1]")
        );
        assert_eq!(
            check(r#"{"prompt":{"x":1}}"#).unwrap_err().param.as_deref(),
            Some("prompt")
        );
        assert_eq!(
            check(r#"{"prompt":[-1]}"#).unwrap_err().param.as_deref(),
            Some("prompt")
        );
    }

    #[test]
    fn unsupported_options_are_named() {
        assert_eq!(
            check(r#"{"prompt":"a","suffix":"z"}"#).unwrap_err().param.as_deref(),
            Some("suffix")
        );
        assert_eq!(
            check(r#"{"prompt":"a","best_of":3}"#).unwrap_err().param.as_deref(),
            Some("best_of")
        );
        assert!(check(r#"{"prompt":"a","best_of":2,"n":2}"#).is_ok());
        assert_eq!(
            check(r#"{"prompt":"a","logprobs":9}"#).unwrap_err().param.as_deref(),
            Some("logprobs")
        );
        assert_eq!(
            check(r#"{"prompt":"a","max_tokens":"x"}"#)
                .unwrap_err()
                .param
                .as_deref(),
            Some("max_tokens")
        );
    }
}
