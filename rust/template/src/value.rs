//! `serde_json::Value` -> minijinja `Value`, keeping what Python would see.
//!
//! Integers stay integers (`12345678901234`), floats stay floats (`-0.0`, `1e-07`) and objects keep
//! their key order, so `tojson` writes them back exactly as Python's `json.dumps` would.

use minijinja::value::Value;
use serde_json::Value as Json;

/// Convert one JSON value.
pub fn to_jinja(v: &Json) -> Value {
    match v {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else if let Some(f) = n.as_f64() {
                Value::from(f)
            } else {
                // Only reachable with serde_json's `arbitrary_precision`: keep the digits exactly.
                n.to_string()
                    .parse::<i128>()
                    .map(Value::from)
                    .unwrap_or_else(|_| Value::from(n.to_string()))
            }
        }
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(a) => Value::from(a.iter().map(to_jinja).collect::<Vec<_>>()),
        Json::Object(o) => {
            crate::dict::pair_dict(o.iter().map(|(k, v)| (Value::from(k.as_str()), to_jinja(v))).collect())
        }
    }
}
