//! `POST /v1/embeddings` in OpenAI's shape: the request's `input` in its four forms, its
//! validation, and the vector encodings of the answer (`float` or `base64` of little-endian f32).
//!
//! `input` is read from a raw JSON value rather than an untagged serde enum, so that a bad element
//! is answered with its own path (`input[3]`) instead of "did not match any variant".

use serde::Deserialize;
use serde_json::Value;

use crate::ProtocolError;

/// Inputs one request may carry at most (OpenAI's bound).
pub const MAX_INPUTS: usize = 2048;

/// The body of `POST /v1/embeddings`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct EmbeddingRequest {
    pub model: Option<String>,
    /// A string, a list of strings, a list of token ids or a list of lists of token ids.
    pub input: Option<Value>,
    pub encoding_format: Option<Value>,
    pub dimensions: Option<Value>,
    pub user: Option<String>,
}

/// What is to be embedded: texts, or token ids the client made itself (one list per input).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmbeddingInput {
    Texts(Vec<String>),
    Ids(Vec<Vec<i64>>),
}

impl EmbeddingInput {
    pub fn len(&self) -> usize {
        match self {
            EmbeddingInput::Texts(t) => t.len(),
            EmbeddingInput::Ids(i) => i.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How the vectors are written in the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EncodingFormat {
    /// A JSON array of numbers per input.
    #[default]
    Float,
    /// Base64 of the vector's little-endian f32 bytes (OpenAI's SDK asks for this by default).
    Base64,
}

/// A request that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidEmbeddingRequest {
    pub input: EmbeddingInput,
    pub format: EncodingFormat,
    /// Asked-for vector size (checked against the model by the server).
    pub dimensions: Option<u32>,
}

impl EmbeddingRequest {
    /// Check every field; errors name the offending one (`input[2][0]`, `encoding_format`, ...).
    pub fn validate(&self) -> Result<ValidEmbeddingRequest, ProtocolError> {
        let input = parse_input(self.input.as_ref())?;
        let format = match &self.encoding_format {
            None | Some(Value::Null) => EncodingFormat::Float,
            Some(Value::String(s)) if s == "float" => EncodingFormat::Float,
            Some(Value::String(s)) if s == "base64" => EncodingFormat::Base64,
            Some(other) => {
                return Err(ProtocolError::new(
                    "encoding_format",
                    format!("encoding_format must be \"float\" or \"base64\", got {other}"),
                ))
            }
        };
        let dimensions = match &self.dimensions {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64().and_then(|d| u32::try_from(d).ok()).filter(|d| *d >= 1) {
                Some(d) => Some(d),
                None => {
                    return Err(ProtocolError::new(
                        "dimensions",
                        format!("dimensions must be a positive integer, got {v}"),
                    ))
                }
            },
        };
        Ok(ValidEmbeddingRequest {
            input,
            format,
            dimensions,
        })
    }
}

fn parse_input(input: Option<&Value>) -> Result<EmbeddingInput, ProtocolError> {
    let expected = "a string, a list of strings, a list of token ids or a list of lists of token ids";
    match input {
        None | Some(Value::Null) => Err(ProtocolError::new(
            "input",
            format!("input is required: send {expected}"),
        )),
        Some(Value::String(s)) => {
            if s.is_empty() {
                return Err(ProtocolError::new("input", "input must not be an empty string"));
            }
            Ok(EmbeddingInput::Texts(vec![s.clone()]))
        }
        Some(Value::Array(items)) => {
            if items.is_empty() {
                return Err(ProtocolError::new("input", "input must not be an empty list"));
            }
            if items.len() > MAX_INPUTS {
                return Err(ProtocolError::new(
                    "input",
                    format!(
                        "input holds {} items, more than the {MAX_INPUTS} one request may carry: split it",
                        items.len()
                    ),
                ));
            }
            match &items[0] {
                Value::String(_) => texts(items).map(EmbeddingInput::Texts),
                Value::Number(_) => ids(items, "input").map(|one| EmbeddingInput::Ids(vec![one])),
                Value::Array(_) => items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| match v {
                        Value::Array(inner) if inner.is_empty() => {
                            Err(item_error(i, "must not be an empty list of token ids"))
                        }
                        Value::Array(inner) => ids(inner, &format!("input[{i}]")),
                        other => Err(item_error(
                            i,
                            format_args!("must be a list of token ids like the items before it, got {other}"),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(EmbeddingInput::Ids),
                other => Err(ProtocolError::new(
                    "input[0]",
                    format!("input[0] must be a string or token ids, got {other}"),
                )),
            }
        }
        Some(other) => Err(ProtocolError::new(
            "input",
            format!("input must be {expected}, got {other}"),
        )),
    }
}

fn texts(items: &[Value]) -> Result<Vec<String>, ProtocolError> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) if s.is_empty() => Err(item_error(i, "must not be an empty string")),
            Value::String(s) => Ok(s.clone()),
            other => Err(item_error(
                i,
                format_args!("must be a string like the items before it, got {other}"),
            )),
        })
        .collect()
}

/// `input[i]` is not what its place in the list asks: `must` says what it must be.
fn item_error(i: usize, must: impl std::fmt::Display) -> ProtocolError {
    ProtocolError::new(format!("input[{i}]"), format!("input[{i}] {must}"))
}

fn ids(items: &[Value], path: &str) -> Result<Vec<i64>, ProtocolError> {
    items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_u64()
                .filter(|id| *id <= u64::from(u32::MAX))
                .and_then(|id| i64::try_from(id).ok())
                .ok_or_else(|| {
                    ProtocolError::new(
                        format!("{path}[{i}]"),
                        format!("{path}[{i}] must be a token id (an integer from 0 to 2^32 - 1), got {v}"),
                    )
                })
        })
        .collect()
}

/// The first `dims` components of `v`, scaled back to unit length (Matryoshka truncation). A zero
/// vector stays zero.
pub fn truncate_normalized(v: &[f32], dims: usize) -> Vec<f32> {
    let mut out: Vec<f32> = v.iter().take(dims).copied().collect();
    let norm = out.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if norm > 0.0 {
        for x in &mut out {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
    out
}

/// Standard base64 (with padding) of the vector's little-endian f32 bytes, as OpenAI writes it.
pub fn base64_f32(v: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextets = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        for (k, s) in sextets.iter().enumerate() {
            // A chunk of `len` bytes fills `len + 1` characters; the rest is padding.
            out.push(if k <= chunk.len() {
                char::from(ALPHABET[*s as usize])
            } else {
                '='
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(v: Value) -> Result<ValidEmbeddingRequest, ProtocolError> {
        serde_json::from_value::<EmbeddingRequest>(v).unwrap().validate()
    }

    #[test]
    fn the_four_input_forms() {
        assert_eq!(
            req(json!({"input": "a"})).unwrap().input,
            EmbeddingInput::Texts(vec!["a".into()])
        );
        assert_eq!(
            req(json!({"input": ["a", "b"]})).unwrap().input,
            EmbeddingInput::Texts(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            req(json!({"input": [1, 2]})).unwrap().input,
            EmbeddingInput::Ids(vec![vec![1, 2]])
        );
        assert_eq!(
            req(json!({"input": [[1], [2, 3]]})).unwrap().input,
            EmbeddingInput::Ids(vec![vec![1], vec![2, 3]])
        );
    }

    #[test]
    fn bad_inputs_name_their_place() {
        let param = |v: Value| req(v).unwrap_err().param.unwrap();
        assert_eq!(param(json!({"input": ""})), "input");
        assert_eq!(param(json!({"input": []})), "input");
        assert_eq!(param(json!({})), "input");
        assert_eq!(param(json!({"input": ["a", ""]})), "input[1]");
        assert_eq!(param(json!({"input": ["a", 1]})), "input[1]");
        assert_eq!(param(json!({"input": [[1], [-1]]})), "input[1][0]");
        assert_eq!(param(json!({"input": [[1], []]})), "input[1]");
        assert_eq!(param(json!({"input": [1.5]})), "input[0]");
        assert_eq!(param(json!({"input": {"a": 1}})), "input");
        assert_eq!(param(json!({"input": vec!["x"; MAX_INPUTS + 1]})), "input");
        assert_eq!(
            param(json!({"input": "a", "encoding_format": "hex"})),
            "encoding_format"
        );
        assert_eq!(param(json!({"input": "a", "dimensions": 0})), "dimensions");
        assert_eq!(param(json!({"input": "a", "dimensions": "8"})), "dimensions");
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        // 1.0f32 = 00 00 80 3f; -2.0f32 = 00 00 00 c0.
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[1.0, -2.0]), "AACAPwAAAMA=");
        assert_eq!(base64_f32(&[1.0, -2.0, 0.0]), "AACAPwAAAMAAAAAA");
    }

    #[test]
    fn truncation_renormalises() {
        let v = truncate_normalized(&[3.0, 4.0, 12.0], 2);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        assert_eq!(truncate_normalized(&[0.0, 0.0], 1), vec![0.0]);
    }
}
