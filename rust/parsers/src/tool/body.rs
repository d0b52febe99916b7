//! Body grammars: turn the text of one finished tool region into calls. JSON-shaped bodies live
//! here; XML-style ones in `xml.rs`, Python/Gemma literals in `literal.rs`.
use super::ctx::Ctx;
use super::spec::{Body, End};
use super::{generic, header, json_raw as raw, literal, xml};
use serde_json::{Map, Value};

/// One parsed call; `arguments` is compact JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Call {
    pub id: Option<String>,
    pub name: String,
    pub arguments: String,
}

/// What a region is read as.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Body(Body),
    /// Arguments of a call whose name a header already gave (Harmony, Functionary v3.2).
    /// `raw`: arguments that are not JSON are kept as written (Harmony, as vLLM and the harmony
    /// library keep them) instead of making the region text.
    Args {
        name: String,
        id: Option<String>,
        raw: bool,
    },
    /// Text shown to no one (a Harmony analysis message or built-in tool call, read by a tool
    /// parser without a reasoning parser before it).
    Discard,
}

impl Target {
    /// Whether the region's body is JSON, whose string values may hold the region's end marker.
    pub(crate) fn is_json(&self) -> bool {
        match self {
            Target::Args { .. } => true,
            Target::Discard => false,
            Target::Body(body) => match body {
                Body::Json
                | Body::NameKeyedJson
                | Body::Mistral
                | Body::DeepSeekItem
                | Body::KimiItem
                | Body::FunctionaryV31
                | Body::Solar
                | Body::Inkling
                | Body::Llama3Tag
                | Body::Generic => true,
                Body::Items { item, .. } => matches!(item, Body::DeepSeekItem | Body::KimiItem),
                _ => false,
            },
        }
    }
}

/// The result of reading a region.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Calls, then text that followed them inside the region.
    Calls(Vec<Call>, String),
    /// Not a tool call: the region's raw text is normal text.
    Text,
    /// A header with nothing to report (e.g. Harmony `final` channel): consumed silently.
    Drop,
    /// A header naming a call; its arguments follow in a region ending at `end`.
    Follow { target: Target, end: End },
}

pub(crate) fn parse_body(target: &Target, text: &str, ctx: &Ctx) -> Outcome {
    let body = match target {
        Target::Args { name, id, raw } => {
            let arguments = match parse_args(strip_fence(text)) {
                Some(arguments) if !text.trim().is_empty() => Some(arguments),
                _ if *raw => Some(text.trim().to_string()),
                _ => None,
            };
            return match arguments {
                Some(arguments) => Outcome::Calls(
                    vec![Call {
                        id: id.clone(),
                        name: name.clone(),
                        arguments,
                    }],
                    String::new(),
                ),
                None => Outcome::Text,
            };
        }
        Target::Discard => return Outcome::Drop,
        Target::Body(body) => body,
    };
    match body {
        Body::HarmonyHeader { role } => header::harmony(text, *role),
        Body::FunctionaryHeader => header::functionary(text),
        Body::Generic => match generic::read(text) {
            Some((calls, text)) => Outcome::Calls(calls, text),
            None => Outcome::Text,
        },
        _ => match calls(body, text, ctx) {
            Some((calls, trailing)) if !calls.is_empty() => Outcome::Calls(calls, trailing),
            _ => Outcome::Text,
        },
    }
}

/// What follows the live calls of a region (see `live.rs`), up to the region's end: more calls
/// in the same grammar, else text. The region cannot turn back into text, so calls to
/// undeclared tools or unreadable text here become normal text on their own.
pub(crate) fn continuation(target: &Target, text: &str, ctx: &Ctx) -> (Vec<Call>, String) {
    if text.trim().is_empty() {
        return (Vec::new(), String::new());
    }
    let parsed = match target {
        Target::Body(Body::Json | Body::Mistral) => {
            let t = text.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '['));
            let (values, rest) = json_values(t);
            let rest = rest.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ';' | ']'));
            if values.is_empty() {
                Some((Vec::new(), rest.to_string()))
            } else {
                calls_from_values(&values).map(|c| (c, rest.to_string()))
            }
        }
        Target::Body(body) => calls(body, text, ctx),
        Target::Args { .. } | Target::Discard => None,
    };
    match parsed {
        Some((calls, trailing)) if calls.iter().all(|c| ctx.declared(&c.name)) => (calls, trailing),
        _ => (Vec::new(), text.to_string()),
    }
}

/// Calls of a call-producing body, plus trailing text.
fn calls(body: &Body, text: &str, ctx: &Ctx) -> Option<(Vec<Call>, String)> {
    let only = |c: Option<Vec<Call>>| c.map(|c| (c, String::new()));
    match *body {
        Body::Json => json_calls(text),
        Body::NameKeyedJson => only(name_keyed(text)),
        Body::QwenXml { bare } => only(xml::qwen_xml(text, bare, ctx)),
        Body::Glm => only(xml::glm(text, ctx)),
        Body::Invoke { prefix } => only(xml::invoke(text, prefix, ctx)),
        Body::Items {
            begin,
            end,
            item,
            again,
        } => only(items(text, begin, end, item, again, ctx)),
        Body::LongCat => {
            if text.trim_start().starts_with('{') {
                json_calls(text)
            } else {
                only(xml::glm_tags(text, &xml::LONGCAT_TAGS, ctx))
            }
        }
        Body::DeepSeekItem => only(deepseek_item(text)),
        Body::KimiItem => only(kimi_item(text, ctx)),
        Body::Step3Item => {
            let t = text.trim_start();
            only(xml::invoke(
                t.strip_prefix("function<｜tool_sep｜>").unwrap_or(t),
                "steptml:",
                ctx,
            ))
        }
        Body::KimiK3 => only(xml::kimi_k3(text, ctx)),
        Body::Mistral => mistral(text),
        Body::Pythonic => only(literal::pythonic_calls(text)),
        Body::PythonicOrJson => match text.trim_start().strip_prefix('[') {
            Some(r) if r.trim_start().starts_with('{') => json_calls(text),
            _ => only(literal::pythonic_calls(text)),
        },
        Body::Llama3Tag => json_calls(text).or_else(|| only(literal::builtin_call(text))),
        Body::Generic => generic::read(text).filter(|(c, _)| !c.is_empty()),
        Body::PythonDicts => {
            let v = literal::python_value(text.trim())?;
            only(calls_from_values(&[v]))
        }
        Body::Gemma { delim } => only(literal::gemma_calls(text, delim)),
        Body::FunctionaryV31 => {
            let (name, args) = text.split_once('>')?;
            only(single(None, name, args))
        }
        Body::PythonCode => {
            let code = text.trim_end();
            let mut args = Map::new();
            args.insert("code".into(), Value::String(code.to_string()));
            let arguments = compact(&Value::Object(args));
            only(Some(vec![Call {
                id: None,
                name: "python".into(),
                arguments,
            }]))
        }
        Body::Solar => {
            let (id, rest) = text.split_once("<|tool_call:name|>")?;
            let (name, args) = rest.split_once("<|tool_call:args|>")?;
            let id = Some(id.trim().to_string()).filter(|i| !i.is_empty());
            only(single(id, name, args))
        }
        Body::Inkling => only(inkling(text)),
        Body::HarmonyHeader { .. } | Body::FunctionaryHeader => None,
    }
}

/// Whether a region the output ended inside, before its end marker, can still read whole: its
/// body's own grammar closes each call (a JSON object, a Python call, a Gemma object). XML-style
/// bodies are told complete by their live reader instead, and GLM's calls close only with the
/// region; read whole at the end, these would take a cut-off call for a complete one.
pub(crate) fn whole_without_end(target: &Target, text: &str) -> bool {
    match target {
        Target::Args { .. } => true,
        Target::Discard => false,
        Target::Body(body) => match body {
            Body::QwenXml { .. } | Body::Glm | Body::Invoke { .. } | Body::Items { .. } | Body::Step3Item => false,
            Body::LongCat => text.trim_start().starts_with('{'),
            Body::KimiK3 => text.trim_end().ends_with("<|close|>call<|sep|>"),
            _ => true,
        },
    }
}

/// Serialise compactly (key order kept by `preserve_order`).
pub(crate) fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Arguments as compact JSON; a JSON-encoded string (OpenAI style) is decoded first.
pub(crate) fn args_string(v: &Value) -> String {
    if let Value::String(s) = v {
        if let Ok(inner @ Value::Object(_)) = serde_json::from_str::<Value>(s) {
            return compact(&inner);
        }
    }
    compact(v)
}

/// Parse an arguments text (empty means `{}`).
fn parse_args(text: &str) -> Option<String> {
    let t = text.trim();
    if t.is_empty() {
        return Some("{}".into());
    }
    serde_json::from_str::<Value>(t).ok().map(|v| args_string(&v))
}

/// One call with a name and an arguments text.
fn single(id: Option<String>, name: &str, args: &str) -> Option<Vec<Call>> {
    let name = valid_name(name)?;
    Some(vec![Call {
        id,
        name,
        arguments: parse_args(strip_fence(args))?,
    }])
}

/// A trimmed function name, or `None` when it cannot be one.
pub(crate) fn valid_name(name: &str) -> Option<String> {
    trimmed_name(name).map(str::to_owned)
}

/// `valid_name`, borrowed.
pub(crate) fn trimmed_name(name: &str) -> Option<&str> {
    // Nearly every name is ASCII with ASCII space around it: settled with byte tests. (Its ends
    // are then name characters, so a Unicode trim would stop at the same places.)
    let t = name.trim_ascii();
    let ascii = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':' | b'/');
    if !t.is_empty() && t.as_bytes().iter().all(ascii) {
        return Some(t);
    }
    let n = name.trim();
    let ok = !n.is_empty()
        && n.chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/'));
    ok.then_some(n)
}

/// Remove a surrounding markdown code fence.
fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(after) = t.strip_prefix("```") else { return t };
    let body = after.split_once('\n').map_or("", |(_, b)| b);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

/// Consecutive JSON objects/arrays separated by whitespace, `;` or `,`; returns the rest.
fn json_values(text: &str) -> (Vec<Value>, &str) {
    let mut values = Vec::new();
    let mut rest = text;
    loop {
        let t = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ';' || c == ',');
        if !t.starts_with(['{', '[']) {
            break;
        }
        let mut it = serde_json::Deserializer::from_str(t).into_iter::<Value>();
        match it.next() {
            Some(Ok(v)) => {
                values.push(v);
                rest = &t[it.byte_offset()..];
            }
            _ => break,
        }
    }
    (values, rest)
}

fn json_calls(text: &str) -> Option<(Vec<Call>, String)> {
    if let Some(found) = raw::json_calls(strip_fence(text)) {
        return Some(found);
    }
    let (values, rest) = json_values(strip_fence(text));
    if values.is_empty() {
        return None;
    }
    let calls = calls_from_values(&values)?;
    Some((calls, trailing_text(rest)))
}

/// Text after the calls of a JSON region (separators and blank text dropped).
pub(crate) fn trailing_text(rest: &str) -> String {
    let rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ';');
    if rest.trim().is_empty() {
        String::new()
    } else {
        rest.to_string()
    }
}

/// Calls from JSON values: objects with a name, or arrays of them.
pub(crate) fn calls_from_values(values: &[Value]) -> Option<Vec<Call>> {
    let mut out = Vec::new();
    for v in values {
        push_calls(v, &mut out)?;
    }
    (!out.is_empty()).then_some(out)
}

fn push_calls(v: &Value, out: &mut Vec<Call>) -> Option<()> {
    match v {
        Value::Array(items) => items.iter().try_for_each(|i| push_calls(i, out)),
        Value::Object(obj) => {
            let id = ["id", "tool_call_id"].iter().find_map(|k| match obj.get(*k) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            });
            let f = match obj.get("function") {
                Some(Value::Object(f)) => f,
                _ => obj,
            };
            let name = ["name", "tool_name"].iter().find_map(|k| f.get(*k)?.as_str())?;
            let args = ["arguments", "parameters", "args"].iter().find_map(|k| f.get(*k));
            let arguments = args.map_or_else(|| "{}".to_string(), args_string);
            out.push(Call {
                id,
                name: valid_name(name)?,
                arguments,
            });
            Some(())
        }
        _ => None,
    }
}

/// Apertus `[{"NAME": {args}}, ...]`.
fn name_keyed(text: &str) -> Option<Vec<Call>> {
    let (values, rest) = json_values(text);
    if !rest.trim().is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for v in values
        .iter()
        .flat_map(|v| v.as_array().map_or(std::slice::from_ref(v), |a| a.as_slice()))
    {
        let obj = v.as_object()?;
        for (name, args) in obj {
            out.push(Call {
                id: None,
                name: valid_name(name)?,
                arguments: args_string(args),
            });
        }
    }
    Some(out)
}

/// `begin ITEM end` items separated by whitespace. A malformed item is skipped, as peers skip a
/// bad call among good ones; with no good item the region is text. An item's end marker inside
/// one of its JSON strings ends nothing.
fn items(text: &str, begin: &str, end: &str, item: &Body, again: &str, ctx: &Ctx) -> Option<Vec<Call>> {
    let json = matches!(item, Body::DeepSeekItem | Body::KimiItem);
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start();
        if !again.is_empty() {
            if let Some(r) = rest.strip_prefix(again) {
                rest = r.trim_start();
            }
        }
        if rest.is_empty() {
            break;
        }
        let r = rest.strip_prefix(begin)?;
        let at = if json {
            find_outside_strings(r, end)
        } else {
            r.find(end)
        };
        let (inner, after) = at.map_or((r, ""), |p| (&r[..p], &r[p + end.len()..]));
        if let Some((calls, _)) = calls(item, inner, ctx) {
            out.extend(calls);
        }
        rest = after;
    }
    (!out.is_empty()).then_some(out)
}

/// The first `marker` in `text` that is not inside a JSON string.
fn find_outside_strings(text: &str, marker: &str) -> Option<usize> {
    let mut scan = 0;
    let mut strings = super::ends::JsonStrings::default();
    super::ends::marker_end(text, &mut scan, &[marker], 1, |at| strings.inside(text.as_bytes(), at)).map(|(p, _)| p)
}

fn deepseek_item(text: &str) -> Option<Vec<Call>> {
    let (left, right) = text.split_once("<｜tool▁sep｜>")?;
    if left.trim() == "function" {
        if let Some((name, args)) = right.split_once('\n') {
            return single(None, name, args);
        }
    }
    single(None, left, right)
}

fn kimi_item(text: &str, ctx: &Ctx) -> Option<Vec<Call>> {
    let (id, args) = text.split_once("<|tool_call_argument_begin|>")?;
    let id = id.trim();
    let (name, infer) = kimi_name(id)?;
    let name = if infer { ctx.sole_tool()? } else { name };
    single(Some(id.to_string()), name, args)
}

/// The function name in a Kimi K2 call id, `functions.NAME:IDX` or `NAME:IDX`; `("", true)` for a
/// bare counter (`0`), whose name is inferred from the declared tools. An id without a counter
/// (`functions.get.0`) is malformed, as vLLM reads it.
pub(crate) fn kimi_name(id: &str) -> Option<(&str, bool)> {
    if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
        return Some(("", true));
    }
    let bare = id.strip_prefix("functions.").unwrap_or(id);
    match bare.rsplit_once(':') {
        Some((n, idx)) if !n.is_empty() && !idx.is_empty() && idx.bytes().all(|b| b.is_ascii_digit()) => {
            Some((n, false))
        }
        _ => None,
    }
}

fn mistral(text: &str) -> Option<(Vec<Call>, String)> {
    let t = text.trim_start();
    if t.starts_with(['[', '{']) {
        return json_calls(t);
    }
    let cut = ["[CALL_ID]", "[ARGS]", "{"].iter().filter_map(|m| t.find(m)).min()?;
    let name = &t[..cut];
    let mut rest = &t[cut..];
    let mut id = None;
    if let Some(r) = rest.strip_prefix("[CALL_ID]") {
        let end = ["[ARGS]", "{"].iter().filter_map(|m| r.find(m)).min()?;
        id = Some(r[..end].trim().to_string());
        rest = &r[end..];
    }
    rest = rest.strip_prefix("[ARGS]").unwrap_or(rest);
    Some((single(id, name, rest)?, String::new()))
}

fn inkling(text: &str) -> Option<Vec<Call>> {
    let (prefix, json) = text.split_once("<|content_invoke_tool_json|>")?;
    let v: Value = serde_json::from_str(json.trim()).ok()?;
    let name = v.get("name").and_then(Value::as_str).unwrap_or(prefix);
    let args = v.get("args").or_else(|| v.get("arguments"));
    let arguments = args.map_or_else(|| "{}".to_string(), args_string);
    Some(vec![Call {
        id: None,
        name: valid_name(name)?,
        arguments,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::json_strategy;

    #[test]
    fn names_are_trimmed_and_checked_in_ascii_and_beyond() {
        for (name, want) in [
            (" get_weather\n", Some("get_weather")),
            ("functions.a-b:0/x", Some("functions.a-b:0/x")),
            ("\u{3000}天気\u{3000}", Some("天気")),
            ("\u{b}f\u{b}", Some("f")),
            ("a b", None),
            (" \t", None),
            ("a(", None),
        ] {
            assert_eq!(trimmed_name(name), want, "{name:?}");
            assert_eq!(valid_name(name).as_deref(), want, "{name:?}");
        }
    }

    #[test]
    fn json_forms() {
        let (c, t) = json_calls(r#"{"name":"f","arguments":"{\"a\": 1}"} tail"#).unwrap();
        assert_eq!(c[0].arguments, r#"{"a":1}"#);
        assert_eq!(t, "tail");
        let (c, _) = json_calls(r#"[{"type":"function","function":{"name":"g","parameters":{"x":[1,2]}}}]"#).unwrap();
        assert_eq!((c[0].name.as_str(), c[0].arguments.as_str()), ("g", r#"{"x":[1,2]}"#));
        assert!(json_calls(r#"{"nam":"f"}"#).is_none());
        assert_eq!(strip_fence("```json\n{\"a\":1}\n```"), "{\"a\":1}");
    }

    proptest::proptest! {
        /// The raw fast path and the general `Value` path agree on generated call lists.
        #[test]
        fn raw_path_equals_general_path(
            calls in proptest::collection::vec(
                ("[a-z_]{1,8}", 0..4u8, proptest::option::of("[a-zA-Z0-9]{1,9}"),
                 proptest::collection::vec(("[a-z\"é]{1,5}", any_leaf()), 0..4)),
                1..4),
            array in proptest::bool::ANY,
        ) {
            let objs: Vec<Value> = calls.iter().map(|(name, shape, id, args)| {
                let args: Map<String, Value> = args.iter().cloned().collect();
                let mut o = Map::new();
                match shape {
                    0 => { o.insert("name".into(), name.as_str().into()); o.insert("arguments".into(), Value::Object(args)); }
                    1 => { o.insert("tool_name".into(), name.as_str().into()); o.insert("parameters".into(), Value::Object(args)); }
                    2 => { o.insert("type".into(), "function".into()); o.insert("function".into(), serde_json::json!({"name": name, "arguments": compact(&Value::Object(args))})); }
                    _ => { o.insert("name".into(), name.as_str().into()); }
                }
                if let Some(id) = id { o.insert("id".into(), id.as_str().into()); }
                Value::Object(o)
            }).collect();
            let text = if array { serde_json::to_string_pretty(&objs).unwrap() } else {
                objs.iter().map(|o| serde_json::to_string(o).unwrap()).collect::<Vec<_>>().join("; ")
            } + " trailing";
            let (values, rest) = json_values(&text);
            let general = calls_from_values(&values).map(|c| (c, trailing_text(rest)));
            proptest::prop_assert_eq!(raw::json_calls(&text), general);
        }
    }

    /// A scalar (five kinds) or, as often as each kind, a short array of small integers.
    fn any_leaf() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        prop_oneof![
            5 => json_strategy::scalar("[a-z\"\\\n é😀]{0,10}"),
            1 => proptest::collection::vec(any::<u8>().prop_map(Value::from), 0..3).prop_map(Value::Array),
        ]
    }

    #[test]
    fn mistral_forms() {
        let (c, _) = mistral(r#"get[CALL_ID]a1B2c3D4e[ARGS]{"q": "x"}"#).unwrap();
        assert_eq!(c[0].id.as_deref(), Some("a1B2c3D4e"));
        assert_eq!(c[0].arguments, r#"{"q":"x"}"#);
        let (c, _) = mistral(r#"get{"q": 1}"#).unwrap();
        assert_eq!(c[0].name, "get");
    }
}
