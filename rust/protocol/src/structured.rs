//! Structured-output requests, from every shape clients send them in, as one typed
//! [`Constraint`], and the engine-facing keys it travels under (SGLang's `sampling_params`
//! names: `json_schema`, `regex`, `ebnf`, `structural_tag`).
//!
//! Shapes: OpenAI `response_format` (`json_object`, `json_schema` with `strict`, and vLLM's
//! `structural_tag`), Responses `text.format`, vLLM `structured_outputs` (`json`, `regex`,
//! `choice`, `grammar`, `json_object`, `structural_tag`) and its older `guided_json` /
//! `guided_regex` / `guided_choice` / `guided_grammar`, SGLang `json_schema` / `regex` / `ebnf`
//! / `structural_tag` (top level on its OpenAI endpoints, in `sampling_params` on `/generate`),
//! and Anthropic `output_config.format` (and the beta `output_format`). A request may ask in
//! one way only. Whether the constraint compiles is checked by the server (`smgpy-structured`).

use serde_json::{json, Value};

use crate::error::ProtocolError;

/// What the output must be.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// A JSON document valid against this JSON Schema.
    Json { schema: Value },
    /// Any JSON object.
    JsonObject,
    /// Text matching this regular expression, whole.
    Regex(String),
    /// Exactly one of these strings.
    Choice(Vec<String>),
    /// A Lark grammar (llguidance's dialect).
    Grammar(String),
    /// A structural tag (vLLM / SGLang / xgrammar JSON form).
    StructuralTag(Value),
}

/// A constraint and the request field it came from (the `param` of a 400 about it).
#[derive(Debug, Clone, PartialEq)]
pub struct Structured {
    pub constraint: Constraint,
    pub param: String,
}

impl Structured {
    pub fn new(constraint: Constraint, param: impl Into<String>) -> Self {
        Self {
            constraint,
            param: param.into(),
        }
    }
}

impl Constraint {
    /// The engine key and text this constraint is sent as. A choice becomes a regular
    /// expression, which every structured-output backend understands.
    pub fn engine_param(&self) -> (&'static str, String) {
        match self {
            Constraint::Json { schema } => ("json_schema", schema.to_string()),
            Constraint::JsonObject => ("json_schema", r#"{"type":"object"}"#.to_string()),
            Constraint::Regex(r) => ("regex", r.clone()),
            Constraint::Choice(options) => ("regex", choice_regex(options)),
            Constraint::Grammar(g) => ("ebnf", g.clone()),
            Constraint::StructuralTag(t) => ("structural_tag", t.to_string()),
        }
    }
}

/// `(?:a|b|c)` with every option taken literally.
pub fn choice_regex(options: &[String]) -> String {
    let mut out = String::from("(?:");
    for (i, o) in options.iter().enumerate() {
        if i > 0 {
            out.push('|');
        }
        for c in o.chars() {
            if "\\.+*?()|[]{}^$#&-~".contains(c) {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push(')');
    out
}

/// The structured-output fields of the OpenAI-style endpoints (chat and completions).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenAiFields<'a> {
    pub response_format: Option<&'a Value>,
    pub structured_outputs: Option<&'a Value>,
    pub guided_json: Option<&'a Value>,
    pub guided_regex: Option<&'a Value>,
    pub guided_choice: Option<&'a Value>,
    pub guided_grammar: Option<&'a Value>,
    /// SGLang's top-level extras.
    pub json_schema: Option<&'a Value>,
    pub regex: Option<&'a Value>,
    pub ebnf: Option<&'a Value>,
    pub structural_tag: Option<&'a Value>,
}

/// Chat completions and completions.
pub fn from_openai(f: OpenAiFields<'_>) -> Result<Option<Structured>, ProtocolError> {
    let mut found = Vec::new();
    if let Some(rf) = present(f.response_format) {
        if let Some(s) = response_format(rf)? {
            found.push(s);
        }
    }
    if let Some(so) = present(f.structured_outputs) {
        found.extend(structured_outputs(so)?);
    }
    let fields: [(&str, Option<&Value>, Kind); 8] = [
        ("guided_json", f.guided_json, Kind::Json),
        ("guided_regex", f.guided_regex, Kind::Regex),
        ("guided_choice", f.guided_choice, Kind::Choice),
        ("guided_grammar", f.guided_grammar, Kind::Grammar),
        ("json_schema", f.json_schema, Kind::Json),
        ("regex", f.regex, Kind::Regex),
        ("ebnf", f.ebnf, Kind::Grammar),
        ("structural_tag", f.structural_tag, Kind::StructuralTag),
    ];
    for (param, value, kind) in fields {
        if let Some(v) = present(value) {
            found.push(kind.read(v, param)?);
        }
    }
    one(found)
}

/// Responses `text.format`.
pub fn from_responses(text: Option<&Value>) -> Result<Option<Structured>, ProtocolError> {
    let Some(format) = present(text).and_then(|t| present(t.get("format"))) else {
        return Ok(None);
    };
    match type_of(format, "text.format")? {
        "text" => Ok(None),
        "json_object" => Ok(Some(Structured::new(Constraint::JsonObject, "text.format"))),
        "json_schema" => {
            let schema = format
                .get("schema")
                .ok_or_else(|| ProtocolError::new("text.format.schema", "`text.format.schema` is required"))?;
            Kind::Json.read(schema, "text.format.schema").map(Some)
        }
        other => Err(ProtocolError::new(
            "text.format.type",
            format!("text.format.type must be `text`, `json_object` or `json_schema`, got `{other}`"),
        )),
    }
}

/// SGLang `/generate` `sampling_params` (`json_schema`, `regex`, `ebnf`, `structural_tag`).
pub fn from_sglang(
    json_schema: Option<&Value>,
    regex: Option<&Value>,
    ebnf: Option<&Value>,
    structural_tag: Option<&Value>,
) -> Result<Option<Structured>, ProtocolError> {
    let mut found = Vec::new();
    for (key, value, kind) in [
        ("json_schema", json_schema, Kind::Json),
        ("regex", regex, Kind::Regex),
        ("ebnf", ebnf, Kind::Grammar),
        ("structural_tag", structural_tag, Kind::StructuralTag),
    ] {
        if let Some(v) = present(value) {
            found.push(kind.read(v, &format!("sampling_params.{key}"))?);
        }
    }
    one(found)
}

/// Anthropic `output_config.format` (what the SDK's `messages.parse(output_format=Model)`
/// sends) or the beta `output_format`: `{"type": "json_schema", "schema": {...}}`.
pub fn from_anthropic(
    output_config: Option<&Value>,
    output_format: Option<&Value>,
) -> Result<Option<Structured>, ProtocolError> {
    let mut found = Vec::new();
    let config = present(output_config).and_then(|c| present(c.get("format")));
    for (param, format) in [
        ("output_config.format", config),
        ("output_format", present(output_format)),
    ] {
        let Some(format) = format else { continue };
        match type_of(format, param)? {
            "json_schema" => {
                let at = format!("{param}.schema");
                let schema = format
                    .get("schema")
                    .ok_or_else(|| ProtocolError::new(at.clone(), format!("`{at}` is required")))?;
                found.push(Kind::Json.read(schema, &at)?);
            }
            other => {
                return Err(ProtocolError::new(
                    format!("{param}.type"),
                    format!("{param}.type must be `json_schema`, got `{other}`"),
                ))
            }
        }
    }
    one(found)
}

/// What a field holds.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Json,
    Regex,
    Choice,
    Grammar,
    StructuralTag,
}

impl Kind {
    fn read(self, v: &Value, param: &str) -> Result<Structured, ProtocolError> {
        let constraint = match self {
            Kind::Json => Constraint::Json {
                schema: json_value(v, param)?,
            },
            Kind::Regex => Constraint::Regex(string(v, param)?),
            Kind::Grammar => Constraint::Grammar(string(v, param)?),
            Kind::StructuralTag => Constraint::StructuralTag(json_value(v, param)?),
            Kind::Choice => {
                let options = v
                    .as_array()
                    .filter(|a| !a.is_empty())
                    .and_then(|a| {
                        a.iter()
                            .map(|o| o.as_str().map(str::to_string))
                            .collect::<Option<Vec<_>>>()
                    })
                    .ok_or_else(|| {
                        ProtocolError::new(param, format!("`{param}` must be a non-empty list of strings"))
                    })?;
                Constraint::Choice(options)
            }
        };
        Ok(Structured::new(constraint, param))
    }
}

/// `response_format`.
fn response_format(rf: &Value) -> Result<Option<Structured>, ProtocolError> {
    let at = |p: &str| format!("response_format.{p}");
    match type_of(rf, "response_format")? {
        "text" => Ok(None),
        "json_object" => Ok(Some(Structured::new(Constraint::JsonObject, "response_format"))),
        "json_schema" => {
            let spec = rf.get("json_schema").filter(|s| s.is_object()).ok_or_else(|| {
                ProtocolError::new(
                    at("json_schema"),
                    "`response_format.json_schema` must be an object with `name` and `schema`",
                )
            })?;
            match spec.get("schema") {
                // OpenAI allows leaving the schema out: any JSON value then.
                None | Some(Value::Null) => {
                    let any = Constraint::Json { schema: json!({}) };
                    Ok(Some(Structured::new(any, at("json_schema"))))
                }
                Some(schema) => Kind::Json.read(schema, &at("json_schema.schema")).map(Some),
            }
        }
        "structural_tag" => Ok(Some(Structured::new(Constraint::StructuralTag(rf.clone()), "response_format"))),
        other => Err(ProtocolError::new(
            at("type"),
            format!(
                "response_format.type must be one of `text`, `json_object`, `json_schema`, `structural_tag`, got `{other}`"
            ),
        )),
    }
}

/// vLLM `structured_outputs`: exactly one constraint key (its options such as
/// `disable_any_whitespace` are accepted and left to the engine's defaults).
fn structured_outputs(so: &Value) -> Result<Vec<Structured>, ProtocolError> {
    let obj = so
        .as_object()
        .ok_or_else(|| ProtocolError::new("structured_outputs", "`structured_outputs` must be an object"))?;
    let mut found = Vec::new();
    for (key, kind) in [
        ("json", Kind::Json),
        ("regex", Kind::Regex),
        ("choice", Kind::Choice),
        ("grammar", Kind::Grammar),
        ("structural_tag", Kind::StructuralTag),
    ] {
        if let Some(v) = present(obj.get(key)) {
            found.push(kind.read(v, &format!("structured_outputs.{key}"))?);
        }
    }
    if obj.get("json_object").and_then(Value::as_bool) == Some(true) {
        found.push(Structured::new(
            Constraint::JsonObject,
            "structured_outputs.json_object",
        ));
    }
    Ok(found)
}

/// At most one constraint per request.
fn one(found: Vec<Structured>) -> Result<Option<Structured>, ProtocolError> {
    match <[Structured; 2]>::try_from(found) {
        Ok([a, b]) => Err(ProtocolError::new(
            b.param.clone(),
            format!(
                "`{}` and `{}` both ask for structured output; send one",
                a.param, b.param
            ),
        )),
        Err(found) if found.len() > 2 => Err(ProtocolError::new(
            found[1].param.clone(),
            format!(
                "{} fields ask for structured output ({}); send one",
                found.len(),
                found
                    .iter()
                    .map(|s| format!("`{}`", s.param))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
        Err(mut found) => Ok(found.pop()),
    }
}

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

fn type_of<'a>(v: &'a Value, param: &str) -> Result<&'a str, ProtocolError> {
    v.get("type").and_then(Value::as_str).ok_or_else(|| {
        ProtocolError::new(
            format!("{param}.type"),
            format!("`{param}` must be an object with a string `type`"),
        )
    })
}

fn string(v: &Value, param: &str) -> Result<String, ProtocolError> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| ProtocolError::new(param, format!("`{param}` must be a string")))
}

/// A JSON value given inline or as JSON text (vLLM and SGLang accept both).
fn json_value(v: &Value, param: &str) -> Result<Value, ProtocolError> {
    match v {
        Value::String(text) => serde_json::from_str(text)
            .map_err(|e| ProtocolError::new(param, format!("`{param}` is not valid JSON: {e}"))),
        other => Ok(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openai(body: Value) -> Result<Option<Structured>, ProtocolError> {
        let g = |k: &str| body.get(k);
        from_openai(OpenAiFields {
            response_format: g("response_format"),
            structured_outputs: g("structured_outputs"),
            guided_json: g("guided_json"),
            guided_regex: g("guided_regex"),
            guided_choice: g("guided_choice"),
            guided_grammar: g("guided_grammar"),
            json_schema: g("json_schema"),
            regex: g("regex"),
            ebnf: g("ebnf"),
            structural_tag: g("structural_tag"),
        })
    }

    fn constraint(body: Value) -> (Constraint, String) {
        let s = openai(body).unwrap().unwrap();
        (s.constraint, s.param)
    }

    #[test]
    fn every_openai_shape() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let rf = json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": true}}});
        assert_eq!(
            constraint(rf),
            (
                Constraint::Json { schema: schema.clone() },
                "response_format.json_schema.schema".into()
            )
        );
        assert_eq!(
            constraint(json!({"response_format": {"type": "json_object"}})).0,
            Constraint::JsonObject
        );
        assert!(openai(json!({"response_format": {"type": "text"}})).unwrap().is_none());
        assert_eq!(
            constraint(json!({"guided_json": schema.to_string()})).0,
            Constraint::Json { schema: schema.clone() }
        );
        assert_eq!(
            constraint(json!({"structured_outputs": {"json": schema}})).0,
            Constraint::Json { schema: schema.clone() }
        );
        assert_eq!(
            constraint(json!({"structured_outputs": {"regex": "a+"}})).0,
            Constraint::Regex("a+".into())
        );
        assert_eq!(
            constraint(json!({"structured_outputs": {"choice": ["yes", "no"]}})).0,
            Constraint::Choice(vec!["yes".into(), "no".into()])
        );
        assert_eq!(
            constraint(json!({"structured_outputs": {"grammar": "start: \"x\""}})).0,
            Constraint::Grammar("start: \"x\"".into())
        );
        assert_eq!(
            constraint(json!({"structured_outputs": {"json_object": true}})).0,
            Constraint::JsonObject
        );
        assert_eq!(constraint(json!({"guided_regex": "[0-9]+"})).1, "guided_regex");
        assert_eq!(
            constraint(json!({"guided_choice": ["a"]})).0,
            Constraint::Choice(vec!["a".into()])
        );
        assert_eq!(
            constraint(json!({"guided_grammar": "start: \"x\""})).1,
            "guided_grammar"
        );
        assert_eq!(constraint(json!({"regex": "x"})).1, "regex");
        assert_eq!(constraint(json!({"ebnf": "start: \"x\""})).1, "ebnf");
        assert_eq!(
            constraint(json!({"json_schema": "{}"})).0,
            Constraint::Json { schema: json!({}) }
        );
        let tag = json!({"type": "structural_tag", "structures": [], "triggers": []});
        assert_eq!(
            constraint(json!({"response_format": tag})).0,
            Constraint::StructuralTag(tag.clone())
        );
        assert_eq!(
            constraint(json!({"structural_tag": tag.to_string()})).0,
            Constraint::StructuralTag(tag)
        );
        assert!(openai(json!({})).unwrap().is_none());
    }

    #[test]
    fn shape_errors_name_the_field() {
        let param = |b: Value| openai(b).unwrap_err().param.unwrap();
        assert_eq!(
            param(json!({"response_format": {"type": "xml"}})),
            "response_format.type"
        );
        assert_eq!(param(json!({"guided_json": "{nope"})), "guided_json");
        assert_eq!(param(json!({"guided_choice": []})), "guided_choice");
        assert_eq!(param(json!({"guided_choice": [1]})), "guided_choice");
        assert_eq!(param(json!({"guided_regex": 5})), "guided_regex");
        assert_eq!(param(json!({"structured_outputs": 1})), "structured_outputs");
        let two = openai(json!({"response_format": {"type": "json_object"}, "guided_regex": "a"})).unwrap_err();
        assert!(two.message.contains("both ask"), "{}", two.message);
        assert_eq!(
            param(json!({"response_format": {"type": "json_schema"}})),
            "response_format.json_schema"
        );
    }

    #[test]
    fn responses_generate_and_anthropic() {
        let schema = json!({"type": "object"});
        let text = json!({"format": {"type": "json_schema", "name": "x", "schema": schema, "strict": true}});
        let s = from_responses(Some(&text)).unwrap().unwrap();
        assert_eq!(
            (s.constraint, s.param.as_str()),
            (Constraint::Json { schema: schema.clone() }, "text.format.schema")
        );
        assert!(from_responses(Some(&json!({"format": {"type": "text"}})))
            .unwrap()
            .is_none());
        assert_eq!(
            from_responses(Some(&json!({"format": {"type": "yaml"}})))
                .unwrap_err()
                .param
                .as_deref(),
            Some("text.format.type")
        );
        let s = from_sglang(Some(&Value::String(schema.to_string())), None, None, None)
            .unwrap()
            .unwrap();
        assert_eq!(s.param, "sampling_params.json_schema");
        assert!(from_sglang(None, Some(&json!("a")), Some(&json!("start: \"a\"")), None).is_err());
        let cfg = json!({"format": {"type": "json_schema", "schema": schema}});
        let s = from_anthropic(Some(&cfg), None).unwrap().unwrap();
        assert_eq!(
            (s.constraint, s.param.as_str()),
            (Constraint::Json { schema }, "output_config.format.schema")
        );
        assert!(from_anthropic(Some(&json!({"effort": "low"})), None).unwrap().is_none());
        assert!(from_anthropic(None, Some(&json!({"type": "xml"}))).is_err());
    }

    #[test]
    fn engine_keys() {
        assert_eq!(
            Constraint::JsonObject.engine_param(),
            ("json_schema", r#"{"type":"object"}"#.into())
        );
        let choice = Constraint::Choice(vec!["a.b".into(), "c|d".into(), "(e)".into()]);
        assert_eq!(choice.engine_param(), ("regex", r"(?:a\.b|c\|d|\(e\))".into()));
        assert_eq!(Constraint::Grammar("g".into()).engine_param().0, "ebnf");
    }
}
