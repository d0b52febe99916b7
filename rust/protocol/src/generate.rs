//! sglang-native `POST /generate`: `text` or `input_ids`, `sampling_params` with sglang's names.

use serde::Deserialize;
use serde_json::Value;

use crate::error::ProtocolError;
use crate::sampling::{check_ranges, SamplingParams};

/// The request body (one prompt; sglang's batch form is not accepted).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct GenerateBody {
    pub text: Option<Value>,
    pub input_ids: Option<Value>,
    pub sampling_params: SamplingBody,
    pub stream: bool,
    pub return_logprob: bool,
    pub top_logprobs_num: Option<u32>,
    pub rid: Option<String>,
}

crate::with_sampling_fields! {
/// sglang `sampling_params`. Unknown keys are ignored, as sglang's own server does for ones it
/// does not use. SGLang's `min_new_tokens` and `sampling_seed` are the shared fields' aliases.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct SamplingBody {
    pub max_new_tokens: Option<u32>,
}
}

/// The prompt of a `/generate` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GeneratePrompt {
    Text(String),
    Ids(Vec<i64>),
}

impl GenerateBody {
    pub fn sampling(&self) -> SamplingParams {
        let s = &self.sampling_params;
        // SGLang's sampling_params has no `n` here (one prompt, one output).
        SamplingParams {
            n: None,
            structured: self.structured().ok().flatten(),
            ..s.shared_sampling(s.max_new_tokens)
        }
    }

    /// The structured output `sampling_params` asks for (its field named under `sampling_params`).
    pub fn structured(&self) -> Result<Option<crate::structured::Structured>, ProtocolError> {
        let under = |p: String| format!("sampling_params.{p}");
        match self.sampling_params.structured() {
            Ok(s) => Ok(s.map(|mut s| {
                s.param = under(s.param);
                s
            })),
            Err(mut e) => {
                e.param = e.param.map(under);
                Err(e)
            }
        }
    }

    pub fn validate(&self) -> Result<GeneratePrompt, ProtocolError> {
        self.structured()?;
        check_ranges(&self.sampling()).map_err(|mut e| {
            e.param = e.param.map(|p| match p.as_str() {
                "max_tokens" => "sampling_params.max_new_tokens".to_string(),
                _ => format!("sampling_params.{p}"),
            });
            e
        })?;
        match (&self.text, &self.input_ids) {
            (Some(Value::String(t)), None) => Ok(GeneratePrompt::Text(t.clone())),
            (Some(Value::Array(_)), None) => Err(ProtocolError::new(
                "text",
                "batched `text` is not supported: send one prompt per request",
            )),
            (Some(_), None) => Err(ProtocolError::new("text", "`text` must be a string")),
            (None, Some(Value::Array(ids))) if !ids.is_empty() => ids
                .iter()
                .map(|v| v.as_i64().filter(|t| *t >= 0))
                .collect::<Option<Vec<i64>>>()
                .map(GeneratePrompt::Ids)
                .ok_or_else(|| {
                    ProtocolError::new(
                        "input_ids",
                        "`input_ids` must be a non-empty list of non-negative token ids (batches are not supported)",
                    )
                }),
            (None, Some(_)) => Err(ProtocolError::new(
                "input_ids",
                "`input_ids` must be a non-empty list of token ids",
            )),
            (None, None) => Err(ProtocolError::new("text", "send `text` (a string) or `input_ids`")),
            (Some(_), Some(_)) => Err(ProtocolError::new(
                "input_ids",
                "send either `text` or `input_ids`, not both",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_json;

    fn check(body: &str) -> Result<GeneratePrompt, ProtocolError> {
        parse_json::<GenerateBody>(body.as_bytes())?.validate()
    }

    #[test]
    fn prompt_forms_and_errors() {
        assert_eq!(check(r#"{"text":"hi"}"#).unwrap(), GeneratePrompt::Text("hi".into()));
        assert_eq!(
            check(r#"{"input_ids":[1,2]}"#).unwrap(),
            GeneratePrompt::Ids(vec![1, 2])
        );
        assert_eq!(check(r#"{}"#).unwrap_err().param.as_deref(), Some("text"));
        assert_eq!(
            check(r#"{"text":["a","b"]}"#).unwrap_err().param.as_deref(),
            Some("text")
        );
        assert_eq!(
            check(r#"{"input_ids":[[1]]}"#).unwrap_err().param.as_deref(),
            Some("input_ids")
        );
        let e = check(r#"{"text":"x","sampling_params":{"temperature":-1}}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("sampling_params.temperature"));
        let e = check(r#"{"text":"x","sampling_params":{"max_new_tokens":"a"}}"#).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("sampling_params.max_new_tokens"));
    }
}
