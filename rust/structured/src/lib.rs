//! Structured output: token masks that hold what a model writes to a JSON Schema, a regular
//! expression, a Lark grammar or a model's own tool-call syntax.
//!
//! The masks come from [llguidance](https://crates.io/crates/llguidance): it compiles JSON
//! Schema (nearly all of it: `pattern`, `format`, bounds, `allOf`, `prefixItems`, local and
//! recursive `$ref`, ...), regular expressions and Lark grammars, and walks a token trie per
//! step with precomputed slices, so a mask costs microseconds even for a 150k-token vocabulary.
//! smgpy's own JSON-Schema recognizer, which it replaces, was deleted.
//!
//! What this crate keeps is what llguidance does not do:
//! - [`Source`]: the engine-facing request keys (`json_schema`, `regex`, `ebnf`,
//!   `structural_tag`, SGLang's names) turned into one llguidance grammar, with smgpy's JSON
//!   options (bounded whitespace) and refusals that name the problem (a GBNF grammar, a schema
//!   that is not JSON);
//! - [`structural_tag`]: vLLM's / SGLang's structural tags (both the `structures`/`triggers`
//!   form and xgrammar's `format` form) written as Lark with lazy triggers: llguidance only
//!   ships that conversion in Python;
//! - [`tools`]: grammars for forced and automatic tool calls in a model's own tool-call format
//!   (Hermes `<tool_call>` JSON, Llama 3 JSON, Mistral `[TOOL_CALLS]`, Qwen3-Coder XML, ...),
//!   built from `smgpy-parsers`' `ToolFormat` so that the server's tool parser reads the
//!   constrained output as it reads free output: llguidance has no notion of tool formats;
//! - [`Vocabulary`]: a model's token bytes as an llguidance token trie, built once per model
//!   from bytes the engine already has (no tokenizer library), with a cache of compiled
//!   grammars keyed by a hash of the request's constraint;
//! - [`GrammarMatcher`]: one sequence's state, with the two traps of llguidance's `Matcher`
//!   handled (an end token after the grammar stopped, and asking a stopped matcher for a mask,
//!   both put it in an error state);
//! - [`refs`]: local `$ref`s of a tool's parameters rewritten where the schema is embedded in
//!   a forced-call schema, so that `#/$defs/...` still names the tool's own definitions;
//! - [`check`]: the server's compile check before an engine sees a request, against a small
//!   byte-level vocabulary (a grammar's errors do not depend on the model's tokens), cached.
#![forbid(unsafe_code)]

mod cache;
pub mod check;
mod matcher;
pub mod refs;
mod source;
pub mod structural_tag;
pub mod tools;
mod vocab;

pub use check::check;
pub use matcher::GrammarMatcher;
pub use source::{Source, WHITESPACE};
pub use vocab::{Grammar, Vocabulary};

/// Why a constraint cannot be enforced, or a matcher refused a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StructuredError {
    /// The constraint does not compile: the message is llguidance's (it names the keyword or
    /// the position), prefixed with what was being compiled.
    #[error("{what} cannot be enforced: {message}")]
    Invalid { what: &'static str, message: String },
    /// A JSON text (schema, structural tag) that is not JSON.
    #[error("{what} is not valid JSON: {message}")]
    NotJson { what: &'static str, message: String },
    /// A grammar in GBNF / EBNF `::=` syntax: only Lark is compiled.
    #[error(
        "the grammar is in GBNF (`::=`) syntax; write it in Lark syntax (llguidance's dialect: \
         `start: ...`, `%json {{...}}`, `/regex/`)"
    )]
    Gbnf,
    /// The vocabulary cannot be built.
    #[error("cannot build the vocabulary: {0}")]
    Vocabulary(String),
    /// A token outside the mask (the matcher is left unusable; stop constraining this sequence).
    #[error("token {token} does not continue the constrained output: {message}")]
    Rejected { token: u32, message: String },
    /// llguidance failed while computing a mask (grammar too complex for its limits, ...).
    #[error("the constrained output cannot continue: {0}")]
    Matcher(String),
}
