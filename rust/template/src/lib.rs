//! HuggingFace chat templates rendered with minijinja, byte-identical to transformers 5.x
//! `apply_chat_template(..., tokenize=False)`.
//!
//! Rendering: templates are compiled by minijinja (the authority) and, where their constructs allow, also
//! lowered for a fast renderer (`fast/`) that reads the input in place from a flat [`Doc`]. A render the
//! fast renderer does not fully implement is handed to minijinja, so output and errors are always
//! minijinja's; the fast renderer only makes the common case faster.
//!
//! Two layers are kept apart:
//! * [`ChatTemplate::render`] is faithful: same `messages`, `tools` and kwargs in, same text out as
//!   transformers (None-valued message keys dropped, reasoning fields aliased, `tools` passed as `None`).
//! * [`normalize_messages`] / [`normalize_tools`] reshape what real API clients send (string tool arguments,
//!   content-part arrays, flat Responses-API tools) into what the template expects, as vLLM and SGLang do.
#![forbid(unsafe_code)]

mod chat_template;
mod clock;
mod dict;
mod discover;
mod doc;
mod environment;
mod fast;
mod filters;
mod generators;
mod host;
mod inspect;
mod json;
mod markup;
mod methods;
mod none;
mod normalize;
mod printable;
mod pyrepr;
mod source;
mod tuple;
mod value;

pub use chat_template::ChatTemplate;
#[doc(hidden)]
pub use chat_template::{Renderer, FAST_PATH_NOT_TAKEN};
pub use clock::DateTime;
pub use doc::{Doc, Slot, TooLarge};
pub use host::{DocRenderArgs, HostRenderArgs, HostValue};
pub use inspect::TemplateInfo;
pub use normalize::{normalize_messages, normalize_tools};

use serde_json::{Map, Value};

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
    #[error(
        "no chat template found in {dir}: looked for chat_template.jinja, chat_template.json and tokenizer_config.json"
    )]
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
