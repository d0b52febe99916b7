//! Python methods on template values (`content.strip()`, `message.get('x')`, `s.split('\n')`, ...).
//!
//! minijinja has no methods on plain values; this unknown-method callback supplies the ones chat templates
//! call, with Python's exact semantics (`split()` without a separator drops empty pieces, `strip(chars)`
//! strips a set, `startswith` takes a tuple). Anything else falls through to `minijinja_contrib::pycompat`.
//! Mutating methods (`append`, `pop`, `update`) stay unknown on purpose: jinja2's immutable sandbox refuses
//! them too, so templates that rely on them fail on both sides.

use crate::filters::invalid;
use crate::pyrepr::py_str;
use minijinja::value::{from_args, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

/// The environment's unknown-method callback.
pub fn call_method(state: &State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    match plain_method(value, method, args)? {
        Some(v) => Ok(v),
        None => minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args).map_err(|err| {
            if err.kind() == ErrorKind::UnknownMethod {
                Error::new(
                    ErrorKind::UnknownMethod,
                    format!("{} has no method named {method}", value.kind()),
                )
            } else {
                err
            }
        }),
    }
}

/// The methods implemented here (not minijinja_contrib's); `None` when `method` is not one of them.
pub(crate) fn plain_method(value: &Value, method: &str, args: &[Value]) -> Result<Option<Value>, Error> {
    match value.kind() {
        ValueKind::String => string_method(value.as_str().unwrap_or_default(), method, args),
        ValueKind::Map => map_method(value, method, args),
        ValueKind::Seq => seq_method(value, method, args),
        _ => Ok(None),
    }
}

fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn strip_set<'a>(s: &'a str, chars: Option<&str>, left: bool, right: bool) -> &'a str {
    let pred = |c: char| match chars {
        Some(set) => set.contains(c),
        None => is_py_space(c),
    };
    let s = if left { s.trim_start_matches(pred) } else { s };
    if right {
        s.trim_end_matches(pred)
    } else {
        s
    }
}

/// Python's `str.split(sep, maxsplit)` / `rsplit`.
fn split(s: &str, sep: Option<&str>, maxsplit: i64, from_right: bool) -> Result<Vec<String>, Error> {
    let limit = if maxsplit < 0 { usize::MAX } else { maxsplit as usize };
    match sep {
        Some("") => Err(invalid("empty separator")),
        Some(sep) => {
            let parts: Vec<String> = if from_right {
                let mut v: Vec<String> = s.rsplitn(limit.saturating_add(1), sep).map(str::to_string).collect();
                v.reverse();
                v
            } else {
                s.splitn(limit.saturating_add(1), sep).map(str::to_string).collect()
            };
            Ok(parts)
        }
        None => {
            // Words are taken from the side the split starts at; at `limit` words the rest stays whole.
            let mut parts = Vec::new();
            let mut rest = if from_right {
                s.trim_end_matches(is_py_space)
            } else {
                s.trim_start_matches(is_py_space)
            };
            while !rest.is_empty() {
                if parts.len() == limit {
                    parts.push(rest.to_string());
                    break;
                }
                let (word, after) = if from_right { last_word(rest) } else { first_word(rest) };
                parts.push(word.to_string());
                rest = after;
            }
            if from_right {
                parts.reverse();
            }
            Ok(parts)
        }
    }
}

/// The first word of `s` (which starts with one) and what follows it, without its leading white space.
fn first_word(s: &str) -> (&str, &str) {
    match s.find(is_py_space) {
        Some(i) => (&s[..i], s[i..].trim_start_matches(is_py_space)),
        None => (s, ""),
    }
}

/// The last word of `s` (which ends with one) and what precedes it, without its trailing white space.
fn last_word(s: &str) -> (&str, &str) {
    match s.rfind(is_py_space) {
        Some(i) => {
            let ch = s[i..].chars().next().map_or(1, char::len_utf8);
            (&s[i + ch..], s[..i].trim_end_matches(is_py_space))
        }
        None => (s, ""),
    }
}

fn affix_matches(s: &str, arg: &Value, prefix: bool) -> Result<bool, Error> {
    let test = |a: &str| if prefix { s.starts_with(a) } else { s.ends_with(a) };
    if let Some(a) = arg.as_str() {
        return Ok(test(a));
    }
    if matches!(arg.kind(), ValueKind::Seq) {
        for item in arg.try_iter()? {
            match item.as_str() {
                Some(a) if test(a) => return Ok(true),
                Some(_) => {}
                None => return Err(invalid("tuple must contain only strings")),
            }
        }
        return Ok(false);
    }
    Err(invalid("argument must be str or a tuple of str"))
}

/// Char index of a byte offset, as Python counts positions in code points.
fn char_pos(s: &str, byte: usize) -> i64 {
    s[..byte].chars().count() as i64
}

fn string_method(s: &str, method: &str, args: &[Value]) -> Result<Option<Value>, Error> {
    let v = match method {
        "strip" | "lstrip" | "rstrip" => {
            let (chars,): (Option<Value>,) = from_args(args)?;
            let chars = chars.as_ref().and_then(Value::as_str);
            Value::from(strip_set(s, chars, method != "rstrip", method != "lstrip"))
        }
        "split" | "rsplit" => {
            let (sep, maxsplit): (Option<Value>, Option<i64>) = from_args(args)?;
            let sep = sep.as_ref().and_then(Value::as_str);
            Value::from(split(s, sep, maxsplit.unwrap_or(-1), method == "rsplit")?)
        }
        "splitlines" => {
            let (keepends,): (Option<bool>,) = from_args(args)?;
            let mut out = Vec::new();
            let mut rest = s;
            while !rest.is_empty() {
                let (line, next) = match rest.find(['\n', '\r']) {
                    Some(i) => {
                        let end = if rest[i..].starts_with("\r\n") { i + 2 } else { i + 1 };
                        (
                            if keepends.unwrap_or(false) {
                                &rest[..end]
                            } else {
                                &rest[..i]
                            },
                            &rest[end..],
                        )
                    }
                    None => (rest, ""),
                };
                out.push(Value::from(line));
                rest = next;
            }
            Value::from(out)
        }
        "startswith" | "endswith" => {
            let (arg,): (Value,) = from_args(args)?;
            Value::from(affix_matches(s, &arg, method == "startswith")?)
        }
        "replace" => {
            let (old, new, count): (&str, &str, Option<i64>) = from_args(args)?;
            match count {
                Some(n) if n >= 0 => Value::from(s.replacen(old, new, n as usize)),
                _ => Value::from(s.replace(old, new)),
            }
        }
        "lower" => Value::from(s.to_lowercase()),
        "upper" => Value::from(s.to_uppercase()),
        "find" | "index" | "rfind" | "rindex" => {
            let (sub,): (&str,) = from_args(args)?;
            let found = if method.starts_with('r') {
                s.rfind(sub)
            } else {
                s.find(sub)
            };
            match found {
                Some(i) => Value::from(char_pos(s, i)),
                None if method.ends_with("index") => {
                    return Err(invalid("substring not found"));
                }
                None => Value::from(-1),
            }
        }
        "count" => {
            let (sub,): (&str,) = from_args(args)?;
            Value::from(if sub.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(sub).count()
            })
        }
        "join" => {
            let (items,): (Value,) = from_args(args)?;
            let mut out = String::new();
            for (i, item) in items.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(s);
                }
                match item.as_str() {
                    Some(t) => out.push_str(t),
                    None => return Err(invalid("sequence item: expected str instance")),
                }
            }
            Value::from(out)
        }
        "partition" | "rpartition" => {
            let (sep,): (&str,) = from_args(args)?;
            let found = if method == "partition" {
                s.find(sep)
            } else {
                s.rfind(sep)
            };
            let parts = match found {
                Some(i) => vec![&s[..i], sep, &s[i + sep.len()..]],
                None if method == "partition" => vec![s, "", ""],
                None => vec!["", "", s],
            };
            Value::from(parts.into_iter().map(Value::from).collect::<Vec<_>>())
        }
        "removeprefix" => {
            let (p,): (&str,) = from_args(args)?;
            Value::from(s.strip_prefix(p).unwrap_or(s))
        }
        "removesuffix" => {
            let (p,): (&str,) = from_args(args)?;
            Value::from(s.strip_suffix(p).unwrap_or(s))
        }
        "zfill" => {
            let (width,): (usize,) = from_args(args)?;
            let len = s.chars().count();
            if len >= width {
                Value::from(s)
            } else {
                let (sign, digits) = match s.chars().next() {
                    Some(c @ ('+' | '-')) => (c.to_string(), &s[1..]),
                    _ => (String::new(), s),
                };
                Value::from(format!("{sign}{}{digits}", "0".repeat(width - len)))
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
}

fn map_method(value: &Value, method: &str, args: &[Value]) -> Result<Option<Value>, Error> {
    let v = match method {
        "get" => {
            let (key, default): (Value, Option<Value>) = from_args(args)?;
            let found = value.get_item(&key)?;
            if found.is_undefined() {
                default.unwrap_or(Value::from(()))
            } else {
                found
            }
        }
        "items" => {
            let mut out = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                out.push(crate::tuple::pair(key, item));
            }
            Value::from(out)
        }
        "keys" => Value::from(value.try_iter()?.collect::<Vec<_>>()),
        "values" => {
            let mut out = Vec::new();
            for key in value.try_iter()? {
                out.push(value.get_item(&key)?);
            }
            Value::from(out)
        }
        "copy" => value.clone(),
        _ => return Ok(None),
    };
    Ok(Some(v))
}

fn seq_method(value: &Value, method: &str, args: &[Value]) -> Result<Option<Value>, Error> {
    let v = match method {
        "index" => {
            let (needle,): (Value,) = from_args(args)?;
            match value.try_iter()?.position(|x| x == needle) {
                Some(i) => Value::from(i),
                None => return Err(invalid(format!("{} is not in list", py_str(&needle)))),
            }
        }
        "copy" => value.clone(),
        _ => return Ok(None),
    };
    Ok(Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_matches_python() {
        assert_eq!(split("  a  b c ", None, -1, false).unwrap(), ["a", "b", "c"]);
        assert_eq!(split("a  b c", None, 1, false).unwrap(), ["a", "b c"]);
        assert_eq!(split("a  b c", None, 1, true).unwrap(), ["a  b", "c"]);
        assert_eq!(split("a,,b", Some(","), -1, false).unwrap(), ["a", "", "b"]);
        assert_eq!(split("a,b,c", Some(","), 1, true).unwrap(), ["a,b", "c"]);
        assert_eq!(split("", Some(","), -1, false).unwrap(), [""]);
        assert!(split("", None, -1, false).unwrap().is_empty());
    }
}
