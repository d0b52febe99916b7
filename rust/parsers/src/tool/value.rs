//! How an XML-style parameter's raw text becomes a JSON value, per format, as each model's own
//! reference parser does it (class 7 of the crate docs' policy table):
//!
//! - Qwen3-Coder / Qwen3.5 / Seed-OSS (`qwen3coder_tool_parser.py` shipped with the model) and
//!   MiniMax M2 (MiniMax's parser in vLLM): the schema's type converts the text; a parameter the
//!   schema does not declare, or a request without tools, stays text; the word `null` is null
//!   unless the schema says `string`. Qwen strips one newline at each end, MiniMax all
//!   whitespace.
//! - GLM 4.5 / 4.7 (Zhipu's parser in vLLM): all whitespace stripped; text for a `string`
//!   schema, else JSON, else a Python literal, else text.
//! - DeepSeek DSML: the `string="true|false"` mark, unless the schema declares a type.
//! - Step-3: JSON or text, unless the schema says `string`.
//!
//! A `string`-typed value is always text: `{"a": 1}` or `42` written for a string parameter stay
//! the string the model wrote.
use super::ctx::Ctx;
use super::literal;
use serde_json::{Number, Value};

/// What surrounds a value that is not part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trim {
    /// The one newline a template puts after the opening and before the closing tag.
    Newline,
    /// All whitespace at both ends.
    All,
}

/// How a value without a `string` type is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Typing {
    /// The schema's type converts it; undeclared means text (the Qwen3-Coder reference parser).
    Schema,
    /// JSON, else a Python literal, else text (GLM's reference parser).
    Loose,
}

/// Strip what `trim` says surrounds a value.
pub(crate) fn trim(raw: &str, trim: Trim) -> &str {
    match trim {
        Trim::Newline => {
            let v = raw.strip_prefix('\n').unwrap_or(raw);
            v.strip_suffix('\n').unwrap_or(v)
        }
        Trim::All => raw.trim(),
    }
}

/// Schema type names that mean text, as the reference parsers list them.
fn text_type(ty: &str) -> bool {
    matches!(
        ty.to_ascii_lowercase().as_str(),
        "string" | "str" | "text" | "varchar" | "char" | "enum"
    )
}

/// Whether parameter `key`'s value is text whatever it looks like (so it can stream as a JSON
/// string while the model writes it).
pub(crate) fn is_text(ctx: &Ctx, tool: &str, key: &str, typing: Typing) -> bool {
    match (ctx.param_type(tool, key), typing) {
        (Some(ty), Typing::Schema) => text_type(ty),
        (Some(ty), Typing::Loose) => ty == "string",
        (None, _) => false,
    }
}

/// The value of an already trimmed `raw` text.
pub(crate) fn typed(ctx: &Ctx, tool: &str, key: &str, raw: &str, typing: Typing) -> Value {
    let ty = ctx.param_type(tool, key);
    match typing {
        Typing::Loose if ty == Some("string") => Value::String(raw.to_string()),
        Typing::Loose => loose_json(raw),
        Typing::Schema => schema_value(ty, raw),
    }
}

/// The Qwen3-Coder reference parser's conversion of `raw` for a parameter of schema type `ty`
/// (`None`: undeclared).
pub(crate) fn schema_value(ty: Option<&str>, raw: &str) -> Value {
    let text = || Value::String(raw.to_string());
    let Some(ty) = ty.map(str::to_ascii_lowercase) else {
        return if raw.eq_ignore_ascii_case("null") {
            Value::Null
        } else {
            text()
        };
    };
    if text_type(&ty) {
        return text();
    }
    if raw.eq_ignore_ascii_case("null") {
        return Value::Null;
    }
    let t = raw.trim();
    if ["int", "uint", "long", "short", "unsigned"]
        .iter()
        .any(|p| ty.starts_with(p))
    {
        return t.parse::<i64>().map_or_else(|_| text(), Value::from);
    }
    if ty.starts_with("num") || ty.starts_with("float") || ty == "double" {
        return match t.parse::<f64>() {
            Ok(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15 => Value::from(f as i64),
            Ok(f) => Number::from_f64(f).map_or_else(text, Value::Number),
            Err(_) => text(),
        };
    }
    if matches!(ty.as_str(), "boolean" | "bool" | "binary") {
        return Value::Bool(t.eq_ignore_ascii_case("true"));
    }
    loose_json(raw)
}

/// Text that no JSON or Python literal can be: it starts with a letter and is not one of the
/// literal words (`true`, `None`, ...), so `loose_json` would return it as text.
pub(crate) fn plain_text(raw: &str) -> bool {
    let t = raw.trim();
    t.starts_with(|c: char| c.is_alphabetic()) && !matches!(t, "true" | "false" | "null" | "True" | "False" | "None")
}

/// JSON, else a Python literal (`True`, `None`, single-quoted strings), else the text itself.
pub(crate) fn loose_json(raw: &str) -> Value {
    let t = raw.trim();
    if t.is_empty() || plain_text(t) {
        return Value::String(raw.to_string());
    }
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        return v;
    }
    literal::python_value(t).unwrap_or_else(|| Value::String(raw.to_string()))
}

/// A DSML value marked `string="true"` or `"false"`. `string="false"` says the text is JSON
/// (DeepSeek's encoding writes every non-string argument with `json.dumps`), so a JSON string
/// literal `"celsius"` is the string `celsius`; a non-string JSON value for a parameter the
/// schema types `string` stays the text the model wrote (`null` is `"null"`, vLLM's DeepSeek
/// V3.2 tests). `string="true"` is text unless the schema declares another type, which wins
/// (vLLM: `string="true"` `42` for an integer is 42).
pub(crate) fn marked_value(ctx: &Ctx, tool: &str, key: &str, raw: &str, string: bool) -> Value {
    match (ctx.param_type(tool, key), string) {
        (Some("string"), false) => match loose_json(raw) {
            v @ Value::String(_) => v,
            _ => Value::String(raw.to_string()),
        },
        (Some("string"), true) | (None, true) => Value::String(raw.to_string()),
        (Some(_), _) | (None, false) => loose_json(raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_conversions() {
        // vLLM tests/tool_parsers/test_qwen3coder_tool_parser.py::test_extract_tool_calls_type_conversion
        // and ::test_extract_tool_calls_anyof_type_conversion.
        assert_eq!(schema_value(Some("integer"), "42"), Value::from(42));
        assert_eq!(schema_value(Some("number"), "2.5"), serde_json::json!(2.5));
        assert_eq!(schema_value(Some("number"), "3.0"), Value::from(3));
        assert_eq!(schema_value(Some("boolean"), "True"), Value::Bool(true));
        assert_eq!(schema_value(Some("string"), "hello world"), Value::from("hello world"));
        assert_eq!(schema_value(Some("string"), "null"), Value::from("null"));
        assert_eq!(
            schema_value(Some("object"), r#"{"key": "value"}"#),
            serde_json::json!({"key": "value"})
        );
        assert_eq!(schema_value(Some("integer"), "abc"), Value::from("abc"));
        // Undeclared: text (W11: MiniMax `days` `5` with no tools stays "5").
        assert_eq!(schema_value(None, "5"), Value::from("5"));
        assert_eq!(schema_value(None, "null"), Value::Null);
        // SGLang test_qwen3_coder_detector complex_schema: Python literals in an array.
        assert_eq!(
            schema_value(Some("array"), "[{'content': 'Buy a car', 'status': 'pending'}]"),
            serde_json::json!([{"content": "Buy a car", "status": "pending"}])
        );
        assert_eq!(loose_json("True"), Value::Bool(true));
        assert_eq!(loose_json("hi there"), Value::from("hi there"));
        assert_eq!(trim("\n  x \n", Trim::Newline), "  x ");
        assert_eq!(trim("\n  x \n", Trim::All), "x");
    }
}
