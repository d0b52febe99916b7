//! Python's `str()` and `repr()` of template values.
//!
//! jinja2 prints every value with Python's `str()`: `None`, `True`, `1e-07`, `['a', 1]`, `{'k': 'v'}`.
//! minijinja's own `Display` writes `none`, `true`, `0.0000001` and JSON-ish lists, so the output of
//! `{{ value }}`, `|string` and `|join` is routed through this module instead.

use crate::printable::is_printable;
use minijinja::value::{Value, ValueKind};
use std::fmt::Write;

/// Python's `str(value)`.
pub fn py_str(value: &Value) -> String {
    let mut out = String::new();
    write_str(&mut out, value);
    out
}

/// Append Python's `str(value)` to `out`.
pub fn write_str(out: &mut String, value: &Value) {
    match value.kind() {
        ValueKind::String => out.push_str(value.as_str().unwrap_or_default()),
        ValueKind::Undefined => {}
        _ => write_repr(out, value),
    }
}

/// Append `open`, the `items` written by `write` and separated by `", "`, and `close` to `out`: a
/// Python list's or dict's repr around its items.
fn write_joined<T>(
    out: &mut String,
    [open, close]: [char; 2],
    items: impl IntoIterator<Item = T>,
    mut write: impl FnMut(&mut String, T),
) {
    out.push(open);
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write(out, item);
    }
    out.push(close);
}

/// Append Python's `repr(value)` to `out`.
pub fn write_repr(out: &mut String, value: &Value) {
    match value.kind() {
        ValueKind::Undefined => {}
        ValueKind::None => out.push_str("None"),
        _ if crate::none::is_py_none(value) => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => write_number(out, value),
        ValueKind::String => write_str_repr(out, value.as_str().unwrap_or_default()),
        ValueKind::Seq if value.downcast_object_ref::<crate::tuple::Tuple>().is_some() => {
            let items = value
                .downcast_object_ref::<crate::tuple::Tuple>()
                .map_or(&[][..], |t| &t.0[..]);
            out.push('(');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, item);
            }
            // `(1,)`: a one-element tuple keeps its comma.
            if items.len() == 1 {
                out.push(',');
            }
            out.push(')');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            write_joined(out, ['[', ']'], value.try_iter().into_iter().flatten(), |out, item| {
                write_repr(out, &item);
            });
        }
        ValueKind::Map => {
            write_joined(out, ['{', '}'], value.try_iter().into_iter().flatten(), |out, key| {
                write_repr(out, &key);
                out.push_str(": ");
                write_repr(out, &value.get_item(&key).unwrap_or_default());
            });
        }
        _ => {
            let _ = write!(out, "{value}");
        }
    }
}

/// Integers as-is, floats as Python's shortest round-trip `repr`.
pub fn write_number(out: &mut String, value: &Value) {
    if value.is_integer() {
        let _ = write!(out, "{value}");
    } else if let Ok(f) = f64::try_from(value.clone()) {
        write_float(out, f);
    } else {
        let _ = write!(out, "{value}");
    }
}

/// Python's `repr(float)`: shortest digits that round-trip, fixed notation for decimal exponents in
/// `-4..16`, otherwise `1e-07` style with a signed two-digit exponent.
pub fn write_float(out: &mut String, f: f64) {
    if f.is_nan() {
        out.push_str("nan");
        return;
    }
    if f.is_infinite() {
        out.push_str(if f > 0.0 { "inf" } else { "-inf" });
        return;
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. `-1.5e-7`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if neg {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
}

/// Python's `repr(str)`: single quotes unless the text holds `'` and no `"`; what Python does not
/// print as it is (controls, format characters, spaces other than ' ', unassigned code points) as
/// `\xhh`, `\uhhhh` or `\Uhhhhhhhh`.
pub fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !is_printable(c) => {
                let _ = match c as u32 {
                    n @ ..=0xff => write!(out, "\\x{n:02x}"),
                    n @ ..=0xffff => write!(out, "\\u{n:04x}"),
                    n => write!(out, "\\U{n:08x}"),
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(f: f64) -> String {
        let mut s = String::new();
        write_float(&mut s, f);
        s
    }

    #[test]
    fn floats_match_python_repr() {
        assert_eq!(float(1e-7), "1e-07");
        assert_eq!(float(-0.0), "-0.0");
        assert_eq!(float(0.1), "0.1");
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(100.0), "100.0");
        assert_eq!(float(1e16), "1e+16");
        assert_eq!(float(1.2345e16), "1.2345e+16");
        assert_eq!(float(123456789012345.6), "123456789012345.6");
        assert_eq!(float(0.0001), "0.0001");
        assert_eq!(float(0.00001234), "1.234e-05");
        assert_eq!(float(1e300), "1e+300");
    }

    #[test]
    fn strings_escape_what_python_does_not_print() {
        let repr = |s: &str| {
            let mut out = String::new();
            write_str_repr(&mut out, s);
            out
        };
        assert_eq!(repr("a\u{3000}b\u{a0}"), r"'a\u3000b\xa0'");
        assert_eq!(repr("\u{200b}\u{2028}\u{e0001}\u{85}"), r"'\u200b\u2028\U000e0001\x85'");
        assert_eq!(repr("é 😀 日本"), "'é 😀 日本'");
        assert_eq!(repr("\0\t\u{7f}"), r"'\x00\t\x7f'");
    }

    #[test]
    fn containers_match_python_str() {
        let v = Value::from_serialize(serde_json::json!([{"type": "text", "text": "it's"}, null, true, 1.0]));
        assert_eq!(py_str(&v), "[{'type': 'text', 'text': \"it's\"}, None, True, 1.0]");
    }
}
