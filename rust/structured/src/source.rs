//! The engine-facing constraint keys (SGLang's `sampling_params` names) and the llguidance
//! grammar each one compiles to.
use llguidance::api::TopLevelGrammar;
use serde_json::{Map, Value};

use crate::StructuredError;

/// Whitespace allowed between JSON tokens: one space, or one line break and up to 32 blanks of
/// indentation, per gap. Enough for compact and pretty-printed documents, and bounded, so that
/// a small model cannot fill `max_tokens` with blank lines (the demo model does, given the
/// chance).
pub const WHITESPACE: &str = r"(?:\x20|\r?\n[\x20\x09]{0,32})";

/// One constraint, as an engine receives it in `sampling_params`.
/// Compiled grammars and check results are cached by the whole source (its hash, then equality).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// `json_schema`: a JSON Schema, as JSON text.
    JsonSchema(String),
    /// `regex`: the whole output matches this regular expression (Rust `regex` syntax).
    Regex(String),
    /// `ebnf`: a Lark grammar (llguidance's dialect; `%json {...}` inlines a schema).
    Grammar(String),
    /// `structural_tag`: vLLM / SGLang structural tag, as JSON text.
    StructuralTag(String),
}

impl Source {
    /// The keys, in the order an engine should look for them.
    pub const KEYS: [&'static str; 4] = ["json_schema", "regex", "ebnf", "structural_tag"];

    /// The source for an engine key, `None` for another key.
    pub fn from_key(key: &str, text: String) -> Option<Self> {
        match key {
            "json_schema" => Some(Self::JsonSchema(text)),
            "regex" => Some(Self::Regex(text)),
            "ebnf" => Some(Self::Grammar(text)),
            "structural_tag" => Some(Self::StructuralTag(text)),
            _ => None,
        }
    }

    /// The engine key this source travels under.
    pub fn key(&self) -> &'static str {
        match self {
            Self::JsonSchema(_) => "json_schema",
            Self::Regex(_) => "regex",
            Self::Grammar(_) => "ebnf",
            Self::StructuralTag(_) => "structural_tag",
        }
    }

    /// The text sent under [`Source::key`].
    pub fn text(&self) -> &str {
        match self {
            Self::JsonSchema(t) | Self::Regex(t) | Self::Grammar(t) | Self::StructuralTag(t) => t,
        }
    }

    /// What the source is, for messages.
    pub fn what(&self) -> &'static str {
        match self {
            Self::JsonSchema(_) => "the JSON Schema",
            Self::Regex(_) => "the regular expression",
            Self::Grammar(_) => "the grammar",
            Self::StructuralTag(_) => "the structural tag",
        }
    }

    /// The llguidance grammar.
    pub fn to_grammar(&self) -> Result<TopLevelGrammar, StructuredError> {
        match self {
            Self::JsonSchema(text) => {
                let schema = parse_json(text, "the JSON Schema")?;
                Ok(TopLevelGrammar::from_json_schema(with_options(schema, false)?))
            }
            Self::Regex(rx) => Ok(TopLevelGrammar::from_regex(rx)),
            Self::Grammar(text) => {
                if looks_like_gbnf(text) {
                    return Err(StructuredError::Gbnf);
                }
                Ok(TopLevelGrammar::from_lark(text.clone()))
            }
            Self::StructuralTag(text) => {
                let tag = parse_json(text, "the structural tag")?;
                Ok(TopLevelGrammar::from_lark(crate::structural_tag::to_lark(&tag)?))
            }
        }
    }
}

fn parse_json(text: &str, what: &'static str) -> Result<Value, StructuredError> {
    serde_json::from_str(text).map_err(|e| StructuredError::NotJson {
        what,
        message: e.to_string(),
    })
}

/// `schema` with smgpy's JSON options in its `x-guidance` (bounded whitespace), unless the
/// client set its own; `lenient` turns keywords llguidance does not implement into warnings
/// (for tools that did not ask for `strict`). Boolean schemas become objects.
pub fn with_options(schema: Value, lenient: bool) -> Result<Value, StructuredError> {
    let mut map = match schema {
        Value::Object(m) => m,
        Value::Bool(true) => Map::new(),
        Value::Bool(false) => {
            return Err(StructuredError::Invalid {
                what: "the JSON Schema",
                message: "the schema `false` accepts no document".into(),
            })
        }
        other => {
            return Err(StructuredError::Invalid {
                what: "the JSON Schema",
                message: format!("a schema must be a JSON object, got `{other}`"),
            })
        }
    };
    if !map.contains_key("x-guidance") {
        let mut options = Map::new();
        options.insert("whitespace_pattern".into(), Value::String(WHITESPACE.into()));
        if lenient {
            options.insert("lenient".into(), Value::Bool(true));
        }
        map.insert("x-guidance".into(), Value::Object(options));
    }
    Ok(Value::Object(map))
}

/// GBNF rules are `name ::= ...`; Lark has no `::=`. Text inside a Lark string or regex could
/// contain `::=` too, so only a rule definition at the start of a line counts.
fn looks_like_gbnf(text: &str) -> bool {
    text.lines().any(|line| {
        let line = line.trim_start();
        line.split_once("::=").is_some_and(|(name, _)| {
            let name = name.trim();
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        for key in Source::KEYS {
            let s = Source::from_key(key, "x".into()).unwrap();
            assert_eq!((s.key(), s.text()), (key, "x"));
        }
        assert!(Source::from_key("grammar", "x".into()).is_none());
    }

    #[test]
    fn options_are_added_unless_the_client_set_them() {
        let s = with_options(serde_json::json!({"type": "object"}), false).unwrap();
        assert_eq!(s["x-guidance"]["whitespace_pattern"], WHITESPACE);
        let own = serde_json::json!({"x-guidance": {"whitespace_flexible": false}});
        assert_eq!(with_options(own.clone(), true).unwrap(), own);
        assert_eq!(
            with_options(Value::Bool(true), false).unwrap()["x-guidance"]["whitespace_pattern"],
            WHITESPACE
        );
        assert!(with_options(Value::Bool(false), false).is_err());
        assert!(with_options(serde_json::json!([1]), false).is_err());
    }

    #[test]
    fn gbnf_is_told_apart_from_lark() {
        assert!(looks_like_gbnf("root ::= \"a\" | \"b\""));
        assert!(!looks_like_gbnf("start: \"::=\" | /a::=b/"));
        assert_eq!(
            Source::Grammar("root ::= \"x\"".into()).to_grammar().unwrap_err(),
            StructuredError::Gbnf
        );
    }
}
