//! The common shapes of JSON calls read without building a `Value` tree: each call object is
//! deserialised into borrowed raw fields and its arguments object compacted by `JsonStream`.
//! Anything unusual (a repeated key in a call object, a non-string name, nested arrays) returns
//! `None` and is read by the general path. Both give the same calls, except that a key repeated
//! inside an arguments object is kept twice here, as it is in streamed calls.
use super::body::{args_string, trailing_text, valid_name, Call};
use super::json_stream::{Fed, JsonStream};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

#[derive(Deserialize)]
struct RawCall<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    function: Option<&'a RawValue>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_call_id: Option<&'a RawValue>,
}

pub(crate) fn json_calls(text: &str) -> Option<(Vec<Call>, String)> {
    let mut calls = Vec::new();
    let mut end = 0;
    loop {
        let t = text[end..].trim_start_matches(|c: char| c.is_whitespace() || c == ';' || c == ',');
        if !t.starts_with(['{', '[']) {
            break;
        }
        let mut values = serde_json::Deserializer::from_str(t).into_iter::<&RawValue>();
        let json = values.next()?.ok()?.get();
        if json.starts_with('[') {
            for c in serde_json::from_str::<Vec<RawCall>>(json).ok()? {
                calls.push(call(&c)?);
            }
        } else {
            calls.push(call(&serde_json::from_str::<RawCall>(json).ok()?)?);
        }
        end = text.len() - t.len() + values.byte_offset();
    }
    if calls.is_empty() {
        return None;
    }
    Some((calls, trailing_text(&text[end..])))
}

fn call(obj: &RawCall) -> Option<Call> {
    let id = [obj.id, obj.tool_call_id].into_iter().flatten().find_map(|raw| {
        match serde_json::from_str::<Value>(raw.get()).ok()? {
            Value::String(s) => Some(s),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    });
    let inner;
    let f = match obj.function {
        Some(raw) if raw.get().starts_with('{') => {
            inner = serde_json::from_str::<RawCall>(raw.get()).ok()?;
            &inner
        }
        _ => obj,
    };
    let name = [f.name, f.tool_name]
        .into_iter()
        .flatten()
        .find_map(|raw| serde_json::from_str::<String>(raw.get()).ok())?;
    let arguments = match [f.arguments, f.parameters, f.args].into_iter().flatten().next() {
        None => "{}".to_string(),
        Some(raw) => arguments(raw.get())?,
    };
    Some(Call {
        id,
        name: valid_name(&name)?,
        arguments,
    })
}

/// Compact arguments; an object is compacted in one pass, other values go through `Value`.
fn arguments(json: &str) -> Option<String> {
    if json.starts_with('{') {
        let mut out = String::with_capacity(json.len());
        let mut s = JsonStream::new();
        return match s.feed(json, &mut out) {
            Fed::Done(n) if n == json.len() => Some(out),
            _ => None,
        };
    }
    serde_json::from_str::<Value>(json).ok().map(|v| args_string(&v))
}
