//! Reasoning ("thinking") parsing. PLACEHOLDER interface: the real implementation replaces the bodies.
use crate::ParserError;
use std::str::FromStr;

/// A reasoning delimiter family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReasoningFormat {
    /// `<think>...</think>`, opening tag may be implied by the prompt (DeepSeek-R1).
    DeepseekR1,
}

impl ReasoningFormat {
    pub const ALL: &'static [ReasoningFormat] = &[ReasoningFormat::DeepseekR1];
    pub fn name(self) -> &'static str {
        match self {
            ReasoningFormat::DeepseekR1 => "deepseek_r1",
        }
    }
    pub fn for_model(_model: &str) -> Option<ReasoningFormat> {
        None
    }
    pub fn from_chat_template(_template: &str) -> Option<ReasoningFormat> {
        None
    }
}

impl FromStr for ReasoningFormat {
    type Err = ParserError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "deepseek_r1" | "deepseek-r1" => Ok(ReasoningFormat::DeepseekR1),
            _ => Err(ParserError::UnknownParser {
                kind: "reasoning",
                name: s.to_string(),
                valid: ReasoningFormat::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", "),
            }),
        }
    }
}

/// Per-request facts from the prompt.
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

/// Per-request streaming reasoning parser.
#[derive(Debug, Clone)]
pub struct ReasoningParser {
    #[allow(dead_code)]
    format: ReasoningFormat,
}

impl ReasoningParser {
    pub fn new(format: ReasoningFormat, _opts: ReasoningOptions) -> Self {
        Self { format }
    }
    pub fn push(&mut self, text: &str) -> ReasoningDelta {
        ReasoningDelta { reasoning: String::new(), content: text.to_string() }
    }
    pub fn finish(&mut self) -> ReasoningDelta {
        ReasoningDelta::default()
    }
}

/// Parse a complete output.
pub fn parse_complete(text: &str, format: ReasoningFormat, opts: ReasoningOptions) -> ReasoningDelta {
    let mut p = ReasoningParser::new(format, opts);
    let mut d = p.push(text);
    let e = p.finish();
    d.reasoning.push_str(&e.reasoning);
    d.content.push_str(&e.content);
    d
}
