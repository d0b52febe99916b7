//! Structured output: token masks that keep what a model writes valid JSON.
//!
//! `response_format: {"type": "json_object"}` asks for a JSON object and nothing else. Asking
//! the model is not enough (a small model wraps it in a code fence, or writes prose), so at each
//! decoding step the engine removes every token that would make the output stop being a prefix
//! of a JSON document, and allows the end-of-sequence tokens only once the document is complete.
//!
//! Three small pieces, each a plain state machine:
//! - [`JsonState`]: a byte-level JSON recognizer whose whole state is a few bytes (`Copy`), so
//!   trying a token from a state costs no allocation;
//! - [`Vocab`]: every token's bytes, sorted so that tokens sharing a prefix are walked once;
//! - [`JsonMatcher`]: one per sequence; accepts the sampled tokens and gives the mask of the
//!   next step.
mod json;
mod matcher;
mod vocab;

pub use json::{JsonOptions, JsonState};
pub use matcher::JsonMatcher;
pub use vocab::Vocab;

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StructuredError {
    #[error("token {token} is outside the vocabulary of {size} tokens")]
    UnknownToken { token: u32, size: usize },
    #[error("token {token} ({text:?}) cannot continue the JSON output here")]
    Rejected { token: u32, text: String },
    #[error("end of output before the JSON document is complete")]
    Incomplete,
}
