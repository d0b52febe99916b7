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
//! - Thinking disabled: reasoning markers are not recognised, everything is content, verbatim.
//! - Once reasoning has ended, later opening and closing markers are content, verbatim (vLLM,
//!   SGLang and SMG split at the first close); only Gemma 4 cycles through several thought
//!   channels. Inside reasoning, a nested opening marker is reasoning text.
//! - A tool call opened inside reasoning (Kimi's section or call marker, `<tool_call>`, DeepSeek's
//!   section, Hunyuan's `<tool_calls>`) ends it: the marker and the call stay in the content for the
//!   tool parser, as SGLang's detectors hand them over.
//! - gpt-oss Harmony has a machine of its own (`harmony.rs`): a message's header decides where its
//!   text goes, and tool calls reach the content only for a tool parser behind
//!   ([`ReasoningParser::keep_tool_calls`]).
mod engine;
mod format;
mod harmony;
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
    /// The caller knows the prompt did not open reasoning: a format whose template usually
    /// opens it (DeepSeek-R1 style, `implied_open`) then starts in the content, and only a
    /// `<think>` the model writes opens reasoning.
    pub reasoning_not_started: bool,
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
    engine: Engine,
}

/// The engine of a format: marker tables for every family but Harmony, whose headers are not
/// fixed strings and get a message-level machine of their own.
#[derive(Debug, Clone)]
enum Engine {
    Table(engine::Engine),
    Harmony(harmony::Harmony),
}

impl ReasoningParser {
    pub fn new(format: ReasoningFormat, opts: ReasoningOptions) -> Self {
        let engine = match format {
            ReasoningFormat::OpenaiGptoss => Engine::Harmony(harmony::Harmony::new(
                opts.prompt_opened_reasoning,
                opts.thinking_disabled,
            )),
            _ => Engine::Table(engine::Engine::new(format, &opts)),
        };
        Self { engine }
    }

    /// Hand tool calls over in the content for a tool-call parser that runs next (`keep`), or
    /// drop them (the default). Only gpt-oss Harmony separates a call from the text around it
    /// (a message of its own, addressed `to=functions.NAME`): without a tool-call parser behind
    /// it, such a message is shown to no one, as vllm-mlx's Harmony reasoning parser does. The
    /// other formats' tool markup is content either way (vLLM's and SGLang's reasoning parsers
    /// leave a tool section that ends reasoning in the content).
    pub fn keep_tool_calls(mut self, keep: bool) -> Self {
        if let Engine::Harmony(h) = &mut self.engine {
            h.keep_calls(keep);
        }
        self
    }

    /// Feed the next piece of output.
    pub fn push(&mut self, text: &str) -> ReasoningDelta {
        let mut out = ReasoningDelta::default();
        self.push_into(text, &mut out);
        out
    }

    /// `push`, appending to `out` instead of returning a new delta: a caller that clears and
    /// reuses one delta per stream allocates nothing per piece once its buffers have grown.
    pub fn push_into(&mut self, text: &str, out: &mut ReasoningDelta) {
        match &mut self.engine {
            Engine::Table(e) => e.push(text, out),
            Engine::Harmony(h) => h.push(text, out),
        }
    }

    /// End of output: flush everything held back.
    pub fn finish(&mut self) -> ReasoningDelta {
        let mut out = ReasoningDelta::default();
        match &mut self.engine {
            Engine::Table(e) => e.finish(&mut out),
            Engine::Harmony(h) => h.finish(&mut out),
        }
        out
    }

    /// Whether the parser is currently inside a reasoning block.
    pub fn in_reasoning(&self) -> bool {
        match &self.engine {
            Engine::Table(e) => e.in_reasoning(),
            Engine::Harmony(h) => h.in_reasoning(),
        }
    }
}

/// Parse a complete output.
pub fn parse_complete(text: &str, format: ReasoningFormat, opts: ReasoningOptions) -> ReasoningDelta {
    let mut p = ReasoningParser::new(format, opts);
    let mut d = p.push(text);
    d.append(&p.finish());
    d
}
