//! XML-style parameter bodies (Qwen XML, GLM, `<invoke>` blocks, Kimi K3), read whole. Values are
//! raw text typed as each format's reference parser types them (`value.rs`).
use super::body::{compact, valid_name, Call};
use super::ctx::Ctx;
use super::value::{self, loose_json, marked_value, Trim, Typing};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// Text between `open` and `close` after `from`: `(inner, offset after close)`; an unclosed
/// element runs to the end.
fn element<'a>(text: &'a str, close: &str) -> (&'a str, usize) {
    match text.find(close) {
        Some(p) => (&text[..p], p + close.len()),
        None => (text, text.len()),
    }
}

/// The elements `open HEAD sep BODY close` of `text`, one after another with only whitespace
/// between them, as `(head, body)`; an item is `None` (and the last) where anything else stands.
/// The last element may be unclosed (it runs to the end). With an empty `sep` every head is
/// empty and a body is all of the element.
fn elements<'a, 'p>(text: &'a str, open: &'p str, sep: &'p str, close: &'p str) -> Elements<'a, 'p> {
    Elements {
        rest: text,
        open,
        sep,
        close,
    }
}

struct Elements<'a, 'p> {
    rest: &'a str,
    open: &'p str,
    sep: &'p str,
    close: &'p str,
}

impl<'a> Iterator for Elements<'a, '_> {
    type Item = Option<(&'a str, &'a str)>;

    fn next(&mut self) -> Option<Self::Item> {
        let t = self.rest.trim_start();
        if t.is_empty() {
            return None;
        }
        let Some((head, after)) = t.strip_prefix(self.open).and_then(|a| a.split_once(self.sep)) else {
            self.rest = "";
            return Some(None);
        };
        let (body, used) = element(after, self.close);
        self.rest = &after[used..];
        Some(Some((head, body)))
    }
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
            let raw = value::trim(&after[..end], Trim::Newline);
            let value = value::typed(ctx, &name, key.trim(), raw, Typing::Schema);
            args.insert(key.trim().to_string(), value);
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

/// The key and value tags of a GLM-style body.
pub(crate) struct GlmTags {
    key: &'static str,
    key_close: &'static str,
    value: &'static str,
    value_close: &'static str,
}

const GLM_TAGS: GlmTags = GlmTags {
    key: "<arg_key>",
    key_close: "</arg_key>",
    value: "<arg_value>",
    value_close: "</arg_value>",
};

/// LongCat Flash Lite / Thinking.
pub(crate) const LONGCAT_TAGS: GlmTags = GlmTags {
    key: "<longcat_arg_key>",
    key_close: "</longcat_arg_key>",
    value: "<longcat_arg_value>",
    value_close: "</longcat_arg_value>",
};

/// GLM `NAME<arg_key>K</arg_key><arg_value>V</arg_value>...` (Hy3: `NAME<tool_sep>...`).
pub(crate) fn glm(text: &str, ctx: &Ctx) -> Option<Vec<Call>> {
    glm_tags(text, &GLM_TAGS, ctx)
}

/// The GLM grammar with the key and value tags of `tags`; whitespace (newlines) between a key
/// and its value, and around them, is not part of either.
pub(crate) fn glm_tags(text: &str, tags: &GlmTags, ctx: &Ctx) -> Option<Vec<Call>> {
    let t = text.trim_start();
    let name_end = [tags.key, "<tool_sep>", "\n"]
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
        let r = rest.strip_prefix(tags.key)?;
        let (key, used) = element(r, tags.key_close);
        let r = r[used..].trim_start().strip_prefix(tags.value)?;
        let (raw, used2) = element(r, tags.value_close);
        let value = value::typed(ctx, &name, key.trim(), raw.trim(), Typing::Loose);
        args.insert(key.trim().to_string(), value);
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

/// `s` with XML entities decoded; borrowed when it has none.
pub(crate) fn decode_entities(s: &str) -> Cow<'_, str> {
    if !s.contains('&') {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// `<{p}invoke name="N"><{p}parameter name="K" [string="true|false"]>V</{p}parameter></{p}invoke>`.
/// MiniMax (empty prefix) values have XML entities decoded. A malformed invoke block (no or an
/// empty name, a body that is neither parameters nor JSON) is skipped, as SMG and vLLM skip it;
/// with no good block the region is text.
pub(crate) fn invoke(text: &str, prefix: &str, ctx: &Ctx) -> Option<Vec<Call>> {
    let open = format!("<{prefix}invoke");
    let close = format!("</{prefix}invoke>");
    let mut out = Vec::new();
    // The head (`name="N"`) is read by `invoke_block`, where a bad one skips the block.
    for block in elements(text, &open, "", &close) {
        let (_, block) = block?;
        if let Some(call) = invoke_block(block, prefix, ctx) {
            out.push(call);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// One invoke block: the text after `<{prefix}invoke` up to its closing tag.
fn invoke_block(block: &str, prefix: &str, ctx: &Ctx) -> Option<Call> {
    let (head, inner) = block.split_once('>')?;
    let name = valid_name(&attr(head, "name")?)?;
    if inner.trim_start().starts_with('{') {
        let v: Value = serde_json::from_str(inner.trim()).ok()?;
        return Some(Call {
            id: None,
            name,
            arguments: compact(&v),
        });
    }
    let popen = format!("<{prefix}parameter");
    let pclose = format!("</{prefix}parameter>");
    let mut args = Map::new();
    for param in elements(inner, &popen, ">", &pclose) {
        let (phead, raw) = param?;
        let key = attr(phead, "name")?;
        let value = match attr(phead, "string").as_deref() {
            Some(flag) => marked_value(ctx, &name, &key, value::trim(raw, Trim::Newline), flag == "true"),
            // MiniMax M2: entities decoded, the reference parser's types.
            None if prefix.is_empty() => {
                let text = decode_entities(value::trim(raw, Trim::All));
                value::typed(ctx, &name, &key, &text, Typing::Schema)
            }
            None => value::typed(ctx, &name, &key, value::trim(raw, Trim::Newline), Typing::Loose),
        };
        args.insert(key, value);
    }
    Some(call(name, args))
}

/// Kimi K3 `<|open|>call tool="N" index="I"<|sep|>` + arguments + `<|close|>call<|sep|>`.
pub(crate) fn kimi_k3(text: &str, ctx: &Ctx) -> Option<Vec<Call>> {
    const OPEN: &str = "<|open|>call";
    const CLOSE: &str = "<|close|>call<|sep|>";
    const AOPEN: &str = "<|open|>argument";
    const ACLOSE: &str = "<|close|>argument<|sep|>";
    const SEP: &str = "<|sep|>";
    let mut out = Vec::new();
    for call_element in elements(text, OPEN, SEP, CLOSE) {
        let (head, inner) = call_element?;
        let name = valid_name(&attr(head, "tool")?)?;
        let mut args = Map::new();
        for argument in elements(inner, AOPEN, SEP, ACLOSE) {
            let (ahead, raw) = argument?;
            let key = attr(ahead, "key")?;
            let value = match attr(ahead, "type").as_deref() {
                Some("string") => Value::String(raw.to_string()),
                Some(_) => loose_json(raw),
                None => value::typed(ctx, &name, &key, raw, Typing::Loose),
            };
            args.insert(key, value);
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
    fn elements_split_heads_and_bodies() {
        let got: Vec<_> = elements(" <a x>1</a>\n<a y>2", "<a", ">", "</a>").collect();
        assert_eq!(got, [Some((" x", "1")), Some((" y", "2"))]);
        let got: Vec<_> = elements("<a>1</a> junk <a>2</a>", "<a", "", "</a>").collect();
        assert_eq!(got, [Some(("", ">1")), None]);
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
