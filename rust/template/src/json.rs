//! The `tojson` filter as transformers defines it: Python's
//! `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
//!
//! Byte-exactness matters because tool schemas and tool-call arguments are pasted into prompts with it:
//! Python writes `", "`/`": "` separators, floats as `repr` (`1e-07`, `-0.0`), keeps key order and does
//! not HTML-escape, unlike minijinja's built-in `tojson`.

use crate::dict::PairDict;
use crate::doc::{Node, NodeRef};
use crate::filters::invalid;
use crate::pyrepr::write_float;
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::Error;
use std::fmt::Write;

/// Options of Python's `json.dumps` that templates pass.
#[derive(Debug, Clone)]
pub struct DumpOptions {
    pub ensure_ascii: bool,
    pub indent: Option<String>,
    pub item_sep: String,
    pub key_sep: String,
    pub sort_keys: bool,
}

impl Default for DumpOptions {
    fn default() -> Self {
        Self {
            ensure_ascii: false,
            indent: None,
            item_sep: ", ".into(),
            key_sep: ": ".into(),
            sort_keys: false,
        }
    }
}

/// The largest `tojson(indent=N)` accepted.
const MAX_INDENT: i64 = 1024;

/// The `tojson` filter: `value | tojson(indent=2, ensure_ascii=True, separators=(',', ':'), sort_keys=True)`.
pub fn tojson_filter(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let opts = dump_options(indent, kwargs)?;
    let mut out = String::new();
    dump(&mut out, value, &opts, 0)?;
    Ok(Value::from(out))
}

/// The options of a `tojson(indent, ensure_ascii=..., separators=..., sort_keys=...)` call.
pub(crate) fn dump_options(indent: Option<Value>, kwargs: Kwargs) -> Result<DumpOptions, Error> {
    let mut opts = DumpOptions::default();
    let indent = match kwargs.get::<Option<Value>>("indent")? {
        Some(v) => Some(v),
        None => indent,
    };
    if let Some(indent) = indent.filter(|v| !v.is_none() && !v.is_undefined()) {
        opts.indent = Some(match indent.as_str() {
            Some(s) => s.to_string(),
            None => {
                let n = i64::try_from(indent.clone())?;
                // An absurd indent would exhaust memory at the first nested value; refuse it.
                if n > MAX_INDENT {
                    return Err(invalid(format!("tojson indent {n} is larger than {MAX_INDENT}")));
                }
                " ".repeat(n.max(0) as usize)
            }
        });
        opts.item_sep = ",".into();
    }
    if let Some(v) = kwargs.get::<Option<bool>>("ensure_ascii")? {
        opts.ensure_ascii = v;
    }
    if let Some(v) = kwargs.get::<Option<bool>>("sort_keys")? {
        opts.sort_keys = v;
    }
    if let Some(seps) = kwargs.get::<Option<Value>>("separators")? {
        if !seps.is_none() {
            let parts: Vec<Value> = seps.try_iter()?.collect();
            match parts.as_slice() {
                [a, b] => {
                    opts.item_sep = a.as_str().unwrap_or_default().to_string();
                    opts.key_sep = b.as_str().unwrap_or_default().to_string();
                }
                _ => {
                    return Err(invalid("separators must be a (item, key) pair"));
                }
            }
        }
    }
    kwargs.assert_all_used()?;
    Ok(opts)
}

/// [`dump`] for a document value, read in place. Scalars go through [`dump`] (no allocation for them);
/// with `sort_keys` the value is converted first.
pub(crate) fn dump_node(out: &mut String, node: NodeRef<'_>, opts: &DumpOptions, depth: usize) -> Result<(), Error> {
    match node.node() {
        Node::Str(..) => write_json_str(out, node.as_str().unwrap_or_default(), opts.ensure_ascii),
        Node::List(first, len) => write_items(out, opts, depth, LIST, 0..len, |out, k| {
            dump_node(out, node.child(first, k), opts, depth + 1)
        })?,
        Node::Dict(..) if opts.sort_keys => dump(out, &node.to_value(), opts, depth)?,
        Node::Dict(first, len) => write_items(out, opts, depth, OBJECT, 0..len, |out, k| {
            let key = node.child(first, 2 * k);
            match key.as_str() {
                Some(s) => write_json_str(out, s, opts.ensure_ascii),
                None => write_key(out, &key.to_value(), opts)?,
            }
            out.push_str(&opts.key_sep);
            dump_node(out, node.child(first, 2 * k + 1), opts, depth + 1)
        })?,
        _ => dump(out, &node.to_value(), opts, depth)?,
    }
    Ok(())
}

/// Serialise `value` like `json.dumps` with `opts`.
pub fn dump(out: &mut String, value: &Value, opts: &DumpOptions, depth: usize) -> Result<(), Error> {
    if crate::none::is_py_none(value) {
        out.push_str("null");
        return Ok(());
    }
    if crate::generators::is_generator(value) {
        return Err(invalid("Object of type generator is not JSON serializable"));
    }
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => {
            if value.is_integer() {
                let _ = write!(out, "{value}");
            } else {
                let f = f64::try_from(value.clone())?;
                if f.is_nan() {
                    out.push_str("NaN");
                } else if f.is_infinite() {
                    out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
                } else {
                    write_float(out, f);
                }
            }
        }
        ValueKind::String => write_json_str(out, value.as_str().unwrap_or_default(), opts.ensure_ascii),
        // Lists and small dicts from the input are walked in place (no collected copies).
        ValueKind::Seq if value.downcast_object_ref::<Vec<Value>>().is_some() => {
            let items = value.downcast_object_ref::<Vec<Value>>().map_or(&[][..], Vec::as_slice);
            dump_seq(out, items, opts, depth)?;
        }
        ValueKind::Map if !opts.sort_keys && value.downcast_object_ref::<PairDict>().is_some() => {
            let pairs = value.downcast_object_ref::<PairDict>().map_or(&[][..], PairDict::pairs);
            write_items(out, opts, depth, OBJECT, pairs, |out, (key, item)| {
                write_key(out, key, opts)?;
                out.push_str(&opts.key_sep);
                dump(out, item, opts, depth + 1)
            })?;
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            dump_seq(out, &items, opts, depth)?;
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if opts.sort_keys {
                keys.sort();
            }
            write_items(out, opts, depth, OBJECT, &keys, |out, key| {
                write_key(out, key, opts)?;
                out.push_str(&opts.key_sep);
                dump(out, &value.get_item(key)?, opts, depth + 1)
            })?;
        }
        ValueKind::Undefined => {
            return Err(invalid("Object of type Undefined is not JSON serializable"));
        }
        other => {
            return Err(invalid(format!("Object of type {other} is not JSON serializable")));
        }
    }
    Ok(())
}

fn dump_seq(out: &mut String, items: &[Value], opts: &DumpOptions, depth: usize) -> Result<(), Error> {
    write_items(out, opts, depth, LIST, items, |out, item| {
        dump(out, item, opts, depth + 1)
    })
}

/// The brackets of a JSON array and of an object, for [`write_items`].
const LIST: [char; 2] = ['[', ']'];
const OBJECT: [char; 2] = ['{', '}'];

/// Write a JSON array or object (`brackets`) at `depth` as `json.dumps` lays it out: `[]`/`{}` when
/// there are no `items`, else each item, written by `write`, after the item separator and the
/// indentation of `depth + 1`, and the closing bracket on a line of its own when indenting.
fn write_items<T>(
    out: &mut String,
    opts: &DumpOptions,
    depth: usize,
    [open, close]: [char; 2],
    items: impl IntoIterator<Item = T>,
    mut write: impl FnMut(&mut String, T) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    let mut empty = true;
    for item in items {
        if !empty {
            out.push_str(&opts.item_sep);
        }
        empty = false;
        newline_indent(out, opts, depth + 1);
        write(out, item)?;
    }
    if !empty {
        newline_indent(out, opts, depth);
    }
    out.push(close);
    Ok(())
}

/// Dict keys: strings as-is; Python turns numbers, bools and None into strings.
fn write_key(out: &mut String, key: &Value, opts: &DumpOptions) -> Result<(), Error> {
    match key.kind() {
        ValueKind::String => write_json_str(out, key.as_str().unwrap_or_default(), opts.ensure_ascii),
        ValueKind::None => out.push_str("\"null\""),
        ValueKind::Bool => out.push_str(if key.is_true() { "\"true\"" } else { "\"false\"" }),
        ValueKind::Number => {
            out.push('"');
            dump(out, key, opts, 0)?;
            out.push('"');
        }
        other => {
            return Err(invalid(format!(
                "keys must be str, int, float, bool or None, not {other}"
            )));
        }
    }
    Ok(())
}

fn newline_indent(out: &mut String, opts: &DumpOptions, depth: usize) {
    if let Some(indent) = &opts.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    }
}

/// A JSON string literal with Python's escapes.
/// Bytes that stop [`write_json_str`]'s copy: control bytes, `"` and `\\`; with `ensure_ascii` also
/// every byte above `~` (the first byte of a non-ASCII character, or DEL).
const fn stop_table(ensure_ascii: bool) -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = b < 0x20 || b == b'"' as usize || b == b'\\' as usize || (ensure_ascii && b > 0x7e);
        b += 1;
    }
    t
}

static STOP_ASCII: [bool; 256] = stop_table(true);
static STOP_UTF8: [bool; 256] = stop_table(false);

pub fn write_json_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.reserve(s.len() + 2);
    out.push('"');
    // Runs that need no escape are copied whole; only the bytes Python escapes stop the scan
    // (each is ASCII, or with `ensure_ascii` the first byte of a character, so `i` stays on a
    // character boundary).
    let bytes = s.as_bytes();
    let stops = if ensure_ascii { &STOP_ASCII } else { &STOP_UTF8 };
    let (mut run, mut i) = (0, 0);
    while let Some(&b) = bytes.get(i) {
        if !stops[b as usize] {
            i += 1;
            continue;
        }
        out.push_str(&s[run..i]);
        let Some(c) = s[i..].chars().next() else { break };
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{:04x}", unit);
                }
            }
        }
        i += c.len_utf8();
        run = i;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Without `ensure_ascii`, Python's string escapes are serde_json's; with it, the text is
        /// ASCII and reads back as the same string.
        #[test]
        fn strings_escape_as_python_does(s in "(\\PC|[\\x00-\\x1f\\x7f\"\\\\é😀])*") {
            let mut plain = String::new();
            write_json_str(&mut plain, &s, false);
            prop_assert_eq!(&plain, &serde_json::to_string(&s).unwrap());
            let mut ascii = String::new();
            write_json_str(&mut ascii, &s, true);
            let only_printable_ascii = ascii.bytes().all(|b| (0x20..0x7f).contains(&b));
            prop_assert!(only_printable_ascii, "{}", ascii);
            prop_assert_eq!(serde_json::from_str::<String>(&ascii).unwrap(), s);
        }
    }

    fn dumps(v: serde_json::Value, opts: &DumpOptions) -> String {
        let mut s = String::new();
        dump(&mut s, &crate::value::to_jinja(&v), opts, 0).unwrap();
        s
    }

    #[test]
    fn matches_python_json_dumps() {
        let v = serde_json::json!({"b": [1, 1.5, -0.0, 1e-7, null, true], "a": "é\n\"", "e": {}, "l": []});
        assert_eq!(
            dumps(v.clone(), &DumpOptions::default()),
            r#"{"b": [1, 1.5, -0.0, 1e-07, null, true], "a": "é\n\"", "e": {}, "l": []}"#
        );
        let opts = DumpOptions {
            ensure_ascii: true,
            indent: Some("  ".into()),
            item_sep: ",".into(),
            sort_keys: true,
            ..DumpOptions::default()
        };
        assert_eq!(
            dumps(v, &opts),
            "{\n  \"a\": \"\\u00e9\\n\\\"\",\n  \"b\": [\n    1,\n    1.5,\n    -0.0,\n    1e-07,\n    null,\n    true\n  ],\n  \"e\": {},\n  \"l\": []\n}"
        );
    }
}
