//! Reasoning ("thinking") parsing: split model output into reasoning and visible content.
//!
//! One engine (`engine.rs`) driven by one declarative `Spec` per delimiter family (`spec.rs`);
//! `format.rs` names the families and maps model ids and chat templates to them; `prompt.rs`
//! reads the rendered prompt's tail to tell whether the output starts inside reasoning.
//!
//! Policies (formats.md §3 lists the delimiter families and prompt tails):
//! - Whitespace around markers is kept exactly (SMG's policy), so `reasoning + content` is the
//!   input minus the recognised markers.
//! - Once inside reasoning, output that never closes it stays reasoning (vLLM/SMG R1 behaviour for
//!   text cut off at `max_tokens`); output that never opens it stays content. Both are causal, which
//!   is what lets streaming equal complete parsing.
//! - Thinking disabled: opening markers are not recognised, everything is content; stray closing
//!   markers are dropped.
mod engine;
mod format;
mod prompt;
mod spec;

pub use format::ReasoningFormat;
pub use prompt::prompt_state;

/// Per-request facts from the prompt (compute them with [`prompt_state`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReasoningOptions {
    /// The rendered prompt ends inside an open reasoning block (the model starts by thinking).
    pub prompt_opened_reasoning: bool,
    /// The rendered prompt closed the reasoning block / thinking is disabled: everything is answer.
    pub thinking_disabled: bool,
}

/// What one `push`/`finish` produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReasoningDelta {
    pub reasoning: String,
    pub content: String,
}

impl ReasoningDelta {
    /// Nothing to send.
    pub fn is_empty(&self) -> bool {
        self.reasoning.is_empty() && self.content.is_empty()
    }

    /// Append another delta (used to accumulate a stream).
    pub fn append(&mut self, other: &ReasoningDelta) {
        self.reasoning.push_str(&other.reasoning);
        self.content.push_str(&other.content);
    }
}

/// Per-request streaming reasoning parser. Text that may be the start of a marker is held back
/// until the next `push` (or `finish`) decides it; nothing emitted is ever retracted.
#[derive(Debug, Clone)]
pub struct ReasoningParser {
    engine: engine::Engine,
}

impl ReasoningParser {
    pub fn new(format: ReasoningFormat, opts: ReasoningOptions) -> Self {
        Self {
            engine: engine::Engine::new(format, &opts),
        }
    }

    /// Feed the next piece of output.
    pub fn push(&mut self, text: &str) -> ReasoningDelta {
        let mut out = ReasoningDelta::default();
        self.engine.push(text, &mut out);
        out
    }

    /// `push`, appending to `out` instead of returning a new delta: a caller that clears and
    /// reuses one delta per stream allocates nothing per piece once its buffers have grown.
    pub fn push_into(&mut self, text: &str, out: &mut ReasoningDelta) {
        self.engine.push(text, out);
    }

    /// End of output: flush everything held back.
    pub fn finish(&mut self) -> ReasoningDelta {
        let mut out = ReasoningDelta::default();
        self.engine.finish(&mut out);
        out
    }

    /// Whether the parser is currently inside a reasoning block.
    pub fn in_reasoning(&self) -> bool {
        self.engine.in_reasoning()
    }
}

/// Parse a complete output.
pub fn parse_complete(text: &str, format: ReasoningFormat, opts: ReasoningOptions) -> ReasoningDelta {
    let mut p = ReasoningParser::new(format, opts);
    let mut d = p.push(text);
    d.append(&p.finish());
    d
}
