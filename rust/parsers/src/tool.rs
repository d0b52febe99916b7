//! Tool-call parsing. PLACEHOLDER interface: the real implementation replaces the bodies.
use crate::ParserError;
use std::str::FromStr;

/// A tool-call output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolFormat {
    /// Hermes / Qwen 2.5 `<tool_call>{json}</tool_call>`.
    Hermes,
}

impl ToolFormat {
    /// Every format, in a stable order.
    pub const ALL: &'static [ToolFormat] = &[ToolFormat::Hermes];

    /// Canonical (vLLM) name.
    pub fn name(self) -> &'static str {
        match self {
            ToolFormat::Hermes => "hermes",
        }
    }

    /// Pick a format from a model id such as `Qwen/Qwen3-Coder-30B` (case-insensitive).
    pub fn for_model(_model: &str) -> Option<ToolFormat> {
        None
    }

    /// Guess a format from a chat template's source.
    pub fn from_chat_template(_template: &str) -> Option<ToolFormat> {
        None
    }
}

impl FromStr for ToolFormat {
    type Err = ParserError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "hermes" | "qwen" | "qwen25" => Ok(ToolFormat::Hermes),
            _ => Err(ParserError::UnknownParser {
                kind: "tool-call",
                name: s.to_string(),
                valid: ToolFormat::ALL.iter().map(|f| f.name()).collect::<Vec<_>>().join(", "),
            }),
        }
    }
}

/// What a parser needs to know of a declared tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    /// The JSON schema of its parameters (used to type XML-style parameters), if given.
    pub parameters: Option<serde_json::Value>,
}

/// One complete tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// Id given by the model's format (Kimi, Mistral), if any.
    pub id: Option<String>,
    pub name: String,
    /// Compact JSON object text.
    pub arguments: String,
}

/// Result of a complete parse.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolParseResult {
    pub normal_text: String,
    pub calls: Vec<ToolCall>,
}

/// One piece of a streamed tool call. The first delta of a call carries `name` (and `id`
/// when the format gives one); later ones only `arguments` fragments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// What one `push` / `finish` produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolDelta {
    pub normal_text: String,
    pub calls: Vec<ToolCallDelta>,
}

/// Per-request streaming tool-call parser.
#[derive(Debug, Clone)]
pub struct ToolCallParser {
    #[allow(dead_code)]
    format: ToolFormat,
    #[allow(dead_code)]
    tools: Option<Vec<ToolDef>>,
}

impl ToolCallParser {
    /// `tools`: when given, calls to undeclared names stay text.
    pub fn new(format: ToolFormat, tools: Option<Vec<ToolDef>>) -> Self {
        Self { format, tools }
    }
    /// Feed a text delta.
    pub fn push(&mut self, text: &str) -> ToolDelta {
        ToolDelta { normal_text: text.to_string(), calls: Vec::new() }
    }
    /// End of output: flush held text.
    pub fn finish(&mut self) -> ToolDelta {
        ToolDelta::default()
    }
}

/// Parse a complete output.
pub fn parse_complete(text: &str, format: ToolFormat, tools: Option<Vec<ToolDef>>) -> ToolParseResult {
    let mut p = ToolCallParser::new(format, tools);
    let mut d = p.push(text);
    let e = p.finish();
    d.normal_text.push_str(&e.normal_text);
    d.calls.extend(e.calls);
    let mut calls: Vec<ToolCall> = Vec::new();
    for c in d.calls {
        if let Some(call) = calls.get_mut(c.index) {
            call.arguments.push_str(&c.arguments);
        } else {
            calls.push(ToolCall { id: c.id, name: c.name.unwrap_or_default(), arguments: c.arguments });
        }
    }
    ToolParseResult { normal_text: d.normal_text, calls }
}
