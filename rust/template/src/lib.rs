//! HuggingFace chat templates rendered with minijinja, matching transformers' `apply_chat_template`.
//! PLACEHOLDER interface: the real implementation replaces the bodies.
#![forbid(unsafe_code)]

use serde_json::{Map, Value};
use std::path::Path;

/// Errors of template loading and rendering.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The template called `raise_exception(message)`: the caller's input is not supported.
    #[error("{message}")]
    Raised { message: String },
    /// The template source does not compile.
    #[error("chat template syntax error in {name} line {line}: {reason}")]
    Syntax { name: String, line: usize, reason: String },
    /// Rendering failed for another reason.
    #[error("chat template rendering failed: {reason}")]
    Render { reason: String },
    /// No template could be found in a model directory.
    #[error("no chat template found in {dir}: looked for chat_template.jinja, chat_template.json and tokenizer_config.json")]
    NotFound { dir: String },
    /// A file could not be read or parsed.
    #[error("cannot read {path}: {reason}")]
    Io { path: String, reason: String },
}

/// Everything a render takes besides the template.
#[derive(Debug, Clone, Default)]
pub struct RenderArgs {
    pub messages: Vec<Value>,
    pub tools: Option<Vec<Value>>,
    pub documents: Option<Vec<Value>>,
    pub add_generation_prompt: bool,
    pub continue_final_message: bool,
    /// Extra template variables (`chat_template_kwargs`, e.g. `enable_thinking`).
    pub kwargs: Map<String, Value>,
}

/// A compiled chat template plus the special tokens it is rendered with.
#[derive(Debug, Clone)]
pub struct ChatTemplate {
    source: String,
    special_tokens: Map<String, Value>,
}

impl ChatTemplate {
    /// Compile `source`; `special_tokens` holds `bos_token`, `eos_token`, ... as strings.
    pub fn new(source: &str, special_tokens: Map<String, Value>) -> Result<Self, TemplateError> {
        Ok(Self { source: source.to_string(), special_tokens })
    }
    /// Find and load the template of a model directory, in transformers' order.
    pub fn from_model_dir(dir: &Path) -> Result<Self, TemplateError> {
        Err(TemplateError::NotFound { dir: dir.display().to_string() })
    }
    /// The template source.
    pub fn source(&self) -> &str {
        &self.source
    }
    /// Special tokens this template is rendered with.
    pub fn special_tokens(&self) -> &Map<String, Value> {
        &self.special_tokens
    }
    /// Render, as transformers' `apply_chat_template(..., tokenize=False)`.
    pub fn render(&self, args: &RenderArgs) -> Result<String, TemplateError> {
        let mut out = String::new();
        for m in &args.messages {
            out.push_str(m.get("content").and_then(Value::as_str).unwrap_or_default());
            out.push('\n');
        }
        Ok(out)
    }
}
