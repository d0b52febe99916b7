//! jinja2's `Markup` arithmetic, which minijinja's `+` does not have.
//!
//! In jinja2, `"a"|safe` is a `markupsafe.Markup`, and `Markup + str` (or `str + Markup`) HTML-escapes
//! the plain string before joining: `{{ "<b>"|safe + name }}` prints `name` escaped even with
//! autoescape off. Real templates depend on it (Functionary v3.1 builds its tool list as
//! `"Use the function '"|safe + t["name"] + ... + t | tojson()`, so the JSON appears with `&#34;`).
//! minijinja's `+` joins strings and forgets that one side was safe, and has no operator hook.
//!
//! So a `{{ ... }}` whose expression is a chain of `+` with a `|safe` operand is rewritten, before
//! compiling, into a filter chain `(a)|smgpy_markup_add((b))|smgpy_markup_add((c))`, evaluated left to
//! right as Python would. `smgpy_markup_add` applies markupsafe's rule when either side is safe, and
//! plain `+` otherwise. Expressions with any other top-level operator are left alone.
use minijinja::value::ValueKind;
use minijinja::{Error, Value};

use crate::filters::invalid;
use crate::source::{push_tag, split_markers, TopLevel};

/// Name of the filter that replaces `+` in rewritten chains.
pub const ADD_FILTER: &str = "smgpy_markup_add";

/// Rewrite every `{{ ... }}` that needs Markup arithmetic; other text is copied unchanged.
pub fn rewrite_markup_concat(source: &str) -> String {
    if !source.contains("safe") {
        return source.to_string();
    }
    let mut out = String::with_capacity(source.len() + 64);
    let mut rest = source;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        let Some(end) = tag.find("}}") else { break };
        let (lead, body, trail) = split_markers(&tag[2..end]);
        match rewrite_chain(body) {
            Some(r) => push_tag(&mut out, ("{{", "}}"), lead, &r, trail),
            None => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}

/// `a + b|safe + c` -> `(a)|F((b|safe))|F((c))`, when the expression is only a `+` chain with a
/// `|safe` operand.
fn rewrite_chain(expr: &str) -> Option<String> {
    let operands = split_plus(expr)?;
    if operands.len() < 2 || !operands.iter().any(|o| has_safe_filter(o)) {
        return None;
    }
    let mut out = format!("({})", operands[0].trim());
    for o in &operands[1..] {
        out.push_str(&format!("|{ADD_FILTER}(({}))", o.trim()));
    }
    Some(out)
}

/// Split at top-level `+`; `None` when another top-level operator appears (its precedence would
/// change the meaning) or the expression is not balanced.
fn split_plus(expr: &str) -> Option<Vec<&str>> {
    let bytes = expr.as_bytes();
    let mut parts = Vec::new();
    let mut start = 0;
    let mut scan = TopLevel::new(expr, 0);
    while let Some((i, b, depth)) = scan.next() {
        if depth != 0 {
            continue;
        }
        match b {
            b'+' => {
                parts.push(&expr[start..i]);
                start = i + 1;
            }
            b'-' | b'*' | b'/' | b'%' | b'~' | b'=' | b'!' | b'<' | b'>' => return None,
            _ if b.is_ascii_alphabetic() && (i == 0 || !is_ident(bytes[i - 1])) => {
                let word_end = expr[i..]
                    .find(|c: char| !is_ident_char(c))
                    .map_or(expr.len(), |e| i + e);
                if matches!(&expr[i..word_end], "and" | "or" | "not" | "if" | "else" | "in" | "is") {
                    return None;
                }
                scan.skip_to(word_end);
            }
            _ => {}
        }
    }
    if !scan.balanced() {
        return None;
    }
    parts.push(&expr[start..]);
    Some(parts)
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'|'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether an operand applies the `safe` filter at its top level.
fn has_safe_filter(operand: &str) -> bool {
    let mut rest = operand;
    while let Some(p) = rest.find('|') {
        let after = rest[p + 1..].trim_start();
        if after
            .strip_prefix("safe")
            .is_some_and(|t| !t.starts_with(is_ident_char))
        {
            return true;
        }
        rest = &rest[p + 1..];
    }
    false
}

/// `left + right` with markupsafe's rule: if either side is safe, the other is escaped (when a
/// string) and the result is safe; otherwise ordinary `+`.
pub fn markup_add(left: &Value, right: &Value) -> Result<Value, Error> {
    let strings = left.kind() == ValueKind::String && right.kind() == ValueKind::String;
    if strings && (left.is_safe() || right.is_safe()) {
        let mut out = String::new();
        for v in [left, right] {
            let s = v.as_str().unwrap_or_default();
            if v.is_safe() {
                out.push_str(s);
            } else {
                escape_into(s, &mut out);
            }
        }
        return Ok(Value::from_safe_string(out));
    }
    plain_add(left, right)
}

fn plain_add(left: &Value, right: &Value) -> Result<Value, Error> {
    match (left.kind(), right.kind()) {
        (ValueKind::String, ValueKind::String) => Ok(Value::from(format!(
            "{}{}",
            left.as_str().unwrap_or_default(),
            right.as_str().unwrap_or_default()
        ))),
        (ValueKind::Number, ValueKind::Number) => match (i64::try_from(left.clone()), i64::try_from(right.clone())) {
            (Ok(a), Ok(b)) if left.is_integer() && right.is_integer() => a
                .checked_add(b)
                .map(Value::from)
                .ok_or_else(|| invalid("integer overflow in +")),
            _ => Ok(Value::from(
                f64::try_from(left.clone())? + f64::try_from(right.clone())?,
            )),
        },
        (ValueKind::Seq, ValueKind::Seq) => Ok(Value::from(
            left.try_iter()?.chain(right.try_iter()?).collect::<Vec<_>>(),
        )),
        (l, r) => Err(invalid(format!("unsupported operand types for +: {l} and {r}"))),
    }
}

/// markupsafe's escape of `& < > ' "`.
pub(crate) fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&#39;"),
            '"' => out.push_str("&#34;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_only_plus_chains_with_safe() {
        assert_eq!(
            rewrite_markup_concat(r#"{{- "a"|safe + t["n"] + x | tojson() -}}"#),
            r#"{{- ("a"|safe)|smgpy_markup_add((t["n"]))|smgpy_markup_add((x | tojson())) -}}"#
        );
        for untouched in [
            r#"{{ "a" + b }}"#,
            r#"{{ "a"|safe + b if c else d }}"#,
            r#"{{ "a"|safe + b ~ c }}"#,
            r#"{{ "a"|safe }}"#,
            r#"{{ x|safely + y }}"#,
            r#"{{ f("a + b"|safe) }}"#,
        ] {
            assert_eq!(rewrite_markup_concat(untouched), untouched);
        }
    }

    #[test]
    fn escapes_the_plain_side() {
        let safe = Value::from_safe_string("<b>".into());
        let plain = Value::from("'x' & \"y\"");
        let v = markup_add(&safe, &plain).unwrap();
        assert!(v.is_safe());
        assert_eq!(v.as_str(), Some("<b>&#39;x&#39; &amp; &#34;y&#34;"));
        let v = markup_add(&plain, &safe).unwrap();
        assert_eq!(v.as_str(), Some("&#39;x&#39; &amp; &#34;y&#34;<b>"));
        assert_eq!(markup_add(&Value::from(1), &Value::from(2)).unwrap(), Value::from(3));
        assert_eq!(
            markup_add(&Value::from("a"), &Value::from("b")).unwrap().as_str(),
            Some("ab")
        );
        assert!(markup_add(&safe, &Value::from(1)).is_err());
    }
}
