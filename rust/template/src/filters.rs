//! jinja2 filters whose minijinja versions differ from jinja2 3.1 (`jinja2/filters.py`) in ways a
//! chat template can print, or that minijinja lacks.
//!
//! Each one follows the jinja2 function of the same name, edge cases included: `indent` keeps a
//! trailing newline and splits lines as Python's `str.splitlines` does (`\r\n`, `\r`, `\x0b`,
//! `\u2028`, ...), takes a string as the indentation and keeps a `Markup` input safe; `round`
//! rounds half to even as Python's `round` does; `int` and `float` fall back to their default
//! instead of failing; `title` starts words after `-`, whitespace and opening brackets only.
use crate::pyrepr::py_str;
use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind};

/// Register the filters of this module, replacing minijinja's built-in ones of the same name.
pub(crate) fn register(env: &mut Environment<'static>) {
    env.add_filter("indent", indent);
    env.add_filter("round", round);
    env.add_filter("int", int);
    env.add_filter("float", float);
    env.add_filter("replace", replace);
    env.add_filter("center", center);
    env.add_filter("truncate", truncate);
    env.add_filter("wordcount", wordcount);
    env.add_filter("striptags", striptags);
    env.add_filter("sum", sum);
    env.add_filter("min", |v: &Value, kwargs: Kwargs| min_or_max(v, kwargs, false));
    env.add_filter("max", |v: &Value, kwargs: Kwargs| min_or_max(v, kwargs, true));
}

/// The error of an operation the template applies to values it cannot take (Python's `TypeError`
/// and `ValueError` alike).
pub(crate) fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// A positional argument, or else the keyword argument `name`, or else `None`.
fn arg(positional: Option<Value>, kwargs: &Kwargs, name: &str) -> Result<Option<Value>, Error> {
    match positional {
        Some(v) => Ok(Some(v)),
        None => kwargs.get::<Option<Value>>(name),
    }
}

/// Python's `str.splitlines()`.
pub(crate) fn splitlines(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(
            c,
            '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}'
        ) {
            out.push(&s[start..i]);
            start = i + c.len_utf8();
            if c == '\r' && chars.peek().is_some_and(|&(_, n)| n == '\n') {
                chars.next();
                start += 1;
            }
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// `indent(s, width=4, first=False, blank=False)`: `width` may be a string (the indentation
/// itself). jinja2 appends a newline before splitting, so a trailing newline survives, and a
/// `Markup` input stays `Markup`.
fn indent(
    value: &Value,
    width: Option<Value>,
    first: Option<Value>,
    blank: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let width = arg(width, &kwargs, "width")?;
    let first = arg(first, &kwargs, "first")?.is_some_and(|v| v.is_true());
    let blank = arg(blank, &kwargs, "blank")?.is_some_and(|v| v.is_true());
    kwargs.assert_all_used()?;
    let Some(text) = value.as_str().filter(|_| value.kind() == ValueKind::String) else {
        return Err(invalid(format!(
            "unsupported operand type(s) for +: '{}' and 'str'",
            value.kind()
        )));
    };
    let safe = value.is_safe();
    let indention = match width {
        None => "    ".to_string(),
        // jinja2 3.1 wraps a string width in `Markup` for a `Markup` input: it is not escaped.
        Some(w) if w.kind() == ValueKind::String => w.as_str().unwrap_or_default().to_string(),
        Some(w) if w.is_integer() || w.kind() == ValueKind::Bool => {
            " ".repeat(usize::try_from(i64::try_from(w)?.max(0)).unwrap_or(0))
        }
        Some(w) => {
            return Err(invalid(format!(
                "can't multiply sequence by non-int of type '{}'",
                w.kind()
            )))
        }
    };
    let with_newline = format!("{text}\n");
    let lines = splitlines(&with_newline);
    let mut out = String::with_capacity(text.len() + lines.len() * (indention.len() + 1));
    if first {
        out.push_str(&indention);
    }
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
            if blank || !line.is_empty() {
                out.push_str(&indention);
            }
        }
        out.push_str(line);
    }
    Ok(if safe {
        Value::from_safe_string(out)
    } else {
        Value::from(out)
    })
}

/// A number as `f64`, or the `TypeError` jinja2 raises for anything else.
fn number(value: &Value, what: &str) -> Result<f64, Error> {
    match value.kind() {
        ValueKind::Number | ValueKind::Bool => f64::try_from(value.clone()),
        _ => Err(invalid(format!(
            "type {} doesn't define __{what}__ method",
            value.kind()
        ))),
    }
}

/// `round(value, precision=0, method='common')`: Python's `round` (half to even, an integer
/// stays an integer), or `math.ceil` / `math.floor` of `value * 10**precision`, divided back.
fn round(value: &Value, precision: Option<Value>, method: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let precision = match arg(precision, &kwargs, "precision")? {
        Some(p) => i32::try_from(i64::try_from(p)?).map_err(|_| invalid("precision out of range"))?,
        None => 0,
    };
    let method = arg(method, &kwargs, "method")?;
    kwargs.assert_all_used()?;
    let method = method.as_ref().and_then(Value::as_str).unwrap_or("common");
    let scale = 10f64.powi(precision);
    match method {
        "common" => {
            if value.is_integer() || value.kind() == ValueKind::Bool {
                let n = i64::try_from(value.clone())?;
                if precision >= 0 {
                    return Ok(Value::from(n));
                }
                let unit = 10f64.powi(-precision);
                return Ok(Value::from(((n as f64 / unit).round_ties_even() * unit) as i64));
            }
            let x = number(value, "round")?;
            if !x.is_finite() {
                return Ok(Value::from(x));
            }
            if precision >= 0 {
                // The shortest decimal formatting rounds the exact binary value half to even, as
                // CPython's `round` does.
                let text = format!("{x:.*}", usize::try_from(precision).unwrap_or(0));
                return Ok(Value::from(text.parse::<f64>().unwrap_or(x)));
            }
            Ok(Value::from(
                (x / 10f64.powi(-precision)).round_ties_even() * 10f64.powi(-precision),
            ))
        }
        "ceil" => Ok(Value::from((number(value, "ceil")? * scale).ceil() / scale)),
        "floor" => Ok(Value::from((number(value, "floor")? * scale).floor() / scale)),
        _ => Err(invalid("method must be common, ceil or floor")),
    }
}

/// Python's `int(text, base)` for a string: whitespace around, a sign, a base prefix matching
/// `base` (any with base 0), `_` between digits.
fn parse_int(text: &str, base: u32) -> Option<i64> {
    let t = text.trim();
    let (negative, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let lower = t.to_ascii_lowercase();
    let (base, digits) = match (base, lower.get(..2)) {
        (0 | 16, Some("0x")) => (16, &t[2..]),
        (0 | 8, Some("0o")) => (8, &t[2..]),
        (0 | 2, Some("0b")) => (2, &t[2..]),
        (0, _) => (10, t),
        (b, _) => (b, t),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    let n = i64::from_str_radix(&clean, base).ok()?;
    Some(if negative { -n } else { n })
}

/// Python's `float(text)`: whitespace around, `_` between digits, `inf`/`nan` in any case.
fn parse_float(text: &str) -> Option<f64> {
    let t = text.trim();
    if t.contains("__") || t.starts_with('_') || t.ends_with('_') {
        return None;
    }
    let clean: String = t.chars().filter(|c| *c != '_').collect();
    match clean.to_ascii_lowercase().trim_start_matches(['+', '-']) {
        "inf" | "infinity" | "nan" => {}
        s if s.is_empty() || !s.starts_with(|c: char| c.is_ascii_digit() || c == '.') => return None,
        _ => {}
    }
    clean.parse::<f64>().ok()
}

/// `int(value, default=0, base=10)`: `int(value)`, else `int(float(value))`, else `default`.
fn int(value: &Value, default: Option<Value>, base: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let default = arg(default, &kwargs, "default")?.unwrap_or_else(|| Value::from(0));
    let base = match arg(base, &kwargs, "base")? {
        Some(b) => u32::try_from(i64::try_from(b)?).map_err(|_| invalid("int() base must be >= 2 and <= 36"))?,
        None => 10,
    };
    kwargs.assert_all_used()?;
    let parsed = match value.kind() {
        ValueKind::String => {
            let s = value.as_str().unwrap_or_default();
            parse_int(s, base).or_else(|| parse_float(s).filter(|f| f.is_finite()).map(|f| f.trunc() as i64))
        }
        ValueKind::Bool => Some(i64::from(value.is_true())),
        ValueKind::Number if value.is_integer() => i64::try_from(value.clone()).ok(),
        ValueKind::Number => f64::try_from(value.clone())
            .ok()
            .filter(|f| f.is_finite())
            .map(|f| f.trunc() as i64),
        _ => None,
    };
    Ok(parsed.map_or(default, Value::from))
}

/// `float(value, default=0.0)`.
fn float(value: &Value, default: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let default = arg(default, &kwargs, "default")?.unwrap_or_else(|| Value::from(0.0));
    kwargs.assert_all_used()?;
    let parsed = match value.kind() {
        ValueKind::String => parse_float(value.as_str().unwrap_or_default()),
        ValueKind::Number | ValueKind::Bool => f64::try_from(value.clone()).ok(),
        _ => None,
    };
    Ok(parsed.map_or(default, Value::from))
}

/// `replace(s, old, new, count=None)` with autoescape off: `str(s).replace(old, new, count)`.
fn replace(value: &Value, old: &Value, new: &Value, count: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let count = arg(count, &kwargs, "count")?;
    kwargs.assert_all_used()?;
    let (s, old, new) = (py_str(value), py_str(old), py_str(new));
    let limit = match count.filter(|c| !c.is_none()) {
        // A negative count means all, as in Python.
        Some(c) => usize::try_from(i64::try_from(c)?).unwrap_or(usize::MAX),
        None => usize::MAX,
    };
    if old.is_empty() {
        // Python inserts `new` before every character and at the end, up to `count` times.
        let mut out = String::with_capacity(s.len() + new.len() * (s.chars().count() + 1));
        let mut n = 0;
        for c in s.chars() {
            if n < limit {
                out.push_str(&new);
                n += 1;
            }
            out.push(c);
        }
        if n < limit {
            out.push_str(&new);
        }
        return Ok(Value::from(out));
    }
    Ok(Value::from(s.replacen(old.as_str(), &new, limit)))
}

/// `center(value, width=80)`: Python's `str.center`, which puts the odd space on the right
/// unless the width is odd.
fn center(value: &Value, width: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let width = match arg(width, &kwargs, "width")? {
        Some(w) => i64::try_from(w)?,
        None => 80,
    };
    kwargs.assert_all_used()?;
    let s = py_str(value);
    let len = i64::try_from(s.chars().count()).unwrap_or(i64::MAX);
    if width <= len {
        return Ok(Value::from(s));
    }
    let margin = width - len;
    let left = margin / 2 + (margin & width & 1);
    let pad = |n: i64| " ".repeat(usize::try_from(n).unwrap_or(0));
    Ok(Value::from(format!("{}{s}{}", pad(left), pad(margin - left))))
}

/// `truncate(s, length=255, killwords=False, end='...', leeway=5)`.
fn truncate(value: &Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let mut pos = args.iter().cloned();
    let length = match arg(pos.next(), &kwargs, "length")? {
        Some(l) => i64::try_from(l)?,
        None => 255,
    };
    let killwords = arg(pos.next(), &kwargs, "killwords")?.is_some_and(|v| v.is_true());
    let end = arg(pos.next(), &kwargs, "end")?.map_or_else(|| "...".to_string(), |e| py_str(&e));
    let leeway = match arg(pos.next(), &kwargs, "leeway")? {
        Some(l) => i64::try_from(l)?,
        None => 5,
    };
    kwargs.assert_all_used()?;
    let end_len = i64::try_from(end.chars().count()).unwrap_or(i64::MAX);
    if length < end_len {
        return Err(invalid(format!("expected length >= {end_len}, got {length}")));
    }
    if leeway < 0 {
        return Err(invalid(format!("expected leeway >= 0, got {leeway}")));
    }
    let s = py_str(value);
    let chars: Vec<char> = s.chars().collect();
    if i64::try_from(chars.len()).unwrap_or(i64::MAX) <= length.saturating_add(leeway) {
        return Ok(Value::from(s));
    }
    let keep: String = chars[..usize::try_from(length - end_len).unwrap_or(0).min(chars.len())]
        .iter()
        .collect();
    if killwords {
        return Ok(Value::from(keep + &end));
    }
    let head = keep.rsplit_once(' ').map_or(keep.as_str(), |(h, _)| h);
    Ok(Value::from(format!("{head}{end}")))
}

/// `wordcount(s)`: the runs of `\w` characters in `str(s)`.
fn wordcount(value: &Value) -> Value {
    let s = py_str(value);
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut n = 0;
    let mut inside = false;
    for c in s.chars() {
        let w = word(c);
        if w && !inside {
            n += 1;
        }
        inside = w;
    }
    Value::from(n)
}

/// HTML entities markupsafe's `unescape` (Python's `html.unescape`) resolves that a chat
/// template may meet; numeric references in full.
fn unescape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(p) = rest.find('&') {
        out.push_str(&rest[..p]);
        let after = &rest[p + 1..];
        let semi = after.find(';').filter(|&n| n <= 10);
        let decoded = semi.and_then(|n| {
            let name = &after[..n];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some('\u{a0}'),
                _ => match name.strip_prefix('#') {
                    Some(num) => match num.strip_prefix(['x', 'X']) {
                        Some(hex) => u32::from_str_radix(hex, 16).ok(),
                        None => num.parse::<u32>().ok(),
                    }
                    .and_then(char::from_u32),
                    None => None,
                },
            }?;
            Some((c, n + 2))
        });
        match decoded {
            Some((c, used)) => {
                out.push(c);
                rest = &rest[p + used..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `striptags(value)`: markupsafe drops comments and tags, collapses whitespace, then unescapes.
fn striptags(value: &Value) -> Value {
    let mut s = py_str(value);
    for (open, close) in [("<!--", "-->"), ("<", ">")] {
        let mut out = String::with_capacity(s.len());
        let mut rest = s.as_str();
        while let Some(p) = rest.find(open) {
            match rest[p + open.len()..].find(close) {
                Some(q) => {
                    out.push_str(&rest[..p]);
                    rest = &rest[p + open.len() + q + close.len()..];
                }
                None => break,
            }
        }
        out.push_str(rest);
        s = out;
    }
    let collapsed = s.split_whitespace().collect::<Vec<_>>().join(" ");
    Value::from(unescape_html(&collapsed))
}

/// The item an `attribute=` argument names: dotted parts, integers as indexes.
fn attribute_of(item: &Value, attribute: &Value) -> Result<Value, Error> {
    match attribute.as_str() {
        Some(path) => path
            .split('.')
            .try_fold(item.clone(), |v, part| match part.parse::<i64>() {
                Ok(i) => v.get_item(&Value::from(i)),
                Err(_) => v.get_attr(part),
            }),
        None => item.get_item(attribute),
    }
}

/// `sum(iterable, attribute=None, start=0)`.
fn sum(value: &Value, attribute: Option<Value>, start: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let attribute = arg(attribute, &kwargs, "attribute")?;
    let mut total = arg(start, &kwargs, "start")?.unwrap_or_else(|| Value::from(0));
    kwargs.assert_all_used()?;
    for item in value.try_iter()? {
        let item = match &attribute {
            Some(a) => attribute_of(&item, a)?,
            None => item,
        };
        total = add_numbers(&total, &item)?;
    }
    Ok(total)
}

/// Python's `+` of two numbers (`sum` of anything else is rare in templates and refused).
fn add_numbers(a: &Value, b: &Value) -> Result<Value, Error> {
    let int = |v: &Value| {
        (v.is_integer() || v.kind() == ValueKind::Bool)
            .then(|| i64::try_from(v.clone()).ok())
            .flatten()
    };
    if let (Some(x), Some(y)) = (int(a), int(b)) {
        if let Some(n) = x.checked_add(y) {
            return Ok(Value::from(n));
        }
    }
    Ok(Value::from(number(a, "add")? + number(b, "add")?))
}

/// `min` / `max(value, case_sensitive=False, attribute=None)`: undefined for an empty input.
fn min_or_max(value: &Value, kwargs: Kwargs, max: bool) -> Result<Value, Error> {
    let case_sensitive = kwargs
        .get::<Option<Value>>("case_sensitive")?
        .is_some_and(|v| v.is_true());
    let attribute: Option<Value> = kwargs.get("attribute")?;
    kwargs.assert_all_used()?;
    let key = |item: &Value| -> Result<Value, Error> {
        let k = match &attribute {
            Some(a) => attribute_of(item, a)?,
            None => item.clone(),
        };
        Ok(match k.as_str() {
            Some(s) if !case_sensitive && k.kind() == ValueKind::String => Value::from(s.to_lowercase()),
            _ => k,
        })
    };
    let mut best: Option<(Value, Value)> = None;
    for item in value.try_iter()? {
        let k = key(&item)?;
        let better = match &best {
            None => true,
            Some((bk, _)) => {
                let ord = k.partial_cmp(bk).ok_or_else(|| invalid("values cannot be compared"))?;
                if max {
                    ord == std::cmp::Ordering::Greater
                } else {
                    ord == std::cmp::Ordering::Less
                }
            }
        };
        if better {
            best = Some((k, item));
        }
    }
    Ok(best.map_or(Value::UNDEFINED, |(_, item)| item))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitlines_is_pythons() {
        assert_eq!(splitlines("a\nb\n"), ["a", "b"]);
        assert_eq!(splitlines("a\r\nb\rc\u{2028}d"), ["a", "b", "c", "d"]);
        assert_eq!(splitlines("\n"), [""]);
        assert!(splitlines("").is_empty());
    }

    #[test]
    fn numbers_parse_as_python_does() {
        assert_eq!(parse_int(" 4_2 ", 10), Some(42));
        assert_eq!(parse_int("0x1A", 16), Some(26));
        assert_eq!(parse_int("0x1A", 0), Some(26));
        assert_eq!(parse_int("12", 8), Some(10));
        assert_eq!(parse_int("42abc", 10), None);
        assert_eq!(parse_float(" 1e3 "), Some(1000.0));
        assert_eq!(parse_float("abc"), None);
    }
}
