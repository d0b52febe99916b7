//! Finding a model directory's chat template and special tokens, in transformers' order:
//! `chat_template.jinja`, then `chat_template.json`, then `tokenizer_config.json`'s `chat_template`
//! (a string, or a list of `{"name", "template"}` variants).

use crate::TemplateError;
use serde_json::{Map, Value};
use std::path::Path;

/// What a model directory provides.
pub struct Found {
    pub templates: Vec<(String, String)>,
    pub origin: String,
    pub special_tokens: Map<String, Value>,
}

fn read(path: &Path) -> Result<Option<String>, TemplateError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TemplateError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        }),
    }
}

fn read_json(path: &Path) -> Result<Option<Value>, TemplateError> {
    match read(path)? {
        Some(text) => serde_json::from_str(&text).map(Some).map_err(|e| TemplateError::Io {
            path: path.display().to_string(),
            reason: format!("invalid JSON: {e}"),
        }),
        None => Ok(None),
    }
}

/// The `chat_template` field: a string, or a list of named variants.
fn templates_of(value: &Value, path: &Path) -> Result<Vec<(String, String)>, TemplateError> {
    match value {
        Value::String(s) => Ok(vec![("default".into(), s.clone())]),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                match (
                    item.get("name").and_then(Value::as_str),
                    item.get("template").and_then(Value::as_str),
                ) {
                    (Some(n), Some(t)) => Ok((n.to_string(), t.to_string())),
                    _ => Err(TemplateError::Io {
                        path: path.display().to_string(),
                        reason: "each named chat template needs a \"name\" and a \"template\" string".into(),
                    }),
                }
            })
            .collect(),
        _ => Err(TemplateError::Io {
            path: path.display().to_string(),
            reason: "chat_template must be a string or a list".into(),
        }),
    }
}

/// Special tokens from `tokenizer_config.json`: every string field (plain or an `AddedToken` object's
/// `content`) except the template itself.
pub fn special_tokens_of(config: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Value::Object(map) = config {
        for (k, v) in map {
            if k == "chat_template" {
                continue;
            }
            match v {
                Value::String(s) => {
                    out.insert(k.clone(), Value::String(s.clone()));
                }
                Value::Object(o) if k.ends_with("_token") => {
                    if let Some(Value::String(s)) = o.get("content") {
                        out.insert(k.clone(), Value::String(s.clone()));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Look in `dir` for a template and its special tokens.
pub fn find_in_dir(dir: &Path) -> Result<Found, TemplateError> {
    let config_path = dir.join("tokenizer_config.json");
    let config = read_json(&config_path)?;
    let special_tokens = config.as_ref().map(special_tokens_of).unwrap_or_default();

    let jinja_path = dir.join("chat_template.jinja");
    if let Some(source) = read(&jinja_path)? {
        return Ok(Found {
            templates: vec![("default".into(), source)],
            origin: jinja_path.display().to_string(),
            special_tokens,
        });
    }
    let json_path = dir.join("chat_template.json");
    if let Some(json) = read_json(&json_path)? {
        if let Some(t) = json.get("chat_template") {
            return Ok(Found {
                templates: templates_of(t, &json_path)?,
                origin: json_path.display().to_string(),
                special_tokens,
            });
        }
    }
    if let Some(t) = config.as_ref().and_then(|c| c.get("chat_template")) {
        return Ok(Found {
            templates: templates_of(t, &config_path)?,
            origin: config_path.display().to_string(),
            special_tokens,
        });
    }
    Err(TemplateError::NotFound {
        dir: dir.display().to_string(),
    })
}
