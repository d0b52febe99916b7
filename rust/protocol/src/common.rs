//! Small types shared by several endpoints.

use serde::{Deserialize, Serialize};

/// `stop`: a string or a list of strings.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum StopField {
    One(String),
    Many(Vec<String>),
}

impl StopField {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StopField::One(s) => vec![s],
            StopField::Many(v) => v,
        }
    }
}

/// Why a choice ended normally. Serialized as OpenAI's `finish_reason`; the other APIs name it their own
/// way from this one value (Anthropic's `stop_reason`, sglang's finish object, Responses' status).
/// An engine abort is not here: it never reaches a client as a normal finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// End of turn, a stop token or a stop string.
    Stop,
    /// `max_tokens` or the context length.
    Length,
    /// The model ended its turn after calling tools.
    ToolCalls,
}

/// Token usage, OpenAI chat/completions shape.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
    pub prompt_tokens_details: PromptTokensDetails,
    /// Present when the output had reasoning (OpenAI's shape).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct CompletionTokensDetails {
    pub reasoning_tokens: u32,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct PromptTokensDetails {
    pub cached_tokens: u32,
}

impl Usage {
    pub fn new(prompt_tokens: u32, completion_tokens: u32, cached_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
            prompt_tokens_details: PromptTokensDetails { cached_tokens },
            completion_tokens_details: None,
        }
    }

    /// With the number of completion tokens spent on reasoning (shown when not zero).
    pub fn with_reasoning(mut self, reasoning_tokens: u32) -> Self {
        if reasoning_tokens > 0 {
            self.completion_tokens_details = Some(CompletionTokensDetails { reasoning_tokens });
        }
        self
    }
}

/// The envelope of an OpenAI chat or text completion, whole or one stream chunk. `S` is the
/// string type (owned in a response, borrowed in a chunk, which is written once per token) and `C`
/// the choice; `usage` is left out when `None` (a chunk other than the usage one).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CompletionEnvelope<S, C> {
    pub id: S,
    pub object: &'static str,
    pub created: u64,
    pub model: S,
    pub system_fingerprint: S,
    pub choices: Vec<C>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `stream_options`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// What `matched_stop` reports: the user's stop string, or the stop token id.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum MatchedStop {
    Text(String),
    Token(i64),
}

/// One token's log-probability (OpenAI chat `logprobs.content[]`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TokenLogprob {
    pub token: String,
    pub logprob: f32,
    pub bytes: Vec<u8>,
    pub top_logprobs: Vec<TopLogprob>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TopLogprob {
    pub token: String,
    pub logprob: f32,
    pub bytes: Vec<u8>,
}

/// An assistant chat message as chat templates read it: `content`, then `reasoning_content`
/// and `tool_calls` only when there are any.
pub fn assistant_message(content: String, reasoning: String, calls: Vec<serde_json::Value>) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("role".into(), "assistant".into());
    m.insert("content".into(), content.into());
    if !reasoning.is_empty() {
        m.insert("reasoning_content".into(), reasoning.into());
    }
    if !calls.is_empty() {
        m.insert("tool_calls".into(), serde_json::Value::Array(calls));
    }
    serde_json::Value::Object(m)
}

/// `stream_options` only means something for a stream (OpenAI answers 400 otherwise).
pub fn check_stream_options(stream: bool, options: Option<&StreamOptions>) -> Result<(), crate::ProtocolError> {
    if options.is_some() && !stream {
        return Err(crate::ProtocolError::new(
            "stream_options",
            "`stream_options` is only allowed with `stream: true`",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_reasons_serialize_as_openai_names_them() {
        let names: Vec<String> = [FinishReason::Stop, FinishReason::Length, FinishReason::ToolCalls]
            .iter()
            .map(|r| serde_json::to_string(r).unwrap())
            .collect();
        assert_eq!(names, [r#""stop""#, r#""length""#, r#""tool_calls""#]);
    }
}
