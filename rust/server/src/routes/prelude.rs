//! The prelude the chat-style routes share (Chat Completions, Anthropic Messages, Responses).
//!
//! Each route turns its own request shape into a conversation and renders it (their message
//! forms differ); from the rendered prompt on, the steps are the same and live here once: the
//! tool plan and the constraint that holds forced calls, the output pipeline's spec (stop
//! strings, reasoning, the tool stage) and the prompt as the engine takes it (text, or token
//! ids tokenized in Rust). A route then only names its fields for errors and builds its
//! [`GenerateRequest`](crate::engine::GenerateRequest).

use serde_json::Value;
use smgpy_protocol::chat::ToolChoice;
use smgpy_protocol::SamplingParams;

use crate::engine::GenerateRequest;
use crate::error::ApiError;
use crate::literal::Rendered;
use crate::pipeline::{stop_set, PipelineSpec};
use crate::prompt::{self, ToolRequest};
use crate::state::AppState;

/// A chat-style request after rendering.
pub struct Turn<'a> {
    pub rendered: Rendered,
    pub sampling: SamplingParams,
    /// Declared tools, in OpenAI's nested chat form.
    pub tools: Option<&'a [Value]>,
    pub choice: &'a ToolChoice,
    /// More than one call allowed (`parallel_tool_calls`, Anthropic's
    /// `disable_parallel_tool_use` negated).
    pub parallel: bool,
    /// The request field of tool `i`'s parameters schema, for errors.
    pub tool_param: fn(usize) -> String,
    /// The request field of the stop strings, for errors.
    pub stop_param: &'static str,
    /// Keep a matched stop string in the output (vLLM's `include_stop_str_in_output`).
    pub include_stop: bool,
    /// Split a reasoning block off the answer (when the server has a reasoning parser).
    pub separate_reasoning: bool,
    /// The request holds images: its prompt goes to the engine as text, since the engine's
    /// processor expands each image placeholder into as many tokens as that image needs.
    pub has_images: bool,
}

/// What the engine is sent, and how its output is read.
pub struct Prepared {
    /// The prompt as text, when the engine tokenizes it itself (always, for a request with images).
    pub text: Option<String>,
    /// The prompt as token ids, when the server tokenized it.
    pub input_ids: Option<Vec<i64>>,
    /// The request's sampling, with a forced call's constraint in place.
    pub sampling: SamplingParams,
    pub spec: PipelineSpec,
}

impl Prepared {
    /// The engine request (the prompt and sampling made here, the request's id, images and
    /// stream flag; a route sets what else it has, e.g. logprobs), and the pipeline's spec.
    pub fn into_request(self, rid: String, image_data: Vec<String>, stream: bool) -> (GenerateRequest, PipelineSpec) {
        let req = GenerateRequest {
            rid,
            text: self.text,
            input_ids: self.input_ids,
            image_data,
            sampling: self.sampling,
            stream,
            ..GenerateRequest::default()
        };
        (req, self.spec)
    }
}

/// Plan the tool calls, build the pipeline's spec and make the engine's prompt.
pub async fn prepare(state: &AppState, turn: Turn<'_>) -> Result<Prepared, ApiError> {
    let Turn {
        rendered,
        mut sampling,
        tools,
        choice,
        parallel,
        tool_param,
        stop_param,
        include_stop,
        separate_reasoning,
        has_images,
    } = turn;
    let plan = prompt::tool_plan(
        state,
        ToolRequest {
            tools,
            choice,
            parallel,
            has_constraint: sampling.structured.is_some(),
            param: tool_param,
        },
    )?;
    if let Some(c) = plan.constraint {
        sampling.force(c, "tools");
    }
    let spec = PipelineSpec {
        stops: stop_set(&sampling.stop, stop_param)?,
        include_stop,
        // A forced call's output is held to tool calls from its first token: no reasoning block.
        reasoning: if separate_reasoning && !plan.forced {
            prompt::reasoning_options(state, &rendered.text)
        } else {
            None
        },
        tools: plan.stage,
    };
    let (text, input_ids) = if has_images {
        (Some(rendered.text), None)
    } else {
        super::prompt_of(state, rendered).await?
    };
    Ok(Prepared {
        text,
        input_ids,
        sampling,
        spec,
    })
}
