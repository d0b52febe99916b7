//! Tool-call and reasoning parsers for LLM output, complete and streaming.
//!
//! Every parser is a synchronous state machine: `push(delta)` returns what can be emitted now,
//! `finish()` flushes what is held. A complete parse is `push(whole); finish()`, so streaming
//! equals complete by construction; the one exception, a tool call a stream started and that
//! never completed, is reported (`tool::Abandoned`) so a caller can set it aside. [`policy`] lists
//! every deliberate difference from peer servers and the truncation policy.
#![forbid(unsafe_code)]

mod harmony;
pub mod policy;
pub mod reasoning;
pub mod scan;
pub mod tool;

pub use reasoning::{ReasoningDelta, ReasoningFormat, ReasoningOptions, ReasoningParser};
pub use tool::{
    Abandoned, CallDelta, Forced, ToolCall, ToolCallDelta, ToolCallParser, ToolDef, ToolDelta, ToolFormat,
    ToolParseResult,
};

/// Errors of this crate.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParserError {
    /// A parser name that is not known.
    #[error("unknown {kind} parser `{name}`; valid names: {valid}")]
    UnknownParser {
        kind: &'static str,
        name: String,
        valid: String,
    },
}
