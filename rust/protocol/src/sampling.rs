//! The engine-facing sampling parameters (sglang / tokenspeed `sampling_params` names).

use serde_json::{Map, Value};

use crate::structured::{Constraint, Structured};

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
    /// At most this many drafted tokens per step for speculative decoding; `Some(0)` opts the
    /// request out. Engines without speculation ignore it.
    pub num_draft_tokens: Option<u32>,
    /// The structured output asked for (any request shape), sent to the engine under its
    /// SGLang key (`json_schema`, `regex`, `ebnf`, `structural_tag`).
    pub structured: Option<Structured>,
    /// OpenAI's `response_format` as the client sent it, for engines that read it.
    pub response_format: Option<Value>,
}

impl SamplingParams {
    /// Hold the output to `constraint` instead of what the client asked for: a forced tool
    /// call (`tool_choice` `required` or named) must be the call. `param` names the request
    /// field a 400 about it points at (`tools`).
    pub fn force(&mut self, constraint: Constraint, param: &str) {
        self.structured = Some(Structured::new(constraint, param));
        self.response_format = None;
    }
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
        // 0 and -1 both mean "no limit": mlx-lm and vLLM read 0 so, sglang -1.
        if v < -1 {
            return Err(E::new(
                "top_k",
                format!("top_k must be at least 1, or 0 or -1 for no limit, got {v}"),
            ));
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

/// Check an engine's `sampling_params` dict (sglang's names, what the server sends engines) with
/// the rules every HTTP route applies, so an engine called directly validates exactly as the
/// server does. Unknown keys are ignored; the error names the key.
pub fn check_engine_params(params: Value) -> Result<(), crate::ProtocolError> {
    let body: crate::generate::SamplingBody = serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        crate::ProtocolError::new(
            "sampling_params",
            format!("invalid value for `{path}`: {}", e.into_inner()),
        )
    })?;
    check_ranges(&body.shared_sampling(body.max_new_tokens)).map_err(|mut e| {
        if e.param.as_deref() == Some("max_tokens") {
            e.param = Some("max_new_tokens".to_string());
        }
        e
    })
}

#[cfg(test)]
mod engine_params_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn engine_params_follow_the_routes_rules() {
        assert!(check_engine_params(json!({"temperature": 0.7, "top_k": 0, "max_new_tokens": 5})).is_ok());
        assert!(check_engine_params(json!({"top_k": -1, "n": 2, "unknown_key": 1})).is_ok());
        let e = check_engine_params(json!({"top_k": -2})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("top_k"));
        let e = check_engine_params(json!({"max_new_tokens": 0})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("max_new_tokens"));
        let e = check_engine_params(json!({"top_p": 1.5})).unwrap_err();
        assert!(e.message.contains("top_p must be in (0, 1]"), "{}", e.message);
        let e = check_engine_params(json!({"temperature": "hot"})).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("sampling_params"));
        assert!(
            e.message.starts_with("invalid value for `temperature`"),
            "{}",
            e.message
        );
    }
}
