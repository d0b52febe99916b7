//! From API request to prompt text: tool filtering by `tool_choice`, message normalisation and
//! chat-template rendering. Shared by chat completions, responses and messages.

use serde_json::{Map, Value};
use smgpy_parsers::{Forced, ReasoningOptions, ToolDef, ToolFormat};

use smgpy_protocol::chat::{tool_name, ToolChoice};
use smgpy_template::{RenderArgs, TemplateError};

use crate::error::ApiError;
use crate::pipeline::ToolStage;
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

/// How one request's tool calls are read, and what its output is held to.
#[derive(Debug, Clone, Default)]
pub struct ToolPlan {
    pub stage: Option<ToolStage>,
    /// With `tool_choice` `required` (Anthropic `any`) or a named function, the JSON Schema the
    /// output must follow, so that the model does call a tool.
    pub schema: Option<Value>,
}

/// The tool-call reading of a request: with `auto`, the server's tool parser (if it has one);
/// with `required`, the output is held to a JSON array of `{"name", "parameters"}` objects, each
/// naming a declared tool and following its parameters schema, read as those calls; with a
/// named function, the output is held to that function's parameters schema and read as its
/// arguments. This is how vLLM and SGLang force tool calls; it needs an engine that enforces
/// `json_schema` (smgpy's MLX engine does). Output that does not open with the forced JSON (an
/// engine that ignores the schema) is read with the server's tool parser, if it has one.
/// `tool_format`: the server's tool parser. `parallel`: more than one call allowed
/// (`parallel_tool_calls`).
pub fn tool_plan(
    tool_format: Option<ToolFormat>,
    tools: Option<&[Value]>,
    choice: &ToolChoice,
    parallel: bool,
) -> ToolPlan {
    let Some(defs) = tools_for_parser(tools, choice) else {
        return ToolPlan::default();
    };
    // Without a parser of its own, output that is not the forced JSON is read as JSON calls.
    let fallback = tool_format.unwrap_or(ToolFormat::Json);
    match choice {
        ToolChoice::Required => {
            // One object per tool, tagged by its name, so each call's parameters follow its own
            // tool's schema. A parameters schema the MLX engine cannot enforce becomes any object
            // (rather than failing the whole list back to free JSON).
            let calls: Vec<Value> = defs
                .iter()
                .map(|d| {
                    let parameters = d
                        .parameters
                        .clone()
                        .filter(|p| smgpy_structured::Schema::compile(p).is_ok())
                        .unwrap_or_else(|| serde_json::json!({"type": "object"}));
                    serde_json::json!({
                        "type": "object",
                        "properties": {"name": {"const": d.name}, "parameters": parameters},
                        "required": ["name", "parameters"],
                    })
                })
                .collect();
            let items = match <[Value; 1]>::try_from(calls) {
                Ok([one]) => one,
                Err(calls) => serde_json::json!({"anyOf": calls}),
            };
            let mut array = serde_json::json!({"type": "array", "minItems": 1, "items": items});
            if !parallel {
                array["maxItems"] = Value::from(1);
            }
            ToolPlan {
                stage: Some(ToolStage {
                    format: fallback,
                    tools: Some(defs),
                    forced: Some(Forced::List),
                    single: false,
                }),
                schema: Some(array),
            }
        }
        ToolChoice::Named(name) => {
            let schema = defs
                .first()
                .and_then(|d| d.parameters.clone())
                .filter(Value::is_object)
                .unwrap_or_else(|| serde_json::json!({"type": "object"}));
            ToolPlan {
                stage: Some(ToolStage {
                    format: fallback,
                    tools: Some(defs),
                    forced: Some(Forced::Call(name.clone())),
                    single: false,
                }),
                schema: Some(schema),
            }
        }
        ToolChoice::Auto | ToolChoice::None => ToolPlan {
            stage: tool_format.map(|format| ToolStage {
                format,
                tools: Some(defs),
                forced: None,
                single: !parallel,
            }),
            schema: None,
        },
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<Value> {
        vec![
            json!({"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}),
            json!({"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}}}),
            json!({"type": "function", "function": {"name": "c"}}),
        ]
    }

    #[test]
    fn auto_and_none_force_nothing() {
        let t = tools();
        let auto = tool_plan(Some(ToolFormat::Hermes), Some(&t), &ToolChoice::Auto, true);
        assert!(auto.schema.is_none());
        let stage = auto.stage.unwrap();
        assert_eq!(
            (stage.format, stage.forced, stage.tools.unwrap().len()),
            (ToolFormat::Hermes, None, 3)
        );
        assert!(tool_plan(None, Some(&t), &ToolChoice::Auto, true).stage.is_none());
        let none = tool_plan(Some(ToolFormat::Hermes), Some(&t), &ToolChoice::None, true);
        assert!(none.stage.is_none() && none.schema.is_none());
    }

    #[test]
    fn required_is_a_list_of_calls_tagged_by_name() {
        let t = tools();
        let plan = tool_plan(None, Some(&t), &ToolChoice::Required, false);
        let stage = plan.stage.unwrap();
        assert_eq!((stage.format, stage.forced), (ToolFormat::Json, Some(Forced::List)));
        let schema = plan.schema.unwrap();
        assert_eq!(schema["type"], "array");
        assert_eq!(
            (schema["minItems"].clone(), schema["maxItems"].clone()),
            (json!(1), json!(1))
        );
        let calls = schema["items"]["anyOf"].as_array().unwrap();
        let names: Vec<&Value> = calls.iter().map(|c| &c["properties"]["name"]["const"]).collect();
        assert_eq!(names, [&json!("a"), &json!("b"), &json!("c")]);
        assert_eq!(
            calls[0]["properties"]["parameters"]["properties"]["x"]["type"],
            "integer"
        );
        // `format` cannot be enforced, and a tool without parameters takes any object.
        assert_eq!(calls[1]["properties"]["parameters"], json!({"type": "object"}));
        assert_eq!(calls[2]["properties"]["parameters"], json!({"type": "object"}));
        // The whole list is one schema the MLX engine enforces.
        smgpy_structured::Schema::compile(&schema).unwrap();
        let parallel = tool_plan(None, Some(&t), &ToolChoice::Required, true).schema.unwrap();
        assert!(parallel.get("maxItems").is_none());
        // One tool: its call object itself.
        let one = tool_plan(None, Some(&t[..1]), &ToolChoice::Required, true)
            .schema
            .unwrap();
        assert_eq!(one["items"]["properties"]["name"]["const"], "a");
    }

    #[test]
    fn a_named_function_is_its_parameters_schema() {
        let t = tools();
        let plan = tool_plan(Some(ToolFormat::Hermes), Some(&t), &ToolChoice::Named("a".into()), true);
        let stage = plan.stage.unwrap();
        assert_eq!(stage.format, ToolFormat::Hermes);
        assert_eq!(stage.forced, Some(Forced::Call("a".into())));
        assert_eq!(stage.tools.unwrap().len(), 1);
        assert_eq!(plan.schema.unwrap()["properties"]["x"]["type"], "integer");
        let bare = tool_plan(None, Some(&t), &ToolChoice::Named("c".into()), true);
        assert_eq!(bare.schema.unwrap(), json!({"type": "object"}));
    }
}
