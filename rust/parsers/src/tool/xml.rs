//! XML-style parameter bodies (Qwen XML, GLM, `<invoke>` blocks, Kimi K3). Values are raw text
//! and get their JSON type from the tool's schema when given, else best-effort JSON-or-string.
use super::body::{compact, valid_name, Call};
use super::engine::Ctx;
use serde_json::{Map, Value};

/// Type a raw parameter value: schema `string` stays text; other schema types and unknown
/// parameters are parsed as JSON (or Python `True`/`False`/`None`) when possible, else text.
pub(crate) fn typed_value(ctx: &Ctx, tool: &str, key: &str, raw: &str) -> Value {
    match ctx.param_type(tool, key) {
        Some("string") => Value::String(raw.to_string()),
        _ => loose_json(raw),
    }
}

pub(crate) fn loose_json(raw: &str) -> Value {
    let t = raw.trim();
    match t {
        "True" => return Value::Bool(true),
        "False" => return Value::Bool(false),
        "None" => return Value::Null,
        _ => {}
    }
    match serde_json::from_str::<Value>(t) {
        Ok(v) if !t.is_empty() => v,
        _ => Value::String(raw.to_string()),
    }
}

/// Text between `open` and `close` after `from`: `(inner, offset after close)`; an unclosed
/// element runs to the end.
fn element<'a>(text: &'a str, close: &str) -> (&'a str, usize) {
    match text.find(close) {
        Some(p) => (&text[..p], p + close.len()),
        None => (text, text.len()),
    }
}

/// Drop the one newline templates put after an opening and before a closing tag.
pub(crate) fn trim_newlines(v: &str) -> &str {
    let v = v.strip_prefix('\n').unwrap_or(v);
    v.strip_suffix('\n').unwrap_or(v)
}

fn call(name: String, args: Map<String, Value>) -> Call {
    Call {
        id: None,
        name,
        arguments: compact(&Value::Object(args)),
    }
}

/// Qwen XML `<function=NAME><parameter=K>\nV\n</parameter></function>`.
pub(crate) fn qwen_xml(text: &str, bare: bool, ctx: &Ctx) -> Option<Vec<Call>> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let after = if bare && out.is_empty() {
            rest
        } else {
            let t = rest.trim_start();
            if t.is_empty() {
                break;
            }
            t.strip_prefix("<function=")?
        };
        let (name, after) = after.split_once('>')?;
        let name = valid_name(name)?;
        let (inner, used) = element(after, "</function>");
        let mut args = Map::new();
        let mut p = inner;
        while let Some(start) = p.find("<parameter=") {
            let (key, after) = p[start + "<parameter=".len()..].split_once('>')?;
            let end = after
                .find("</parameter>")
                .or_else(|| after.find("<parameter="))
                .unwrap_or(after.len());
            let value = trim_newlines(&after[..end]);
            args.insert(key.trim().to_string(), typed_value(ctx, &name, key.trim(), value));
            p = after[end..].strip_prefix("</parameter>").unwrap_or(&after[end..]);
        }
        if !p.trim().is_empty() {
            return None;
        }
        out.push(call(name, args));
        rest = &after[used..];
        if bare {
            // A bare region holds exactly one function.
            if !rest.trim().is_empty() {
                return None;
            }
            break;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// GLM `NAME<arg_key>K</arg_key><arg_value>V</arg_value>...` (Hy3: `NAME<tool_sep>...`).
pub(crate) fn glm(text: &str, ctx: &Ctx) -> Option<Vec<Call>> {
    let t = text.trim_start();
    let name_end = ["<arg_key>", "<tool_sep>", "\n"]
        .iter()
        .filter_map(|m| t.find(m))
        .min()
        .unwrap_or(t.len());
    let name = valid_name(&t[..name_end])?;
    let mut rest = &t[name_end..];
    rest = rest.trim_start().strip_prefix("<tool_sep>").unwrap_or(rest);
    let mut args = Map::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let r = rest.strip_prefix("<arg_key>")?;
        let (key, used) = element(r, "</arg_key>");
        let r = r[used..].trim_start().strip_prefix("<arg_value>")?;
        let (value, used2) = element(r, "</arg_value>");
        args.insert(key.trim().to_string(), typed_value(ctx, &name, key.trim(), value));
        rest = &r[used2..];
    }
    Some(vec![call(name, args)])
}

/// Value of attribute `name="..."` in a tag's attribute text.
pub(crate) fn attr(tag: &str, name: &str) -> Option<String> {
    // `name="`, found without building the pattern (this runs while a head streams in).
    let mut from = 0;
    let start = loop {
        let at = from + tag[from..].find(name)?;
        let after = at + name.len();
        if tag[after..].starts_with("=\"") {
            break after + 2;
        }
        from = at + 1;
    };
    let end = tag[start..].find('"')? + start;
    let value = &tag[start..end];
    if !value.contains('&') {
        return Some(value.to_string());
    }
    Some(value.replace("&quot;", "\"").replace("&amp;", "&"))
}

pub(crate) fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// `<{p}invoke name="N"><{p}parameter name="K" [string="true|false"]>V</{p}parameter></{p}invoke>`.
/// MiniMax (empty prefix) values have XML entities decoded.
pub(crate) fn invoke(text: &str, prefix: &str, ctx: &Ctx) -> Option<Vec<Call>> {
    let open = format!("<{prefix}invoke");
    let close = format!("</{prefix}invoke>");
    let popen = format!("<{prefix}parameter");
    let pclose = format!("</{prefix}parameter>");
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let t = rest.trim_start();
        if t.is_empty() {
            break;
        }
        let (head, after) = t.strip_prefix(open.as_str())?.split_once('>')?;
        let name = valid_name(&attr(head, "name")?)?;
        let (inner, used) = element(after, &close);
        rest = &after[used..];
        if inner.trim_start().starts_with('{') {
            let v: Value = serde_json::from_str(inner.trim()).ok()?;
            out.push(Call {
                id: None,
                name,
                arguments: compact(&v),
            });
            continue;
        }
        let mut args = Map::new();
        let mut p = inner;
        loop {
            let q = p.trim_start();
            if q.is_empty() {
                break;
            }
            let (phead, after) = q.strip_prefix(popen.as_str())?.split_once('>')?;
            let key = attr(phead, "name")?;
            let (raw, used) = element(after, &pclose);
            let raw = trim_newlines(raw);
            let value = match attr(phead, "string").as_deref() {
                Some("true") => Value::String(raw.to_string()),
                Some(_) => loose_json(raw),
                None if prefix.is_empty() => typed_value(ctx, &name, &key, &decode_entities(raw)),
                None => typed_value(ctx, &name, &key, raw),
            };
            args.insert(key, value);
            p = &after[used..];
        }
        out.push(call(name, args));
    }
    (!out.is_empty()).then_some(out)
}

/// Kimi K3 `<|open|>call tool="N" index="I"<|sep|>` + arguments + `<|close|>call<|sep|>`.
pub(crate) fn kimi_k3(text: &str, ctx: &Ctx) -> Option<Vec<Call>> {
    const OPEN: &str = "<|open|>call";
    const CLOSE: &str = "<|close|>call<|sep|>";
    const AOPEN: &str = "<|open|>argument";
    const ACLOSE: &str = "<|close|>argument<|sep|>";
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let t = rest.trim_start();
        if t.is_empty() {
            break;
        }
        let (head, after) = t.strip_prefix(OPEN)?.split_once("<|sep|>")?;
        let name = valid_name(&attr(head, "tool")?)?;
        let (inner, used) = element(after, CLOSE);
        rest = &after[used..];
        let mut args = Map::new();
        let mut p = inner;
        loop {
            let q = p.trim_start();
            if q.is_empty() {
                break;
            }
            let (ahead, after) = q.strip_prefix(AOPEN)?.split_once("<|sep|>")?;
            let key = attr(ahead, "key")?;
            let (raw, used) = element(after, ACLOSE);
            let value = match attr(ahead, "type").as_deref() {
                Some("string") => Value::String(raw.to_string()),
                Some(_) => loose_json(raw),
                None => typed_value(ctx, &name, &key, raw),
            };
            args.insert(key, value);
            p = &after[used..];
        }
        out.push(call(name, args));
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolDef;

    #[test]
    fn schema_types_values() {
        let schema = serde_json::json!({"properties": {"zip": {"type": "string"}, "n": {"type": "integer"}}});
        let ctx = Ctx::new(Some(vec![ToolDef {
            name: "f".into(),
            parameters: Some(schema),
        }]));
        let c = qwen_xml(
            "<function=f>\n<parameter=zip>\n01234\n</parameter>\n<parameter=n>\n5\n</parameter>\n</function>",
            false,
            &ctx,
        )
        .unwrap();
        assert_eq!(c[0].arguments, r#"{"zip":"01234","n":5}"#);
        let c = qwen_xml(
            "<function=f><parameter=x>hi there</parameter></function>",
            false,
            &Ctx::default(),
        )
        .unwrap();
        assert_eq!(c[0].arguments, r#"{"x":"hi there"}"#);
    }

    #[test]
    fn glm_and_invoke() {
        let c = glm(
            "get\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n",
            &Ctx::default(),
        )
        .unwrap();
        assert_eq!(
            (c[0].name.as_str(), c[0].arguments.as_str()),
            ("get", r#"{"city":"Paris"}"#)
        );
        let c = invoke(
            r#"<invoke name="f"><parameter name="a">1 &amp; 2</parameter></invoke>"#,
            "",
            &Ctx::default(),
        )
        .unwrap();
        assert_eq!(c[0].arguments, r#"{"a":"1 & 2"}"#);
    }
}
