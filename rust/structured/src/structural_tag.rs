//! Structural tags (vLLM `structured_outputs.structural_tag`, SGLang `structural_tag`,
//! `response_format: {"type": "structural_tag"}`) as Lark.
//!
//! Two forms exist. The first lists `structures` (`begin`, JSON `schema`, `end`) and the
//! `triggers` that open them: text is free until a trigger, then the structure whose `begin`
//! it starts is enforced. xgrammar's newer form nests a `format` (`const_string`,
//! `json_schema`, `regex`, `any_text`, `sequence`, `or`, `tag`, `triggered_tags`,
//! `tags_with_separator`). Both become llguidance Lark: a trigger is a lazy terminal (free text
//! ending at the trigger's first occurrence), a schema is `%json`.
use serde_json::Value;

use crate::source::with_options;
use crate::StructuredError;

/// The Lark grammar of a structural tag.
pub fn to_lark(tag: &Value) -> Result<String, StructuredError> {
    let mut g = Gen::default();
    let start = if let Some(format) = tag.get("format") {
        g.element(format, "format")?
    } else {
        g.legacy(tag)?
    };
    let mut out = String::from("%llguidance {}\n");
    out.push_str(&format!("start: {start}\nTEXT: /(.|\\n)*/\n"));
    for r in g.rules {
        out.push_str(&r);
        out.push('\n');
    }
    Ok(out)
}

/// A string as a Lark literal.
pub(crate) fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A JSON Schema as an inline `%json` expression, with smgpy's options.
pub(crate) fn json(schema: &Value, lenient: bool) -> Result<String, StructuredError> {
    let schema = with_options(schema.clone(), lenient)?;
    Ok(format!("%json {schema}"))
}

fn bad(path: &str, message: impl Into<String>) -> StructuredError {
    StructuredError::Invalid {
        what: "the structural tag",
        message: format!("`{path}`: {}", message.into()),
    }
}

#[derive(Default)]
struct Gen {
    rules: Vec<String>,
}

impl Gen {
    fn fresh(&self, stem: &str) -> String {
        format!("{stem}_{}", self.rules.len())
    }

    fn rule(&mut self, name: &str, options: &str, body: &str) {
        self.rules.push(format!("{name}{options}: {body}"));
    }

    /// Free text up to and including `end` (lazy: the first `end` closes it).
    fn text_until(&mut self, end: &str) -> String {
        let name = self.fresh("text");
        self.rule(&name, "[lazy]", &format!("TEXT {}", lit(end)));
        name
    }

    fn str_field<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a str, StructuredError> {
        v.get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| bad(&format!("{path}.{key}"), "must be a string"))
    }

    fn list<'a>(v: &'a Value, key: &str, path: &str) -> Result<&'a [Value], StructuredError> {
        v.get(key)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .ok_or_else(|| bad(&format!("{path}.{key}"), "must be a list"))
    }

    /// `structures` + `triggers`.
    fn legacy(&mut self, tag: &Value) -> Result<String, StructuredError> {
        let structures = Self::list(tag, "structures", "structural_tag")?;
        let triggers: Vec<&str> = Self::list(tag, "triggers", "structural_tag")?
            .iter()
            .map(|t| {
                t.as_str()
                    .ok_or_else(|| bad("structural_tag.triggers", "must be strings"))
            })
            .collect::<Result<_, _>>()?;
        let mut tags = Vec::new();
        for (i, s) in structures.iter().enumerate() {
            let path = format!("structures[{i}]");
            let begin = Self::str_field(s, "begin", &path)?;
            let end = Self::str_field(s, "end", &path)?;
            let schema = s
                .get("schema")
                .ok_or_else(|| bad(&format!("{path}.schema"), "is missing"))?;
            let trigger = triggers
                .iter()
                .find(|t| !t.is_empty() && begin.starts_with(**t))
                .ok_or_else(|| bad(&format!("{path}.begin"), "does not start with any of `triggers`"))?;
            tags.push((
                *trigger,
                format!("{} {} {}", lit(&begin[trigger.len()..]), json(schema, false)?, lit(end)),
            ));
        }
        let at_least_one = tag.get("at_least_one").and_then(Value::as_bool).unwrap_or(false);
        Ok(self.triggered(&tags, at_least_one, false))
    }

    /// Free text with tags opened by triggers: `(TEXT trigger rest)* TEXT`.
    fn triggered(&mut self, tags: &[(&str, String)], at_least_one: bool, stop_after_first: bool) -> String {
        let mut alts = Vec::new();
        for (trigger, rest) in tags {
            let head = self.text_until(trigger);
            let name = self.fresh("tag");
            self.rule(&name, "", &format!("{head} {rest}"));
            alts.push(name);
        }
        if alts.is_empty() {
            return "TEXT".into();
        }
        let one = format!("({})", alts.join(" | "));
        match (stop_after_first, at_least_one) {
            (true, true) => one,
            (true, false) => format!("({one} | TEXT)"),
            (false, true) => format!("{one}+ TEXT"),
            (false, false) => format!("{one}* TEXT"),
        }
    }

    fn element(&mut self, v: &Value, path: &str) -> Result<String, StructuredError> {
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| bad(&format!("{path}.type"), "must be a string"))?;
        match kind {
            "const_string" => Ok(lit(Self::str_field(v, "value", path)?)),
            "json_schema" => {
                let schema = v
                    .get("json_schema")
                    .ok_or_else(|| bad(&format!("{path}.json_schema"), "is missing"))?;
                json(schema, false)
            }
            "regex" => Ok(format!(
                "/{}/",
                llguidance::regex_to_lark(Self::str_field(v, "pattern", path)?, "")
            )),
            "any_text" => Ok("TEXT".into()),
            "sequence" | "or" => {
                let parts = Self::list(v, "elements", path)?
                    .iter()
                    .enumerate()
                    .map(|(i, e)| self.element(e, &format!("{path}.elements[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                if parts.is_empty() {
                    return Err(bad(&format!("{path}.elements"), "must not be empty"));
                }
                Ok(format!("({})", parts.join(if kind == "or" { " | " } else { " " })))
            }
            "tag" => self.tag(v, path),
            "triggered_tags" => {
                let triggers: Vec<&str> = Self::list(v, "triggers", path)?
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                let mut tags = Vec::new();
                for (i, t) in Self::list(v, "tags", path)?.iter().enumerate() {
                    let p = format!("{path}.tags[{i}]");
                    let begin = Self::str_field(t, "begin", &p)?;
                    let trigger = triggers
                        .iter()
                        .find(|tr| !tr.is_empty() && begin.starts_with(**tr))
                        .ok_or_else(|| bad(&format!("{p}.begin"), "does not start with any of `triggers`"))?;
                    let body = self.tag_body(t, &p, &begin[trigger.len()..])?;
                    tags.push((*trigger, body));
                }
                let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
                Ok(self.triggered(&tags, flag("at_least_one"), flag("stop_after_first")))
            }
            "tags_with_separator" => {
                let tags = Self::list(v, "tags", path)?
                    .iter()
                    .enumerate()
                    .map(|(i, t)| self.tag(t, &format!("{path}.tags[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                let sep = lit(Self::str_field(v, "separator", path)?);
                let one = format!("({})", tags.join(" | "));
                let flag = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
                Ok(match (flag("stop_after_first"), flag("at_least_one")) {
                    (true, true) => one,
                    (true, false) => format!("{one}?"),
                    (false, true) => format!("({one} ({sep} {one})*)"),
                    (false, false) => format!("({one} ({sep} {one})*)?"),
                })
            }
            other => Err(bad(
                &format!("{path}.type"),
                format!(
                    "`{other}` is not supported; use const_string, json_schema, regex, any_text, sequence, or, \
                     tag, triggered_tags or tags_with_separator"
                ),
            )),
        }
    }

    /// `begin content end`.
    fn tag(&mut self, v: &Value, path: &str) -> Result<String, StructuredError> {
        let begin = Self::str_field(v, "begin", path)?;
        self.tag_body(v, path, begin)
    }

    /// `begin` (already cut after a trigger) + content + end. Free-text content ends at the
    /// first `end`.
    fn tag_body(&mut self, v: &Value, path: &str, begin: &str) -> Result<String, StructuredError> {
        let end = Self::str_field(v, "end", path)?;
        let content = v
            .get("content")
            .ok_or_else(|| bad(&format!("{path}.content"), "is missing"))?;
        if content.get("type").and_then(Value::as_str) == Some("any_text") {
            return Ok(format!("{} {}", lit(begin), self.text_until(end)));
        }
        let inner = self.element(content, &format!("{path}.content"))?;
        Ok(format!("{} {inner} {}", lit(begin), lit(end)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn legacy_form() {
        let tag = json!({"type": "structural_tag", "triggers": ["<function="], "structures": [
            {"begin": "<function=f>", "schema": {"type": "object"}, "end": "</function>"}]});
        let lark = to_lark(&tag).unwrap();
        assert!(lark.contains("text_0[lazy]: TEXT \"<function=\""), "{lark}");
        assert!(lark.contains("\"f>\" %json"), "{lark}");
        let missing = json!({"structures": [{"begin": "<x>", "schema": {}, "end": "</x>"}], "triggers": ["<y"]});
        assert!(to_lark(&missing)
            .unwrap_err()
            .to_string()
            .contains("structures[0].begin"));
    }

    #[test]
    fn format_form() {
        let tag = json!({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool>"],
            "tags": [{"begin": "<tool>a", "content": {"type": "json_schema", "json_schema": {"type": "object"}}, "end": "</tool>"}],
            "at_least_one": true}});
        assert!(to_lark(&tag).unwrap().contains("+ TEXT"));
        let seq = json!({"format": {"type": "sequence", "elements": [{"type": "const_string", "value": "A"},
            {"type": "tag", "begin": "<t>", "content": {"type": "any_text"}, "end": "</t>"}]}});
        assert!(to_lark(&seq).unwrap().contains("text_0[lazy]: TEXT \"</t>\""));
        let bad = json!({"format": {"type": "qwen_xml_parameter"}});
        assert!(to_lark(&bad).unwrap_err().to_string().contains("qwen_xml_parameter"));
    }
}
