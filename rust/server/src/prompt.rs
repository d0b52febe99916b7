//! From API request to prompt text: tool filtering by `tool_choice`, message normalisation and
//! chat-template rendering. Shared by chat completions, responses and messages.

use serde_json::{Map, Value};
use smgpy_parsers::{ReasoningOptions, ToolDef};

use smgpy_protocol::chat::{tool_name, ToolChoice};
use smgpy_template::{RenderArgs, TemplateError};

use crate::error::ApiError;
use crate::state::AppState;

/// A chat-style request reduced to what the template needs.
#[derive(Debug, Clone, Default)]
pub struct ChatPrompt {
    pub messages: Vec<Value>,
    pub tools: Option<Vec<Value>>,
    /// `documents` for retrieval-augmented templates.
    pub documents: Option<Vec<Value>>,
    pub add_generation_prompt: bool,
    pub continue_final_message: bool,
    pub kwargs: Map<String, Value>,
}

/// Tools the template sees: with a named `tool_choice` only that tool, otherwise all of them
/// (`none` still shows them to the template, as vLLM does; it only disables parsing).
pub fn tools_for_template(tools: Option<&[Value]>, choice: &ToolChoice) -> Option<Vec<Value>> {
    let tools = tools?;
    if tools.is_empty() {
        return None;
    }
    Some(match choice {
        ToolChoice::Named(n) => tools
            .iter()
            .filter(|t| tool_name(t) == Some(n.as_str()))
            .cloned()
            .collect(),
        _ => tools.to_vec(),
    })
}

/// Tools the parser accepts calls to (`None`: parsing off for this request).
pub fn tools_for_parser(tools: Option<&[Value]>, choice: &ToolChoice) -> Option<Vec<ToolDef>> {
    if *choice == ToolChoice::None {
        return None;
    }
    let defs: Vec<ToolDef> = tools?
        .iter()
        .filter_map(|t| {
            let name = tool_name(t)?;
            if let ToolChoice::Named(n) = choice {
                if n != name {
                    return None;
                }
            }
            let f = t.get("function").unwrap_or(t);
            Some(ToolDef {
                name: name.to_string(),
                parameters: f.get("parameters").cloned(),
            })
        })
        .collect();
    if defs.is_empty() {
        None
    } else {
        Some(defs)
    }
}

/// Render with the server's chat template.
pub fn render(state: &AppState, p: ChatPrompt) -> Result<String, ApiError> {
    let template = state.config().chat_template.as_ref().ok_or_else(|| {
        ApiError::bad_request(
            None,
            "this server has no chat template, so chat-style requests cannot be rendered: start it with \
             a chat template (serve_oai(..., chat_template=...) or --chat-template), or use /v1/completions",
        )
    })?;
    let messages = smgpy_template::normalize_messages(&p.messages, template.info());
    let tools = p.tools.map(|t| smgpy_template::normalize_tools(&t));
    let args = RenderArgs {
        messages,
        tools,
        documents: p.documents,
        add_generation_prompt: p.add_generation_prompt,
        continue_final_message: p.continue_final_message,
        kwargs: p.kwargs,
    };
    template.render(&args).map_err(|e| match e {
        TemplateError::Raised { message } => ApiError::BadRequest {
            message,
            param: Some("messages".into()),
            code: None,
        },
        other => ApiError::bad_request(
            Some("messages"),
            format!("the chat template cannot render this request: {other}"),
        ),
    })
}

/// Reasoning facts of a rendered prompt (does the model start inside a reasoning block?).
pub fn reasoning_options(state: &AppState, prompt: &str) -> Option<(smgpy_parsers::ReasoningFormat, ReasoningOptions)> {
    let f = state.config().reasoning_format?;
    Some((f, smgpy_parsers::reasoning::prompt_state(f, prompt)))
}
