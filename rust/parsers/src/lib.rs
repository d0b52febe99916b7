//! Tool-call and reasoning parsers for LLM output, complete and streaming.
//!
//! Every parser is a synchronous state machine: `push(delta)` returns what can be emitted now,
//! `finish()` flushes what is held. A complete parse is `push(whole); finish()`, so streaming
//! equals complete by construction, for tool calls cut off or broken too (they are partial calls
//! in both, listed in `tool::Abandoned`). [`policy`] lists every deliberate difference from peer
//! servers and the truncation policy; `docs/parsers.md` has the tables for users.
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
