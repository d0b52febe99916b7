//! From API request to prompt text: tool filtering by `tool_choice`, message normalisation and
//! chat-template rendering. Shared by chat completions, responses and messages.

use serde_json::{json, Value};
use smgpy_parsers::{Forced, ReasoningOptions, ToolDef, ToolFormat};
use smgpy_protocol::structured::Constraint;
use smgpy_structured::refs::relocate_refs;
use smgpy_structured::tools::{self, Mode, ToolSpec};
use smgpy_structured::{StructuredError, WHITESPACE};

use smgpy_protocol::chat::{tool_name, ToolChoice};
use smgpy_template::{RenderArgs, TemplateError};

use crate::error::ApiError;
use crate::literal::{Masker, Rendered};
use crate::pipeline::ToolStage;
use crate::state::AppState;

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
    /// What the output is held to so that the model does call a tool (`tool_choice`
    /// `required` / Anthropic `any`, or a named function), or so that the calls it opens under
    /// `auto` follow their tools' schemas.
    pub constraint: Option<Constraint>,
    /// The output is held to tool calls from its first token (so it has no reasoning block).
    pub forced: bool,
}

/// What `tool_plan` needs to know about a request.
#[derive(Debug, Clone, Copy)]
pub struct ToolRequest<'a> {
    /// Declared tools, in OpenAI's nested chat form.
    pub tools: Option<&'a [Value]>,
    pub choice: &'a ToolChoice,
    /// More than one call allowed (`parallel_tool_calls`).
    pub parallel: bool,
    /// The client asked for a structured output of its own (`response_format`...): under
    /// `auto` that constraint stays, and the calls are not constrained.
    pub has_constraint: bool,
    /// The request field of tool `i`'s parameters schema, for errors.
    pub param: fn(usize) -> String,
}

/// The tool-call reading of a request and the constraint that goes with it.
///
/// - `auto`: the server's tool parser (if it has one). When a declared tool is `strict` and
///   the engine enforces Lark grammars, the output is held to free text until the model
///   opens a call in its own format, then to that call (arguments following the tool's schema).
/// - `required` / a named function, with an engine that enforces Lark grammars and a tool
///   format that has a grammar (`smgpy_structured::tools::supports`): the output is held to
///   calls in the model's own format and read by the normal parser.
/// - `required` / named otherwise (no format, as the demo SmolLM2; a format without a
///   grammar; an engine that only takes JSON Schemas): the JSON form vLLM and SGLang use, a
///   JSON list of `{"name", "parameters"}` objects or the named function's arguments, read in
///   the parser's forced mode (output that does not open with that JSON, from an engine that
///   ignores the schema, is read in the server's format).
///
/// A `strict` tool whose schema cannot be enforced is a 400 naming it; other tools' schemas
/// drop what cannot be enforced.
pub fn tool_plan(state: &AppState, r: ToolRequest<'_>) -> Result<ToolPlan, ApiError> {
    let tool_format = state.config().tool_format;
    let Some(defs) = tools_for_parser(r.tools, r.choice) else {
        return Ok(ToolPlan::default());
    };
    let specs = tool_specs(r)?;
    let specs: Vec<ToolSpec<'_>> = specs.iter().map(|(_, s)| *s).collect();
    let lark = state.config().lark_grammars;
    let parallel = r.parallel;
    let mode = match r.choice {
        ToolChoice::Required => Mode::Required { parallel },
        ToolChoice::Named(name) => Mode::Named(name),
        ToolChoice::Auto | ToolChoice::None => Mode::Auto { parallel },
    };
    let bad = |e: smgpy_structured::StructuredError| ApiError::bad_request(Some("tools"), e.to_string());
    // Under `auto`, only calls to `strict` tools are worth a grammar (and only without a
    // constraint of the client's own).
    let constrain_auto = !r.has_constraint && specs.iter().any(|s| s.strict);
    let wanted = !matches!(r.choice, ToolChoice::Auto | ToolChoice::None) || constrain_auto;
    let own_grammar = match tool_format {
        Some(f) if wanted && lark && tools::supports(f) => tools::grammar(f, &specs, mode).map_err(bad)?,
        _ => None,
    };
    // `parallel_tool_calls: false` under auto keeps the first call; forced calls are held to
    // one call by their grammar or schema already.
    let stage = |forced: Option<Forced>, format: ToolFormat| ToolStage {
        format,
        tools: Some(defs.clone()),
        single: forced.is_none() && !parallel,
        forced,
    };
    match r.choice {
        ToolChoice::Auto | ToolChoice::None => Ok(ToolPlan {
            stage: tool_format.map(|f| stage(None, f)),
            constraint: own_grammar.map(Constraint::Grammar),
            forced: false,
        }),
        ToolChoice::Required | ToolChoice::Named(_) => {
            // Without a parser of its own, output that is not the forced JSON is read as JSON calls.
            let format = tool_format.unwrap_or(ToolFormat::Json);
            if let Some(g) = own_grammar {
                return Ok(ToolPlan {
                    stage: Some(stage(None, format)),
                    constraint: Some(Constraint::Grammar(g)),
                    forced: true,
                });
            }
            let (schema, forced) = json_form(&specs, r.choice, parallel).map_err(bad)?;
            Ok(ToolPlan {
                stage: Some(stage(Some(forced), format)),
                constraint: Some(Constraint::Json { schema }),
                forced: true,
            })
        }
    }
}

/// Each declared tool (that the parser accepts) with its grammar facts; a `strict` tool whose
/// schema cannot be enforced is refused here, naming it.
fn tool_specs<'a>(r: ToolRequest<'a>) -> Result<Vec<(usize, ToolSpec<'a>)>, ApiError> {
    let mut out = Vec::new();
    for (i, t) in r.tools.unwrap_or_default().iter().enumerate() {
        let Some(name) = tool_name(t) else { continue };
        if let ToolChoice::Named(n) = r.choice {
            if n != name {
                continue;
            }
        }
        let f = t.get("function").unwrap_or(t);
        let spec = ToolSpec {
            name,
            parameters: f.get("parameters"),
            strict: f.get("strict").and_then(Value::as_bool).unwrap_or(false),
        };
        if spec.strict {
            tools::arguments_schema(&spec)
                .map_err(|e| ApiError::bad_request(Some(&(r.param)(i)), format!("tool `{name}`: {e}")))?;
        }
        out.push((i, spec));
    }
    Ok(out)
}

/// The JSON form of a forced call: under `required` a JSON list of `{"name", "parameters"}`
/// objects, each naming a declared tool and following that tool's schema (one item unless
/// `parallel`); under a named function, its arguments object.
fn json_form(specs: &[ToolSpec<'_>], choice: &ToolChoice, parallel: bool) -> Result<(Value, Forced), StructuredError> {
    let mut lenient = false;
    let mut calls = Vec::new();
    for s in specs {
        let (parameters, loose) = tools::arguments_schema(s)?;
        lenient |= loose;
        calls.push((s.name, parameters));
    }
    let (mut schema, forced) = match choice {
        ToolChoice::Named(name) => {
            let args = calls
                .into_iter()
                .next()
                .map(|(_, p)| p)
                .unwrap_or_else(|| json!({"type": "object"}));
            (args, Forced::Call(name.clone()))
        }
        _ => {
            // Each tool's parameters move under `items` (one tool) or `items.anyOf[i]`: their
            // local `$ref`s (`#/$defs/...`, written from the parameters' own root) are
            // rewritten to point there, so that each still names its own definitions.
            let one = calls.len() == 1;
            let objects: Vec<Value> = calls
                .into_iter()
                .enumerate()
                .map(|(i, (name, mut parameters))| {
                    let index = i.to_string();
                    let at: &[&str] = if one {
                        &["items", "properties", "parameters"]
                    } else {
                        &["items", "anyOf", &index, "properties", "parameters"]
                    };
                    relocate_refs(&mut parameters, at);
                    json!({
                        "type": "object",
                        "properties": {"name": {"const": name}, "parameters": parameters},
                        "required": ["name", "parameters"],
                        "additionalProperties": false,
                    })
                })
                .collect();
            let items = match <[Value; 1]>::try_from(objects) {
                Ok([one]) => one,
                Err(calls) => json!({"anyOf": calls}),
            };
            let mut array = json!({"type": "array", "minItems": 1, "items": items});
            if !parallel {
                array["maxItems"] = Value::from(1);
            }
            (array, Forced::List)
        }
    };
    if lenient {
        if let Some(obj) = schema.as_object_mut() {
            obj.insert(
                "x-guidance".into(),
                json!({"lenient": true, "whitespace_pattern": WHITESPACE}),
            );
        }
    }
    Ok((schema, forced))
}

/// Render with the server's chat template. When the server tokenizes prompts itself, special
/// tokens spelled inside the request's content come back as literal spans (see
/// [`crate::literal`]), so that only the template's markup produces special tokens. `args` come
/// as the request wrote them: masked and normalised here.
pub fn render(state: &AppState, mut args: RenderArgs) -> Result<Rendered, ApiError> {
    let template = state.config().chat_template.as_ref().ok_or_else(|| {
        ApiError::bad_request(
            None,
            "this server has no chat template, so chat-style requests cannot be rendered: start it with \
             a chat template (serve_oai(..., chat_template=...) or --chat-template), or use /v1/completions",
        )
    })?;
    let cfg = state.config();
    let mut masker = cfg
        .tokenizer
        .as_ref()
        .filter(|_| cfg.prompt_ids)
        .map(|t| Masker::new(t.specials()));
    if let Some(m) = masker.as_mut() {
        let tools = args.tools.iter_mut().flatten();
        let documents = args.documents.iter_mut().flatten();
        for v in args.messages.iter_mut().chain(tools).chain(documents) {
            *v = m.mask(std::mem::take(v));
        }
    }
    args.messages = smgpy_template::normalize_messages(std::mem::take(&mut args.messages), template.info());
    args.tools = args.tools.map(|t| smgpy_template::normalize_tools(&t));
    let text = template.render(&args).map_err(|e| match e {
        TemplateError::Raised { message } => ApiError::BadRequest {
            message,
            param: Some("messages".into()),
            code: None,
        },
        other => ApiError::bad_request(
            Some("messages"),
            format!("the chat template cannot render this request: {other}"),
        ),
    })?;
    Ok(match &masker {
        Some(m) => m.unmask(text),
        None => text.into(),
    })
}

/// Reasoning facts of a rendered prompt (does the model start inside a reasoning block?).
pub fn reasoning_options(state: &AppState, prompt: &str) -> Option<(smgpy_parsers::ReasoningFormat, ReasoningOptions)> {
    let f = state.config().reasoning_format?;
    Some((f, smgpy_parsers::reasoning::prompt_state(f, prompt)))
}
