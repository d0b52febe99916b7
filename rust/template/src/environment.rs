//! The minijinja environment configured as transformers configures jinja2.
//!
//! transformers renders with `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`, the
//! `loopcontrols` extension, a `{% generation %}` tag, its own `tojson`, and the globals `raise_exception`,
//! `strftime_now`, `dict` and a `namespace` that refuses `_`-prefixed names. Everything printed goes through
//! Python's `str()`. This module reproduces each of those pieces.

use crate::clock::DateTime;
use crate::filters::invalid;
use crate::json::tojson_filter;
use crate::methods::call_method;
use crate::none::is_py_none;
use crate::pyrepr::{py_str, write_str};
use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind};

/// Marks an error raised by the template's own `raise_exception(message)` call.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RaisedByTemplate(pub String);

/// Build an environment. `now` freezes `strftime_now`; `None` reads the system clock at each call.
pub fn build(now: Option<DateTime>) -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(false);
    env.set_unknown_method_callback(call_method);
    env.set_formatter(|out, _state, value| {
        if let Some(s) = value.as_str() {
            out.write_str(s)
        } else if is_py_none(value) {
            out.write_str("None")
        } else {
            let mut buf = String::new();
            write_str(&mut buf, value);
            out.write_str(&buf)
        }
        .map_err(|_| Error::new(ErrorKind::WriteFailure, "cannot write template output"))
    });

    env.add_filter("tojson", tojson_filter);
    env.add_filter("string", |v: &Value| Value::from(py_str(v)));
    env.add_filter("join", join_filter);
    env.add_filter("format", format_filter);
    env.add_filter("length", length_filter);
    env.add_filter("count", length_filter);
    crate::generators::register(&mut env);
    crate::filters::register(&mut env);
    env.add_test("none", is_py_none);
    // jinja2's Undefined defines `__iter__`, so `undefined is iterable` holds.
    env.add_test("iterable", |v: &Value| {
        matches!(
            v.kind(),
            ValueKind::Seq | ValueKind::Map | ValueKind::String | ValueKind::Iterable | ValueKind::Undefined
        )
    });
    for name in ["trim", "lower", "upper", "capitalize", "title"] {
        env.add_filter(name, move |v: &Value, args: Rest<Value>| string_filter(name, v, &args));
    }
    env.add_filter("escape", escape_filter);
    env.add_filter(crate::source::ITER_FILTER, |v: Value| -> Value {
        match v.as_str() {
            Some(s) => Value::from(s.chars().map(|c| Value::from(c.to_string())).collect::<Vec<_>>()),
            None => v,
        }
    });
    env.add_filter("e", escape_filter);
    env.add_filter(crate::markup::ADD_FILTER, |l: &Value, r: &Value| {
        crate::markup::markup_add(l, r)
    });
    env.add_test("sequence", |v: &Value| {
        matches!(v.kind(), ValueKind::Seq | ValueKind::Map | ValueKind::String)
    });
    env.add_test("number", |v: &Value| {
        matches!(v.kind(), ValueKind::Number | ValueKind::Bool)
    });
    env.add_test("integer", |v: &Value| v.is_integer() || v.kind() == ValueKind::Bool);

    env.add_function("raise_exception", |message: Option<Value>| -> Result<Value, Error> {
        let message = message.map(|m| py_str(&m)).unwrap_or_default();
        Err(invalid(message.clone()).with_source(RaisedByTemplate(message)))
    });
    env.add_function("strftime_now", move |format: &str| {
        Value::from(now.unwrap_or_else(DateTime::now_utc).strftime(format))
    });
    env.add_function("dict", dict_function);
    env.add_function("namespace", namespace_function);
    env
}

/// `dict(mapping_or_pairs, **kwargs)` as Python's `dict(...)`.
fn dict_function(args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let mut pairs: Vec<(Value, Value)> = Vec::new();
    if args.len() > 1 {
        return Err(invalid("dict expected at most 1 positional argument"));
    }
    if let Some(first) = args.first() {
        match first.kind() {
            ValueKind::Map => {
                for key in first.try_iter()? {
                    let item = first.get_item(&key)?;
                    pairs.push((key, item));
                }
            }
            ValueKind::Seq | ValueKind::Iterable => {
                for pair in first.try_iter()? {
                    let items: Vec<Value> = pair.try_iter()?.collect();
                    match <[Value; 2]>::try_from(items) {
                        Ok([k, v]) => pairs.push((k, v)),
                        Err(_) => {
                            return Err(invalid("dict update sequence element must have length 2"));
                        }
                    }
                }
            }
            _ => return Err(invalid(format!("{} is not iterable", first.kind()))),
        }
    }
    for key in kwargs.args() {
        pairs.push((Value::from(key), kwargs.peek::<Value>(key)?));
    }
    let mut out: Vec<(Value, Value)> = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        match out.iter_mut().find(|(existing, _)| *existing == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        }
    }
    Ok(out.into_iter().collect())
}

/// jinja2's `namespace(...)`, refusing `_`-prefixed names like transformers' `TemplateNamespace`.
fn namespace_function(args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let mut pairs: Vec<(Value, Value)> = Vec::new();
    if let Some(first) = args.first() {
        for key in first.try_iter()? {
            let item = first.get_item(&key)?;
            pairs.push((key, item));
        }
    }
    for key in kwargs.args() {
        pairs.push((Value::from(key), kwargs.peek::<Value>(key)?));
    }
    if let Some((bad, _)) = pairs
        .iter()
        .find(|(k, _)| k.as_str().is_some_and(|k| k.starts_with('_')))
    {
        return Err(invalid(format!(
                "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'. Please rename the attribute.",
                py_str(bad)
            )));
    }
    minijinja::functions::namespace(Some(pairs.into_iter().collect()))
}

/// jinja2's `join(value, d='', attribute=None)`, printing items with Python's `str()`.
pub(crate) fn join_filter(value: &Value, sep: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let attribute: Option<Value> = kwargs.get("attribute")?;
    let sep = match kwargs.get::<Option<Value>>("d")? {
        Some(d) => Some(d),
        None => sep,
    };
    kwargs.assert_all_used()?;
    let sep = sep.map(|s| py_str(&s)).unwrap_or_default();
    if value.is_undefined() {
        return Ok(Value::from(""));
    }
    let mut out = String::new();
    let iter = match value.kind() {
        ValueKind::String => {
            return Ok(Value::from(
                value
                    .as_str()
                    .unwrap_or_default()
                    .chars()
                    .map(String::from)
                    .collect::<Vec<_>>()
                    .join(&sep),
            ))
        }
        _ => value.try_iter()?,
    };
    for (i, item) in iter.enumerate() {
        if i > 0 {
            out.push_str(&sep);
        }
        let item = match &attribute {
            Some(attr) => match attr.as_str() {
                Some(a) => a.split('.').try_fold(item, |v, part| v.get_attr(part))?,
                None => item.get_item(attr)?,
            },
            None => item,
        };
        write_str(&mut out, &item);
    }
    Ok(Value::from(out))
}

/// jinja2's `format` filter: Python `%`-formatting (`"%s" | format(x)`).
fn format_filter(fmt: &str, args: Rest<Value>) -> Result<Value, Error> {
    let mut out = String::with_capacity(fmt.len());
    let mut args = args.iter();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some(spec @ ('s' | 'd' | 'i' | 'r')) => {
                let Some(arg) = args.next() else {
                    return Err(invalid("not enough arguments for format string"));
                };
                match spec {
                    'r' => crate::pyrepr::write_repr(&mut out, arg),
                    'd' | 'i' => {
                        let n = f64::try_from(arg.clone())?;
                        out.push_str(&format!("{}", n.trunc() as i64));
                    }
                    _ => write_str(&mut out, arg),
                }
            }
            other => {
                return Err(invalid(format!("unsupported format character {other:?}")));
            }
        }
    }
    Ok(Value::from(out))
}

/// jinja2's `length`: `len(value)`, 0 for undefined, an error for values without a length.
pub(crate) fn length_filter(value: &Value) -> Result<Value, Error> {
    match value.kind() {
        ValueKind::Undefined => Ok(Value::from(0)),
        ValueKind::String => Ok(Value::from(value.as_str().unwrap_or_default().chars().count())),
        _ if crate::generators::is_generator(value) => Err(invalid("object of type 'generator' has no len()")),
        _ => match value.len() {
            Some(n) => Ok(Value::from(n)),
            None => Err(invalid(format!("object of type {} has no len()", value.kind()))),
        },
    }
}

/// jinja2's string filters apply `str()` first, so `[{'type': 'text', ...}] | trim` prints a Python list.
pub(crate) fn string_filter(name: &str, value: &Value, args: &[Value]) -> Result<Value, Error> {
    let text = py_str(value);
    let out = match name {
        "trim" => {
            let chars = args.first().and_then(Value::as_str);
            match chars {
                Some(set) => text.trim_matches(|c| set.contains(c)).to_string(),
                None => text
                    .trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
                    .to_string(),
            }
        }
        "lower" => text.to_lowercase(),
        "upper" => text.to_uppercase(),
        "capitalize" => {
            let mut chars = text.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars.flat_map(char::to_lowercase)).collect(),
                None => String::new(),
            }
        }
        _ => py_title(&text),
    };
    Ok(Value::from(out))
}

/// jinja2's `title`: a word starts after `-`, whitespace or an opening bracket (`(`, `{`, `[`,
/// `<`), its first character upper case and the rest lower case (`foo_bar` is one word).
fn py_title(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at_start = true;
    for c in text.chars() {
        if c == '-' || c.is_whitespace() || matches!(c, '(' | '{' | '[' | '<') {
            out.push(c);
            at_start = true;
        } else if at_start {
            out.extend(c.to_uppercase());
            at_start = false;
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// markupsafe's `escape`: `& < > ' "` become entities; already-safe strings pass through.
fn escape_filter(value: &Value) -> Value {
    if value.is_safe() {
        return value.clone();
    }
    let text = py_str(value);
    let mut out = String::with_capacity(text.len());
    crate::markup::escape_into(&text, &mut out);
    Value::from_safe_string(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_filter_is_python_percent() {
        let out = format_filter(
            "%s=%d %r %%",
            Rest(vec![Value::from(true), Value::from(2.7), Value::from("x")]),
        )
        .unwrap();
        assert_eq!(out.as_str(), Some("True=2 'x' %"));
    }
}
