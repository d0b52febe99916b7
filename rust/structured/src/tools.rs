//! Grammars for tool calls in a model's own format.
//!
//! Under `tool_choice: "required"` or a named function, a model should still write its calls
//! the way it was trained to (Hermes `<tool_call>{...}</tool_call>`, Mistral
//! `[TOOL_CALLS]name[ARGS]{...}`, Qwen3-Coder `<function=...><parameter=...>` XML, ...): a
//! generic JSON list pushes it off its distribution. These grammars hold the output to the
//! format's syntax, with each call naming a declared tool and its arguments following that
//! tool's parameters schema, so the server's tool parser reads the constrained output exactly
//! as it reads free output. Under `auto`, text is free until the format's opening marker, then
//! the call is enforced (a lazy terminal ends the free text at the marker).
//!
//! Formats not listed in [`supports`] (and models with no format) keep the JSON form: the
//! server forces a JSON Schema and reads it in its forced parse mode.
use serde_json::{json, Value};
use smgpy_parsers::ToolFormat;

use crate::refs::relocate_refs;
use crate::structural_tag::{json as json_expr, lit};
use crate::{check, Source, StructuredError};

/// A declared tool, as far as its grammar is concerned.
#[derive(Debug, Clone, Copy)]
pub struct ToolSpec<'a> {
    pub name: &'a str,
    /// The JSON Schema of its arguments (`None`: any object).
    pub parameters: Option<&'a Value>,
    /// `strict: true`: the arguments must follow the schema exactly, so a schema that cannot
    /// be enforced is an error rather than a looser constraint.
    pub strict: bool,
}

/// What the calls must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode<'a> {
    /// At least one call (exactly one unless `parallel`).
    Required { parallel: bool },
    /// Exactly one call, to this tool.
    Named(&'a str),
    /// Free text, and calls once the model opens one (at most one unless `parallel`).
    Auto { parallel: bool },
}

/// How one format writes its calls.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Each call is `open {"name": N, "<args>": {...}} close`, calls joined by `sep`.
    EachJson {
        open: &'static str,
        close: &'static str,
        sep: &'static str,
        args: &'static str,
    },
    /// All calls in one JSON list `open [{"name": N, "arguments": {...}}, ...] close`.
    List { open: &'static str, close: &'static str },
    /// Mistral: `[TOOL_CALLS]name[ARGS]{...}` per call, or `[TOOL_CALLS][{...}, ...]`.
    Mistral,
    /// DeepSeek V3.1: `<｜tool▁calls▁begin｜>(<｜tool▁call▁begin｜>N<｜tool▁sep｜>{..}<｜tool▁call▁end｜>)+<｜tool▁calls▁end｜>`.
    DeepSeekV31,
    /// Qwen3-Coder XML: `<tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n</function>\n</tool_call>`.
    QwenXml,
}

fn shape(format: ToolFormat) -> Option<Shape> {
    use ToolFormat as F;
    let list = |open, close| Some(Shape::List { open, close });
    match format {
        F::Hermes => Some(Shape::EachJson {
            open: "<tool_call>\n",
            close: "\n</tool_call>",
            sep: "\n",
            args: "arguments",
        }),
        F::LongCat => Some(Shape::EachJson {
            open: "<longcat_tool_call>",
            close: "</longcat_tool_call>",
            sep: "\n",
            args: "arguments",
        }),
        F::Llama3Json => Some(Shape::EachJson {
            open: "",
            close: "",
            sep: "; ",
            args: "parameters",
        }),
        F::Granite => list("<|tool_call|>", ""),
        F::Jamba | F::HunyuanA13b | F::Apriel => list("<tool_calls>", "</tool_calls>"),
        F::NemotronJson => list("<TOOLCALL>", "</TOOLCALL>"),
        F::Phi4Mini => list("functools", ""),
        F::Mistral => Some(Shape::Mistral),
        F::DeepSeekV31 => Some(Shape::DeepSeekV31),
        F::Qwen3Coder => Some(Shape::QwenXml),
        _ => None,
    }
}

/// Whether calls in `format` get a grammar of their own (else the JSON form applies).
pub fn supports(format: ToolFormat) -> bool {
    shape(format).is_some()
}

/// The marker that opens a call in `format`, where free text can end at it (`auto`); a
/// prefix of the block's opening text.
fn trigger(shape: Shape) -> Option<&'static str> {
    match shape {
        Shape::EachJson { open, .. } | Shape::List { open, .. } => {
            let t = open.trim_end_matches('\n');
            (!t.is_empty()).then_some(t)
        }
        Shape::Mistral => Some("[TOOL_CALLS]"),
        Shape::DeepSeekV31 => Some(DS_BEGIN),
        Shape::QwenXml => Some("<tool_call>"),
    }
}

const DS_BEGIN: &str = "<｜tool▁calls▁begin｜>";

/// The arguments schema of `tool`: its own when it compiles, else (not `strict`) the same
/// schema with unimplemented keywords ignored, else any object. A `strict` tool whose schema
/// cannot be enforced is an error. The flag says whether the schema needs `lenient`.
///
/// Objects that list `properties` and say nothing of `additionalProperties` are closed: a
/// call's arguments are the tool's parameters (OpenAI's strict mode requires exactly this),
/// and a small model otherwise invents keys such as `"description"`.
pub fn arguments_schema(tool: &ToolSpec<'_>) -> Result<(Value, bool), StructuredError> {
    let Some(schema) = tool.parameters.filter(|p| !p.is_null()) else {
        return Ok((json!({"type": "object"}), false));
    };
    let mut schema = schema.clone();
    close_objects(&mut schema);
    let schema = &schema;
    let exact = Source::JsonSchema(crate::source::with_options(schema.clone(), false)?.to_string());
    match check(&exact) {
        Ok(()) => Ok((schema.clone(), false)),
        Err(e) if tool.strict => Err(e),
        Err(_) => {
            let loose = crate::source::with_options(schema.clone(), true)?;
            if check(&Source::JsonSchema(loose.to_string())).is_ok() {
                Ok((schema.clone(), true))
            } else {
                Ok((json!({"type": "object"}), false))
            }
        }
    }
}

/// Set `additionalProperties: false` on objects that list `properties` and leave it open,
/// through nested properties, items and alternatives (not inside `allOf`, whose branches
/// together describe one object).
pub fn close_objects(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else { return };
    if obj.contains_key("properties")
        && !obj.contains_key("additionalProperties")
        && !obj.contains_key("patternProperties")
        && !obj.contains_key("allOf")
    {
        obj.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = obj.get_mut(key) {
            children.values_mut().for_each(close_objects);
        }
    }
    for key in ["anyOf", "oneOf", "prefixItems"] {
        if let Some(Value::Array(children)) = obj.get_mut(key) {
            children.iter_mut().for_each(close_objects);
        }
    }
    if let Some(items) = obj.get_mut("items") {
        close_objects(items);
    }
}

/// The Lark grammar for calls to `tools` in `format` under `mode`; `None` when the format has
/// no grammar here, or under `auto` when the format has no opening marker to wait for.
pub fn grammar(format: ToolFormat, tools: &[ToolSpec<'_>], mode: Mode<'_>) -> Result<Option<String>, StructuredError> {
    let Some(shape) = shape(format) else { return Ok(None) };
    let chosen: Vec<&ToolSpec<'_>> = match mode {
        Mode::Named(name) => tools.iter().filter(|t| t.name == name).collect(),
        _ => tools.iter().collect(),
    };
    if chosen.is_empty() {
        return Ok(None);
    }
    let mut rules = Vec::new();
    let mut calls = Vec::new();
    for (i, tool) in chosen.iter().enumerate() {
        let (schema, lenient) = arguments_schema(tool)?;
        let name = format!("call_{i}");
        let call = Call {
            name: tool.name,
            schema: &schema,
            lenient,
            strict: tool.strict,
            rule: &name,
        };
        let body = call_body(shape, call, &mut rules)?;
        rules.push(format!("{name}: {body}"));
        calls.push(name);
    }
    rules.push(format!("call: {}", calls.join(" | ")));
    if matches!(shape, Shape::Mistral) {
        let listed: Vec<String> = calls.iter().map(|c| format!("{c}_listed")).collect();
        rules.push(format!("listed: {}", listed.join(" | ")));
    }
    let start = match mode {
        Mode::Required { parallel } => opened(calls_block(shape, parallel)),
        Mode::Named(_) => opened(calls_block(shape, false)),
        Mode::Auto { parallel } => {
            let Some(t) = trigger(shape) else { return Ok(None) };
            // Lists hold every call of a turn; the other formats open each call with the marker.
            let (open, body) = calls_block(shape, parallel && matches!(shape, Shape::List { .. }));
            let rest = &open[t.len().min(open.len())..];
            rules.push(format!("head[lazy]: TEXT {}", lit(t)));
            let one = if rest.is_empty() {
                format!("(head {body})")
            } else {
                format!("(head {} {body})", lit(rest))
            };
            if parallel {
                format!("{one}* TEXT")
            } else {
                format!("({one} | TEXT)")
            }
        }
    };
    let mut out = format!("%llguidance {{}}\nstart: {start}\nTEXT: /(.|\\n)*/\n");
    for r in rules {
        out.push_str(&r);
        out.push('\n');
    }
    Ok(Some(out))
}

/// The block's opening text and the rest.
fn opened((open, body): (&'static str, String)) -> String {
    if open.is_empty() {
        body
    } else {
        format!("{} {body}", lit(open))
    }
}

/// The calls of one turn: the format's opening text, then one call or (parallel) several.
fn calls_block(shape: Shape, parallel: bool) -> (&'static str, String) {
    let star = |repeat: String| {
        if parallel {
            format!(" ({repeat})*")
        } else {
            String::new()
        }
    };
    let opt = |s: &str| {
        if s.is_empty() {
            String::new()
        } else {
            format!(" {}", lit(s))
        }
    };
    match shape {
        Shape::EachJson { open, close, sep, .. } => {
            let again = format!("{}{} call{}", lit(sep), opt(open), opt(close));
            (open, format!("call{}{}", opt(close), star(again)))
        }
        Shape::List { open, close } => (
            open,
            format!("\"[\" call{} \"]\"{}", star("\", \" call".into()), opt(close)),
        ),
        Shape::Mistral => (
            "[TOOL_CALLS]",
            format!(
                "(call{} | \"[\" listed{} \"]\")",
                star("\"[TOOL_CALLS]\" call".into()),
                star("\", \" listed".into())
            ),
        ),
        Shape::DeepSeekV31 => (
            DS_BEGIN,
            format!("call{} \"<｜tool▁calls▁end｜>\"", if parallel { "+" } else { "" }),
        ),
        Shape::QwenXml => (
            "<tool_call>\n",
            format!(
                "call \"</tool_call>\"{}",
                star("\"\\n<tool_call>\\n\" call \"</tool_call>\"".into())
            ),
        ),
    }
}

/// One tool's call, as the rules of its body need it.
#[derive(Clone, Copy)]
struct Call<'a> {
    /// The tool's name.
    name: &'a str,
    /// The schema of its arguments.
    schema: &'a Value,
    /// The schema needs llguidance's `lenient` mode (it has keywords that cannot be enforced).
    lenient: bool,
    /// The tool is strict: a keyword that cannot be enforced is an error.
    strict: bool,
    /// The name of the call's rule; its helper rules are named after it.
    rule: &'a str,
}

/// One call's body; may add helper rules to `rules`.
fn call_body(shape: Shape, call: Call<'_>, rules: &mut Vec<String>) -> Result<String, StructuredError> {
    let Call {
        name,
        schema,
        lenient,
        rule,
        ..
    } = call;
    // The arguments sit under `properties.<args>` of the call object: their local `$ref`s
    // (`#/$defs/...`) are rewritten to point there.
    let object = |args: &str, extra: Option<Value>| {
        let mut arguments = schema.clone();
        relocate_refs(&mut arguments, &["properties", args]);
        let mut properties = serde_json::Map::new();
        properties.insert("name".into(), json!({"const": name}));
        properties.insert(args.into(), arguments);
        if let Some(extra) = extra {
            properties.insert("id".into(), extra);
        }
        json!({"type": "object", "properties": properties, "required": ["name", args], "additionalProperties": false})
    };
    Ok(match shape {
        Shape::EachJson { args, .. } => json_expr(&object(args, None), lenient)?,
        Shape::List { .. } => json_expr(&object("arguments", None), lenient)?,
        Shape::Mistral => {
            // The list form (Mistral Nemo) carries a 9-character call id.
            let id = json!({"type": "string", "pattern": "^[a-zA-Z0-9]{9}$"});
            rules.push(format!(
                "{rule}_listed: {}",
                json_expr(&object("arguments", Some(id)), lenient)?
            ));
            format!("{} \"[ARGS]\" {}", lit(name), json_expr(schema, lenient)?)
        }
        Shape::DeepSeekV31 => format!(
            "\"<｜tool▁call▁begin｜>\" {} \"<｜tool▁sep｜>\" {} \"<｜tool▁call▁end｜>\"",
            lit(name),
            json_expr(schema, lenient)?
        ),
        Shape::QwenXml => qwen_xml(call, rules)?,
    })
}

/// Qwen3-Coder XML: parameters in the schema's order (required ones present, optional ones
/// optional); a string parameter is raw text up to `\n</parameter>`, others are JSON.
fn qwen_xml(call: Call<'_>, rules: &mut Vec<String>) -> Result<String, StructuredError> {
    let Call {
        name,
        schema,
        lenient,
        strict,
        rule,
    } = call;
    const CLOSE: &str = "\n</parameter>\n";
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut params = Vec::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, (key, prop)) in props.iter().enumerate() {
            let value = match raw_string(prop) {
                Some(RawString::Free) => {
                    let v = format!("{rule}_v{k}");
                    rules.push(format!("{v}[lazy]: TEXT {}", lit(CLOSE)));
                    v
                }
                Some(RawString::OneOf(options)) => {
                    let alts: Vec<String> = options.iter().map(|o| lit(o)).collect();
                    format!("({}) {}", alts.join(" | "), lit(CLOSE))
                }
                Some(RawString::Unenforceable(keyword)) if strict => {
                    return Err(StructuredError::Invalid {
                        what: "the tool's parameters",
                        message: format!(
                            "parameter `{key}` of `{name}`: the string keyword `{keyword}` cannot be enforced on \
                             Qwen XML parameters (raw text, not JSON)"
                        ),
                    })
                }
                Some(RawString::Unenforceable(_)) => {
                    let v = format!("{rule}_v{k}");
                    rules.push(format!("{v}[lazy]: TEXT {}", lit(CLOSE)));
                    v
                }
                None => format!("{} {}", json_expr(&standalone(schema, prop), lenient)?, lit(CLOSE)),
            };
            let p = format!("{} {value}", lit(&format!("<parameter={key}>\n")));
            params.push(if required.contains(&key.as_str()) {
                p
            } else {
                format!("({p})?")
            });
        }
    }
    Ok(format!(
        "{} {} \"</function>\\n\"",
        lit(&format!("<function={name}>\n")),
        params.join(" ")
    ))
}

/// A parameter's schema `prop` (one of `parameters.properties`) as a document of its own, as
/// Qwen XML writes each parameter's JSON alone. Its local `$ref`s point into the whole
/// parameters schema (`#/$defs/Stop`), so that schema is kept beside it, under `$defs`, and the
/// references are rewritten to point into that copy. A parameter without local references is
/// returned as it is.
fn standalone(parameters: &Value, prop: &Value) -> Value {
    let mut key = String::from("smgpy_parameters");
    while prop.get("$defs").and_then(|d| d.get(&key)).is_some() {
        key.push('_');
    }
    let mut own = prop.clone();
    relocate_refs(&mut own, &["$defs", &key]);
    if own == *prop {
        return own;
    }
    let mut whole = parameters.clone();
    relocate_refs(&mut whole, &["$defs", &key]);
    let Some(map) = own.as_object_mut() else {
        return prop.clone();
    };
    match map.entry("$defs").or_insert_with(|| json!({})) {
        Value::Object(defs) => {
            defs.insert(key, whole);
            own
        }
        // `$defs` that is not an object: llguidance names the problem.
        _ => prop.clone(),
    }
}

/// How a string parameter's raw text is constrained.
enum RawString {
    Free,
    OneOf(Vec<String>),
    Unenforceable(&'static str),
}

/// `Some` when `prop` is a plain string schema (written raw, not as JSON).
fn raw_string(prop: &Value) -> Option<RawString> {
    let is_string = prop.get("type").and_then(Value::as_str) == Some("string")
        || prop
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty() && e.iter().all(Value::is_string));
    if !is_string {
        return None;
    }
    if let Some(options) = prop.get("enum").and_then(Value::as_array) {
        return Some(RawString::OneOf(
            options.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        ));
    }
    if let Some(c) = prop.get("const").and_then(Value::as_str) {
        return Some(RawString::OneOf(vec![c.to_string()]));
    }
    for keyword in ["pattern", "format", "minLength", "maxLength"] {
        if prop.get(keyword).is_some() {
            return Some(RawString::Unenforceable(keyword));
        }
    }
    Some(RawString::Free)
}
