//! Literal grammars that are not JSON: Python call lists (`[f(a=1, b="x")]`), Python dict
//! lists (Sarashina) and Gemma's `call:NAME{key:<|"|>text<|"|>}` objects. One small
//! recursive-descent reader covers all three; `delim` switches to Gemma's string delimiter.
//!
//! Call arguments are written as compact JSON while the text is read (`write_value`), without a
//! `Value` tree: building and then serialising the tree cost as much as reading the text. The
//! tree path (`value`) stays for Python dict lists, whose calls are picked out of the tree, and
//! as the fallback when an object repeats a key: a map keeps the last value at the first key's
//! place, which a single forward pass cannot write.
use super::body::{compact, valid_name, Call};
use super::json_stream::{write_escaped, write_escaped_str};
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::fmt::Write as _;

/// Nesting limit, so hostile input cannot overflow the stack.
const MAX_DEPTH: usize = 64;

struct Reader<'a> {
    s: &'a str,
    pos: usize,
    /// Gemma string delimiter; `None` for Python quoting.
    delim: Option<&'a str>,
}

impl<'a> Reader<'a> {
    fn new(s: &'a str, delim: Option<&'a str>) -> Self {
        Reader { s, pos: 0, delim }
    }

    /// One call's arguments, read by `args` from just after the call's opening bracket. Where
    /// they do not read, the call is skipped to its `close` bracket with `skip_bad`
    /// (`Some(None)`); without it the whole list is not calls (`None`).
    fn call_args(
        &mut self,
        skip_bad: bool,
        close: u8,
        args: impl FnOnce(&mut Self) -> Option<String>,
    ) -> Option<Option<String>> {
        let open = self.pos;
        match args(self) {
            Some(arguments) => Some(Some(arguments)),
            None if skip_bad => {
                self.pos = open;
                self.skip_group(close)?;
                Some(None)
            }
            None => None,
        }
    }

    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn ws(&mut self) {
        let r = self.rest();
        self.pos += r.len() - r.trim_start().len();
    }

    fn eat(&mut self, c: char) -> bool {
        self.ws();
        if self.rest().starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> Option<&'a str> {
        self.ws();
        let r = self.rest();
        let n = word_len(r, |c| matches!(c, '_' | '.' | '-'));
        (n > 0).then(|| {
            self.pos += n;
            &r[..n]
        })
    }

    /// A Gemma-delimited string at the cursor: `Some(Some(text))` with the cursor past it,
    /// `Some(None)` when there is none here, `None` when it never closes.
    fn delimited(&mut self) -> Option<Option<&'a str>> {
        let Some(r) = self.delim.and_then(|d| self.rest().strip_prefix(d)) else {
            return Some(None);
        };
        let d = self.delim?;
        let end = crate::scan::find(r, d)?;
        self.pos += d.len() * 2 + end;
        Some(Some(&r[..end]))
    }

    /// Skip to just past the bracket `close` that closes a group whose opening the cursor is
    /// right after, stepping over strings and nested groups; `None` when it never closes.
    fn skip_group(&mut self, close: u8) -> Option<()> {
        let mut depth = 0u32;
        loop {
            let r = self.rest();
            if let Some(d) = self.delim.filter(|d| r.starts_with(d)) {
                let end = crate::scan::find(&r[d.len()..], d)?;
                self.pos += d.len() * 2 + end;
                continue;
            }
            let b = *r.as_bytes().first()?;
            match b {
                b'"' | b'\'' if self.delim.is_none() || b == b'"' => {
                    let body = &r.as_bytes()[1..];
                    let mut i = 0;
                    loop {
                        match body.get(i)? {
                            b'\\' => i += 2,
                            &q if q == b => break,
                            _ => i += 1,
                        }
                    }
                    self.pos += i + 2;
                    continue;
                }
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' if depth == 0 => {
                    self.pos += 1;
                    return (b == close).then_some(());
                }
                b')' | b']' | b'}' => depth -= 1,
                _ => {}
            }
            self.pos += r.chars().next().map_or(1, char::len_utf8);
        }
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        if let Some(text) = self.delimited()? {
            return Some(Value::String(text.to_string()));
        }
        let r = self.rest();
        let c = r.chars().next()?;
        match c {
            '[' | '(' => {
                self.pos += 1;
                let close = if c == '[' { ']' } else { ')' };
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        return Some(Value::Array(items));
                    }
                    items.push(self.value(depth + 1)?);
                    if !self.eat(',') && !self.rest().trim_start().starts_with(close) {
                        return None;
                    }
                }
            }
            '{' => {
                self.pos += 1;
                Some(Value::Object(self.entries(depth, '}')?))
            }
            '"' | '\'' if self.delim.is_none() || c == '"' => self.string(c),
            _ => self.scalar(),
        }
    }

    /// `key: value` entries up to `close`; keys may be bare words (Gemma) or literals.
    fn entries(&mut self, depth: usize, close: char) -> Option<Map<String, Value>> {
        let mut map = Map::new();
        loop {
            if self.eat(close) {
                return Some(map);
            }
            self.ws();
            let key = match self.rest().chars().next()? {
                '"' | '\'' => match self.value(depth + 1)? {
                    Value::String(s) => s,
                    _ => return None,
                },
                _ if self.delim.is_some_and(|d| self.rest().starts_with(d)) => match self.value(depth + 1)? {
                    Value::String(s) => s,
                    _ => return None,
                },
                _ => self.ident()?.to_string(),
            };
            if !self.eat(':') {
                return None;
            }
            map.insert(key, self.value(depth + 1)?);
            if !self.eat(',') && !self.rest().trim_start().starts_with(close) {
                return None;
            }
        }
    }

    fn string(&mut self, quote: char) -> Option<Value> {
        let triple: String = std::iter::repeat_n(quote, 3).collect();
        let (open_len, close) = if self.rest().starts_with(&triple) {
            (3, triple.as_str())
        } else {
            (1, &triple[..1])
        };
        self.pos += open_len;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            if c == '\\' {
                let (_, e) = chars.next()?;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    'u' => {
                        let hex: String = (0..4).filter_map(|_| chars.next().map(|(_, h)| h)).collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    other => out.push(other),
                }
            } else if self.rest()[i..].starts_with(close) {
                self.pos += i + close.len();
                return Some(Value::String(out));
            } else {
                out.push(c);
            }
        }
        None
    }

    fn scalar(&mut self) -> Option<Value> {
        let r = self.rest();
        let n = word_len(r, |c| matches!(c, '_' | '.' | '-' | '+'));
        let word = &r[..n];
        if n == 0 {
            return None;
        }
        self.pos += n;
        Some(match word {
            "True" | "true" => Value::Bool(true),
            "False" | "false" => Value::Bool(false),
            "None" | "null" => Value::Null,
            _ => {
                let digits = word.replace('_', "");
                if let Ok(i) = digits.parse::<i64>() {
                    Value::Number(i.into())
                } else if let Some(f) = digits.parse::<f64>().ok().and_then(Number::from_f64) {
                    Value::Number(f)
                } else if self.delim.is_some() {
                    // Gemma writes enum-like bare words.
                    Value::String(word.to_string())
                } else {
                    return None;
                }
            }
        })
    }
}

/// Byte ranges in the output of the keys written so far in the objects being written, innermost
/// last: one buffer for the whole parse, so an object costs no allocation of its own.
type Keys = Vec<(usize, usize)>;

impl Reader<'_> {
    /// Write the value at the cursor as compact JSON: the text `compact(&self.value(depth)?)`
    /// gives, built without the tree. `None` where `value` fails, and on a key repeated within
    /// one object (the caller then falls back to the tree path).
    fn write_value(&mut self, depth: usize, out: &mut String, keys: &mut Keys) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        if let Some(text) = self.delimited()? {
            write_string(text, out);
            return Some(());
        }
        // Every structural character is ASCII, so the first byte decides as the first char would.
        let c = *self.rest().as_bytes().first()?;
        match c {
            b'[' | b'(' => {
                self.pos += 1;
                let close = if c == b'[' { ']' } else { ')' };
                out.push('[');
                let mut first = true;
                loop {
                    if self.eat(close) {
                        out.push(']');
                        return Some(());
                    }
                    if !first {
                        out.push(',');
                    }
                    first = false;
                    self.write_value(depth + 1, out, keys)?;
                    if !self.eat(',') && !self.rest().trim_start().starts_with(close) {
                        return None;
                    }
                }
            }
            b'{' => {
                self.pos += 1;
                self.write_entries(depth, '}', out, keys)
            }
            b'"' | b'\'' if self.delim.is_none() || c == b'"' => self.write_quoted(c, out),
            _ => self.write_scalar(out),
        }
    }

    /// `entries` written as a JSON object (the cursor is past the opening bracket).
    fn write_entries(&mut self, depth: usize, close: char, out: &mut String, keys: &mut Keys) -> Option<()> {
        let base = keys.len();
        out.push('{');
        loop {
            if self.eat(close) {
                out.push('}');
                keys.truncate(base);
                return Some(());
            }
            self.ws();
            if keys.len() > base {
                out.push(',');
            }
            let key_start = out.len();
            let first = *self.rest().as_bytes().first()?;
            if matches!(first, b'"' | b'\'') || self.delim.is_some_and(|d| self.rest().starts_with(d)) {
                // A quoted key reads as a string value (`value` never returns anything else here).
                self.write_value(depth + 1, out, keys)?;
            } else {
                write_string(self.ident()?, out);
            }
            new_key(out, key_start, base, keys)?;
            if !self.eat(':') {
                return None;
            }
            out.push(':');
            self.write_value(depth + 1, out, keys)?;
            if !self.eat(',') && !self.rest().trim_start().starts_with(close) {
                return None;
            }
        }
    }

    /// `string` written as a JSON string: runs without escapes or quotes are copied whole.
    fn write_quoted(&mut self, quote: u8, out: &mut String) -> Option<()> {
        let triple = [quote; 3];
        let close_len = if self.rest().as_bytes().starts_with(&triple) {
            3
        } else {
            1
        };
        self.pos += close_len;
        let s = self.rest();
        let bytes = s.as_bytes();
        out.push('"');
        let (mut i, mut run) = (0, 0);
        loop {
            let p = i + memchr::memchr2(quote, b'\\', &bytes[i..])?;
            if bytes[p] == b'\\' {
                write_escaped_str(&s[run..p], out);
                let mut chars = s[p + 1..].chars();
                let decoded = match chars.next()? {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    'u' => {
                        let mut hex = [0u8; 16];
                        let mut len = 0;
                        for h in (0..4).filter_map(|_| chars.next()) {
                            len += h.encode_utf8(&mut hex[len..]).len();
                        }
                        let hex = std::str::from_utf8(&hex[..len]).ok()?;
                        char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
                    }
                    other => other,
                };
                write_escaped(decoded, out);
                i = s.len() - chars.as_str().len();
                run = i;
            } else if bytes[p..].starts_with(&triple[..close_len]) {
                write_escaped_str(&s[run..p], out);
                out.push('"');
                self.pos += p + close_len;
                return Some(());
            } else {
                // A lone quote inside a triple-quoted string is text.
                i = p + 1;
            }
        }
    }

    /// `scalar` written as JSON.
    fn write_scalar(&mut self, out: &mut String) -> Option<()> {
        let r = self.rest();
        let n = word_len(r, |c| matches!(c, '_' | '.' | '-' | '+'));
        if n == 0 {
            return None;
        }
        let word = &r[..n];
        self.pos += n;
        match word {
            "True" | "true" => out.push_str("true"),
            "False" | "false" => out.push_str("false"),
            "None" | "null" => out.push_str("null"),
            _ => {
                let digits = if word.contains('_') {
                    Cow::Owned(word.replace('_', ""))
                } else {
                    Cow::Borrowed(word)
                };
                if let Ok(i) = digits.parse::<i64>() {
                    write!(out, "{i}").ok()?;
                } else if let Some(f) = digits.parse::<f64>().ok().and_then(Number::from_f64) {
                    write!(out, "{f}").ok()?;
                } else if self.delim.is_some() {
                    write_string(word, out);
                } else {
                    return None;
                }
            }
        }
        Some(())
    }
}

/// `text` as a JSON string.
fn write_string(text: &str, out: &mut String) {
    out.push('"');
    write_escaped_str(text, out);
    out.push('"');
}

/// Record the key just written at `out[start..]`; `None` when the object being written (whose
/// keys start at `keys[base]`) already has it. Escaping is one-to-one, so equal text is an equal key.
fn new_key(out: &str, start: usize, base: usize, keys: &mut Keys) -> Option<()> {
    let key = &out[start..];
    if keys[base..].iter().any(|&(a, b)| &out[a..b] == key) {
        return None;
    }
    keys.push((start, out.len()));
    Some(())
}

/// Length of the word at the start of `r`: alphanumeric characters and those `extra` accepts.
/// ASCII, the usual case, is tested byte by byte; `char` decoding starts at the first other byte.
fn word_len(r: &str, extra: impl Fn(char) -> bool) -> usize {
    let bytes = r.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b >= 0x80 {
            let tail = &r[i..];
            return i + tail
                .find(|c: char| !(c.is_alphanumeric() || extra(c)))
                .unwrap_or(tail.len());
        }
        if !(b.is_ascii_alphanumeric() || extra(char::from(b))) {
            return i;
        }
        i += 1;
    }
    i
}

/// A whole Python literal.
pub(crate) fn python_value(text: &str) -> Option<Value> {
    let mut r = Reader::new(text, None);
    let v = r.value(0)?;
    r.ws();
    r.rest().is_empty().then_some(v)
}

/// `[f(a=1), g()]`, or calls separated by commas or newlines without brackets. A call whose
/// arguments do not read (`bad(x=b'z')`, a non-finite number) is skipped, as vLLM skips a bad
/// sibling; with no good call the text is not calls.
///
/// Arguments are written as JSON while reading; a repeated key (where a map keeps the last value
/// at the first key's position) takes the `Value` tree instead, for that call.
pub(crate) fn pythonic_calls(text: &str) -> Option<Vec<Call>> {
    let mut keys = Keys::new();
    pythonic_list(text, true, |r| python_args(r, &mut keys))
}

/// One call's `k=v, ...)`: written directly, or through the tree when a key repeats.
fn python_args(r: &mut Reader<'_>, keys: &mut Keys) -> Option<String> {
    let start = r.pos;
    pythonic_args_direct(r, keys).or_else(|| {
        r.pos = start;
        pythonic_args_tree(r).map(|m| compact(&Value::Object(m)))
    })
}

/// A Llama 3.1 built-in tool call after `<|python_tag|>`: `NAME.call(k=v, ...)`.
pub(crate) fn builtin_call(text: &str) -> Option<Vec<Call>> {
    let mut r = Reader::new(text.trim(), None);
    let name = valid_name(r.ident()?.strip_suffix(".call")?)?;
    if !r.eat('(') {
        return None;
    }
    let arguments = python_args(&mut r, &mut Keys::new())?;
    r.ws();
    r.rest().is_empty().then(|| {
        vec![Call {
            id: None,
            name,
            arguments,
        }]
    })
}

#[cfg(test)]
fn pythonic_calls_direct(text: &str) -> Option<Vec<Call>> {
    let mut keys = Keys::new();
    pythonic_list(text, false, |r| pythonic_args_direct(r, &mut keys))
}

#[cfg(test)]
fn pythonic_calls_tree(text: &str, skip_bad: bool) -> Option<Vec<Call>> {
    pythonic_list(text, skip_bad, |r| {
        pythonic_args_tree(r).map(|m| compact(&Value::Object(m)))
    })
}

/// The call list of pythonic output; `args` reads one call's arguments after its `(`, through
/// the closing `)`, and returns them as compact JSON. `skip_bad`: a call whose arguments do not
/// read is skipped (to its closing parenthesis) instead of failing the list.
fn pythonic_list(
    text: &str,
    skip_bad: bool,
    mut args: impl FnMut(&mut Reader<'_>) -> Option<String>,
) -> Option<Vec<Call>> {
    let mut r = Reader::new(text, None);
    let bracketed = r.eat('[');
    let mut out = Vec::new();
    loop {
        while r.eat(',') {}
        r.ws();
        if r.rest().is_empty() {
            if bracketed {
                return None;
            }
            break;
        }
        if bracketed && r.eat(']') {
            r.ws();
            if !r.rest().is_empty() {
                return None;
            }
            break;
        }
        let name = valid_name(r.ident()?)?;
        if !r.eat('(') {
            return None;
        }
        if let Some(arguments) = r.call_args(skip_bad, b')', &mut args)? {
            out.push(Call {
                id: None,
                name,
                arguments,
            });
        }
    }
    (!out.is_empty()).then_some(out)
}

/// `k=v, ...)` written straight as a compact JSON object; `None` also on a repeated key.
fn pythonic_args_direct(r: &mut Reader<'_>, keys: &mut Keys) -> Option<String> {
    keys.clear();
    let mut args = String::with_capacity(r.rest().len());
    args.push('{');
    loop {
        if r.eat(')') {
            break;
        }
        let key = r.ident()?;
        if !r.eat('=') {
            return None;
        }
        if !keys.is_empty() {
            args.push(',');
        }
        let key_start = args.len();
        write_string(key, &mut args);
        new_key(&args, key_start, 0, keys)?;
        args.push(':');
        r.write_value(1, &mut args, keys)?;
        if !r.eat(',') && !r.rest().trim_start().starts_with(')') {
            return None;
        }
    }
    args.push('}');
    Some(args)
}

/// `k=v, ...)` as a map (a repeated key keeps its first position and its last value).
fn pythonic_args_tree(r: &mut Reader<'_>) -> Option<Map<String, Value>> {
    let mut args = Map::new();
    loop {
        if r.eat(')') {
            break;
        }
        let key = r.ident()?.to_string();
        if !r.eat('=') {
            return None;
        }
        args.insert(key, r.value(1)?);
        if !r.eat(',') && !r.rest().trim_start().starts_with(')') {
            return None;
        }
    }
    Some(args)
}

/// Gemma `call:NAME{k:v,...}`, possibly several in a row; also the `call:NAME(k="v")` and
/// `:call:NAME{...}` variants Gemma 4 writes. As for pythonic calls: direct JSON, or the `Value`
/// tree when a key repeats, and a call whose arguments do not read is skipped.
pub(crate) fn gemma_calls(text: &str, delim: &str) -> Option<Vec<Call>> {
    let mut keys = Keys::new();
    gemma_list(text, delim, true, |r| {
        let start = r.pos;
        gemma_args_direct(r, &mut keys).or_else(|| {
            r.pos = start;
            r.entries(1, '}').map(|m| compact(&Value::Object(m)))
        })
    })
}

/// One call's `k:v,...}` written directly.
fn gemma_args_direct(r: &mut Reader<'_>, keys: &mut Keys) -> Option<String> {
    // JSON is about as long as the literal: one allocation for the usual single call.
    let mut arguments = String::with_capacity(r.rest().len());
    r.write_entries(1, '}', &mut arguments, keys)?;
    Some(arguments)
}

#[cfg(test)]
fn gemma_calls_direct(text: &str, delim: &str) -> Option<Vec<Call>> {
    let mut keys = Keys::new();
    gemma_list(text, delim, false, |r| gemma_args_direct(r, &mut keys))
}

#[cfg(test)]
fn gemma_calls_tree(text: &str, delim: &str, skip_bad: bool) -> Option<Vec<Call>> {
    gemma_list(text, delim, skip_bad, |r| {
        r.entries(1, '}').map(|m| compact(&Value::Object(m)))
    })
}

/// The calls of Gemma output; `args` reads one call's arguments after its `{`, through the `}`.
fn gemma_list(
    text: &str,
    delim: &str,
    skip_bad: bool,
    mut args: impl FnMut(&mut Reader<'_>) -> Option<String>,
) -> Option<Vec<Call>> {
    let mut r = Reader::new(text, Some(delim));
    let mut out = Vec::new();
    let mut keys = Keys::new();
    loop {
        r.ws();
        if r.rest().is_empty() {
            break;
        }
        // A stray colon after `<|tool_call>` (`<|tool_call>:call:bash{...}`).
        r.pos += usize::from(r.rest().starts_with(":call:"));
        r.pos += "call:".len() * usize::from(r.rest().starts_with("call:"));
        let name = valid_name(r.ident()?)?;
        let arguments = if r.eat('{') {
            r.call_args(skip_bad, b'}', &mut args)?
        } else if r.eat('(') {
            r.call_args(skip_bad, b')', |r| python_args(r, &mut keys))?
        } else {
            return None;
        };
        if let Some(arguments) = arguments {
            out.push(Call {
                id: None,
                name,
                arguments,
            });
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::body::calls_from_values;
    use proptest::prelude::*;

    fn python_dict_calls(text: &str) -> Option<Vec<Call>> {
        calls_from_values(&[python_value(text)?])
    }

    #[test]
    fn pythonic() {
        let c = pythonic_calls(r#"[get_weather(city="Paris", days=3, opts={'a': [1, 2.5, None]}), noop()]"#).unwrap();
        assert_eq!(c[0].arguments, r#"{"city":"Paris","days":3,"opts":{"a":[1,2.5,null]}}"#);
        assert_eq!((c[1].name.as_str(), c[1].arguments.as_str()), ("noop", "{}"));
        assert!(pythonic_calls("[not a call]").is_none());
        assert!(pythonic_calls("[f(1)]").is_none());
    }

    /// A generated literal value: `gemma` picks Gemma's delimited strings and bare words, else
    /// Python quoting. Keys come from a small set so that objects often repeat one.
    fn literal(gemma: bool) -> impl Strategy<Value = String> {
        let quoted = if gemma {
            "[a-z \"'\\\\,:{}()\\[\\]\n\t\u{1}é😀]{0,8}"
                .prop_map(|s| format!("<|\"|>{s}<|\"|>"))
                .boxed()
        } else {
            prop_oneof![
                "[a-z \"é😀\\[]{0,6}".prop_map(|s| format!("'{s}'")),
                "[a-z 'é\t]{0,6}".prop_map(|s| format!("\"{s}\"")),
                "[a-z \"']{0,6}".prop_map(|s| format!("'''{s}x'''")),
                proptest::sample::select(vec![
                    r#""a\nb""#,
                    r#"'\u00e9\t\\'"#,
                    r#""\"\x""#,
                    r#"'\u12'"#,
                    r#"'\0'"#
                ])
                .prop_map(String::from),
            ]
            .boxed()
        };
        let leaf = prop_oneof![
            quoted,
            any::<i64>().prop_map(|i| i.to_string()),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| f.to_string()),
            proptest::sample::select(vec![
                "1e5",
                "1_000",
                "+7",
                "-0",
                "0.50",
                "inf",
                "nan",
                "1.2.3",
                "True",
                "false",
                "None",
                "null",
                "-",
                "enum_word",
                "a.b-c",
            ])
            .prop_map(String::from),
        ];
        let key = if gemma {
            prop_oneof![
                proptest::sample::select(vec!["a", "b", "c"]).prop_map(String::from),
                "[ab\"]{1,2}".prop_map(|k| format!("<|\"|>{k}<|\"|>")),
                Just("\"a\"".to_string()),
            ]
            .boxed()
        } else {
            proptest::sample::select(vec!["'a'", "'b'", "\"a\"", "'c\\n'"])
                .prop_map(String::from)
                .boxed()
        };
        leaf.prop_recursive(3, 24, 4, move |inner| {
            let entries = proptest::collection::vec((key.clone(), inner.clone()), 0..4);
            prop_oneof![
                (entries, any::<bool>()).prop_map(|(kv, trailing)| {
                    let body: Vec<String> = kv.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                    let comma = if trailing && !kv.is_empty() { "," } else { "" };
                    format!("{{{}{comma}}}", body.join(", "))
                }),
                (proptest::collection::vec(inner, 0..4), any::<bool>()).prop_map(|(items, tuple)| {
                    let (o, c) = if tuple { ('(', ')') } else { ('[', ']') };
                    format!("{o}{}{c}", items.join(","))
                }),
            ]
        })
    }

    /// Calls with generated arguments, in Gemma's or the Pythonic form.
    fn call_text(gemma: bool) -> impl Strategy<Value = String> {
        let args = proptest::collection::vec(
            (proptest::sample::select(vec!["a", "b", "c", "d"]), literal(gemma)),
            0..4,
        );
        proptest::collection::vec(("[a-z_]{1,6}", args), 1..3).prop_map(move |calls| {
            let calls: Vec<String> = calls
                .iter()
                .map(|(name, args)| {
                    let sep = if gemma { ":" } else { "=" };
                    let args: Vec<String> = args.iter().map(|(k, v)| format!("{k}{sep}{v}")).collect();
                    if gemma {
                        format!("call:{name}{{{}}}", args.join(","))
                    } else {
                        format!("{name}({})", args.join(", "))
                    }
                })
                .collect();
            if gemma {
                calls.join("\n")
            } else {
                format!("[{}]", calls.join(", "))
            }
        })
    }

    const D: &str = "<|\"|>";

    proptest! {
        /// The direct writer gives what the `Value` tree path gives, or declines (and the tree
        /// path then answers), on generated Gemma literals.
        #[test]
        fn gemma_direct_equals_tree(text in call_text(true)) {
            let tree = gemma_calls_tree(&text, D, false);
            if let Some(direct) = gemma_calls_direct(&text, D) {
                prop_assert_eq!(Some(direct), tree.clone());
            }
            prop_assert_eq!(gemma_calls(&text, D), gemma_calls_tree(&text, D, true));
        }

        /// The same for Pythonic calls.
        #[test]
        fn pythonic_direct_equals_tree(text in call_text(false)) {
            let tree = pythonic_calls_tree(&text, false);
            if let Some(direct) = pythonic_calls_direct(&text) {
                prop_assert_eq!(Some(direct), tree.clone());
            }
            prop_assert_eq!(pythonic_calls(&text), pythonic_calls_tree(&text, true));
        }

        /// Noise made of the grammar's pieces: both paths fail or agree.
        #[test]
        fn direct_equals_tree_on_noise(
            text in r#"(call:f\{|f\(|[a-c]|:|,|<\|"\|>|'|"|\\|[{}()\[\]]|=|1|x| |é){0,30}"#
        ) {
            if let Some(direct) = gemma_calls_direct(&text, D) {
                prop_assert_eq!(Some(direct), gemma_calls_tree(&text, D, false));
            }
            if let Some(direct) = pythonic_calls_direct(&text) {
                prop_assert_eq!(Some(direct), pythonic_calls_tree(&text, false));
            }
            prop_assert_eq!(gemma_calls(&text, D), gemma_calls_tree(&text, D, true));
            prop_assert_eq!(pythonic_calls(&text), pythonic_calls_tree(&text, true));
        }
    }

    #[test]
    fn repeated_keys_fall_back_to_the_tree() {
        let text = r#"call:f{a:1,b:<|"|>x<|"|>,a:2}"#;
        assert!(gemma_calls_direct(text, D).is_none());
        assert_eq!(gemma_calls(text, D).unwrap()[0].arguments, r#"{"a":2,"b":"x"}"#);
        // The same key in different objects is no repeat.
        let text = r#"call:f{a:{a:1},b:[{a:2},{a:3}]}"#;
        let c = gemma_calls_direct(text, D).unwrap();
        assert_eq!(c[0].arguments, r#"{"a":{"a":1},"b":[{"a":2},{"a":3}]}"#);
    }

    #[test]
    fn gemma_and_dicts() {
        let c = gemma_calls(r#"call:get{city:<|"|>Paris, "FR"<|"|>,n:42,ok:true,l:[1,2]}"#, "<|\"|>").unwrap();
        assert_eq!(c[0].arguments, r#"{"city":"Paris, \"FR\"","n":42,"ok":true,"l":[1,2]}"#);
        let c = python_dict_calls("[{'name': 'f', 'arguments': {'x': 'y'}}]").unwrap();
        assert_eq!(c[0].arguments, r#"{"x":"y"}"#);
    }
}
