//! Structured output: token masks that keep what a model writes valid JSON.
//!
//! `response_format: {"type": "json_object"}` asks for a JSON object and nothing else. Asking
//! the model is not enough (a small model wraps it in a code fence, or writes prose), so at each
//! decoding step the engine removes every token that would make the output stop being a prefix
//! of a JSON document, and allows the end-of-sequence tokens only once the document is complete.
//!
//! `response_format: {"type": "json_schema", ...}` asks for more: a document valid against the
//! schema. [`Schema`] compiles the keywords structured outputs use into a recognizer of its own.
//!
//! The pieces, each a plain state machine:
//! - [`JsonState`]: a byte-level JSON recognizer whose whole state is a few bytes (`Copy`), so
//!   trying a token from a state costs no allocation;
//! - [`Schema`] / [`SchemaState`]: the same for documents under a schema (a fixed stack of
//!   frames over a node table, with a `JsonState` for the value at the leaf);
//! - [`Vocab`]: every token's bytes, sorted so that tokens sharing a prefix are walked once;
//! - [`JsonMatcher`]: one per sequence; accepts the sampled tokens and gives the mask of the
//!   next step.
mod json;
mod matcher;
mod schema;
mod vocab;

pub use json::{JsonOptions, JsonState};
pub use matcher::JsonMatcher;
pub use schema::{Schema, SchemaError, SchemaState};
pub use vocab::Vocab;

/// A byte-level recognizer whose state is `Copy`, so masks can try tokens from it freely.
/// `Ctx` is what its steps read besides the state (a compiled schema, or nothing).
pub trait Recognizer: Copy {
    type Ctx;

    /// The state after one more byte, or `None` when it cannot come next.
    fn step(self, ctx: &Self::Ctx, b: u8) -> Option<Self>;

    /// Whether the output may end here.
    fn is_complete(&self, ctx: &Self::Ctx) -> bool;

    /// Inside a string value whose content is free: plain text (`json::plain_text`) may follow
    /// and changes nothing but the text.
    fn in_string(&self) -> bool;

    /// The state after `bytes`.
    fn feed(self, ctx: &Self::Ctx, bytes: &[u8]) -> Option<Self> {
        bytes.iter().try_fold(self, |s, &b| s.step(ctx, b))
    }
}

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
