//! The engine-facing sampling parameters (sglang / tokenspeed `sampling_params` names).

use serde_json::{Map, Value};

/// Sampling parameters passed to the engine. `None` means "not set by the client": the engine's
/// default applies and the key is not sent at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SamplingParams {
    pub max_new_tokens: Option<u32>,
    pub min_new_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub stop: Vec<String>,
    pub stop_token_ids: Vec<i64>,
    pub ignore_eos: Option<bool>,
    pub seed: Option<i64>,
    pub n: Option<u32>,
    pub logit_bias: Option<Map<String, Value>>,
    /// Structured-output request (`response_format`), passed through for engines that enforce it.
    pub json_schema: Option<Value>,
    pub response_format: Option<Value>,
}

impl SamplingParams {
    /// Hold the output to `schema` instead of any `response_format` the client gave: a forced
    /// tool call (`tool_choice` `required` or named) must be JSON of the call.
    pub fn force_schema(&mut self, schema: Value) {
        self.json_schema = Some(schema);
        self.response_format = None;
    }
}

/// The JSON Schema a request asks its output to follow, from the fields clients use: OpenAI's
/// `response_format` (`json_object` is any object), vLLM's `guided_json` and
/// `structured_outputs: {"json": ...}` (a schema, or its JSON text). `None` for free text.
pub fn requested_schema(
    response_format: Option<&Value>,
    guided_json: Option<&Value>,
    structured_outputs: Option<&Value>,
) -> Option<Value> {
    let from_format = response_format.and_then(|rf| match rf.get("type").and_then(Value::as_str) {
        Some("json_schema") => rf.get("json_schema").and_then(|s| s.get("schema")).cloned(),
        Some("json_object") => Some(serde_json::json!({"type": "object"})),
        _ => None,
    });
    let schema = from_format
        .or_else(|| guided_json.cloned())
        .or_else(|| structured_outputs.and_then(|s| s.get("json")).cloned())?;
    match schema {
        // Given as JSON text: parsed here; text that is not JSON goes on as is, and the engine
        // refuses it with its reason.
        Value::String(text) => Some(serde_json::from_str(&text).unwrap_or(Value::String(text))),
        other => Some(other),
    }
}

/// `response_format.type` is one OpenAI defines.
pub fn check_response_format(rf: Option<&Value>) -> Result<(), crate::ProtocolError> {
    let Some(rf) = rf else { return Ok(()) };
    if matches!(
        rf.get("type").and_then(Value::as_str),
        Some("text" | "json_object" | "json_schema")
    ) {
        return Ok(());
    }
    Err(crate::ProtocolError::new(
        "response_format.type",
        "response_format.type must be one of `text`, `json_object`, `json_schema`",
    ))
}

/// Bounds checks shared by every endpoint.
pub fn check_ranges(p: &SamplingParams) -> Result<(), crate::ProtocolError> {
    use crate::ProtocolError as E;
    if let Some(t) = p.temperature {
        if !(0.0..=100.0).contains(&t) {
            return Err(E::new(
                "temperature",
                format!("temperature must be between 0 and 100, got {t}"),
            ));
        }
    }
    if let Some(v) = p.top_p {
        if !(v > 0.0 && v <= 1.0) {
            return Err(E::new("top_p", format!("top_p must be in (0, 1], got {v}")));
        }
    }
    if let Some(v) = p.min_p {
        if !(0.0..=1.0).contains(&v) {
            return Err(E::new("min_p", format!("min_p must be in [0, 1], got {v}")));
        }
    }
    if let Some(v) = p.top_k {
        if v < -1 || v == 0 {
            return Err(E::new("top_k", format!("top_k must be -1 (disabled) or >= 1, got {v}")));
        }
    }
    for (name, v) in [
        ("frequency_penalty", p.frequency_penalty),
        ("presence_penalty", p.presence_penalty),
    ] {
        if let Some(v) = v {
            if !(-2.0..=2.0).contains(&v) {
                return Err(E::new(name, format!("{name} must be between -2 and 2, got {v}")));
            }
        }
    }
    if let Some(v) = p.repetition_penalty {
        if v <= 0.0 {
            return Err(E::new(
                "repetition_penalty",
                format!("repetition_penalty must be > 0, got {v}"),
            ));
        }
    }
    if p.max_new_tokens == Some(0) {
        return Err(E::new("max_tokens", "max_tokens must be at least 1"));
    }
    if let Some(n) = p.n {
        if n == 0 || n > 128 {
            return Err(E::new("n", format!("n must be between 1 and 128, got {n}")));
        }
    }
    if let Some(bias) = &p.logit_bias {
        for (key, value) in bias {
            let param = format!("logit_bias.{key}");
            if key.trim().parse::<u32>().is_err() {
                return Err(E::new(
                    param,
                    format!("logit_bias keys must be token ids (non-negative integers, as strings), got `{key}`"),
                ));
            }
            match value.as_f64() {
                Some(v) if (-100.0..=100.0).contains(&v) => {}
                _ => {
                    return Err(E::new(
                        param,
                        format!("logit_bias values must be numbers between -100 and 100, got {value}"),
                    ))
                }
            }
        }
    }
    if let Some(i) = p.stop_token_ids.iter().position(|t| *t < 0) {
        return Err(E::new(
            format!("stop_token_ids[{i}]"),
            "stop_token_ids must be non-negative token ids",
        ));
    }
    if let Some(i) = p.stop.iter().position(String::is_empty) {
        return Err(E::new(format!("stop[{i}]"), "stop strings must not be empty"));
    }
    if p.stop.len() > MAX_STOP_STRINGS {
        return Err(E::new(
            "stop",
            format!(
                "at most {MAX_STOP_STRINGS} stop strings are accepted, got {}",
                p.stop.len()
            ),
        ));
    }
    Ok(())
}

/// Documented limit on the number of stop strings per request (OpenAI allows 4).
pub const MAX_STOP_STRINGS: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_from_each_client_field() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let rf = json!({"type": "json_schema", "json_schema": {"name": "x", "schema": schema}});
        assert_eq!(requested_schema(Some(&rf), None, None), Some(schema.clone()));
        let object = json!({"type": "json_object"});
        assert_eq!(
            requested_schema(Some(&object), None, None),
            Some(json!({"type": "object"}))
        );
        assert_eq!(requested_schema(Some(&json!({"type": "text"})), None, None), None);
        assert_eq!(requested_schema(None, Some(&schema), None), Some(schema.clone()));
        let text = Value::String(schema.to_string());
        assert_eq!(requested_schema(None, Some(&text), None), Some(schema.clone()));
        let so = json!({"json": schema});
        assert_eq!(requested_schema(None, None, Some(&so)), Some(schema.clone()));
        let bad = Value::String("{nope".into());
        assert_eq!(requested_schema(None, Some(&bad), None), Some(bad.clone()));
        assert!(check_response_format(Some(&json!({"type": "xml"}))).is_err());
        assert!(check_response_format(Some(&object)).is_ok());
    }
}
