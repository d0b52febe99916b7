//! Under a schema, the mask equals trying each token alone, and every document the masks let
//! through is valid against the schema (checked by a small validator written for these tests).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use serde_json::{json, Value};
use smgpy_structured::{JsonMatcher, Recognizer, Schema, Vocab};
use std::sync::Arc;

const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    " ",
    "\n",
    "\"name\"",
    "\"age\"",
    "\"tags\"",
    "\"a\"",
    "\"b\"",
    "\"Ann",
    "\"",
    "1",
    "0",
    "-",
    ".5",
    "e3",
    "true",
    "false",
    "null",
    "na",
    "me",
    "\"n",
    "ame\":",
    "cat",
    "\"kind\"",
    "\"pet\"",
    "\"note\"",
    "\"extra\"",
    "\"owner\"",
    "\"cat\"",
    "x",
    "\\n",
    "é",
    "{\"",
    "\": ",
    ", \"",
    "2",
    "\"parameters\"",
    "\"ab\"",
    "\"x\"",
    "\"y\"",
    "{\"name\": \"a",
    "b\"",
];

fn schemas() -> Vec<Value> {
    vec![
        json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                           "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 1, "maxItems": 2}},
            "required": ["name", "age"],
            "additionalProperties": false
        }),
        json!({
            "$defs": {"Pet": {"type": "object", "properties": {"kind": {"const": "cat"},
                      "owner": {"anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}]}}, "required": ["kind"]}},
            "type": "object",
            "properties": {"pet": {"$ref": "#/$defs/Pet"}, "note": {"type": ["string", "null"]}, "extra": {}},
            "required": ["pet", "note"]
        }),
        json!({"type": "array", "items": {"type": "number"}, "maxItems": 3}),
        json!({"enum": [1, 12, "a", null, {"a": 1}]}),
        // A list of tool calls, each tagged by its name (the tag not first in one of them).
        json!({"type": "array", "minItems": 1, "maxItems": 2, "items": {"oneOf": [
            {"type": "object", "properties": {"name": {"const": "a"}, "parameters": {"type": "object",
             "properties": {"x": {"type": "integer"}}, "required": ["x"]}}, "required": ["name", "parameters"]},
            {"type": "object", "properties": {"parameters": {"type": "object", "properties": {"y": {"type": "string"}}},
             "name": {"const": "ab"}}, "required": ["parameters", "name"]},
        ]}}),
    ]
}

/// `v` is valid against `s` (the keywords the schemas above use).
fn valid(v: &Value, s: &Value, root: &Value) -> bool {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let target = r.trim_start_matches("#/").split('/').fold(root, |n, p| &n[p]);
        return valid(v, target, root);
    }
    if let Some(c) = s.get("const") {
        return v == c;
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        return e.contains(v);
    }
    if let Some(alts) = s.get("anyOf").and_then(Value::as_array) {
        return alts.iter().any(|a| valid(v, a, root));
    }
    if let Some(alts) = s.get("oneOf").and_then(Value::as_array) {
        return alts.iter().filter(|a| valid(v, a, root)).count() == 1;
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return true,
    };
    types.iter().any(|t| match *t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "array" => v.as_array().is_some_and(|items| {
            let n = items.len() as u64;
            n >= s.get("minItems").and_then(Value::as_u64).unwrap_or(0)
                && n <= s.get("maxItems").and_then(Value::as_u64).unwrap_or(u64::MAX)
                && items.iter().all(|i| s.get("items").is_none_or(|is| valid(i, is, root)))
        }),
        "object" => v.as_object().is_some_and(|o| {
            let props = s.get("properties").and_then(Value::as_object);
            let required = s.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
            required.iter().all(|r| o.contains_key(r.as_str().unwrap()))
                && o.iter().all(|(k, x)| match props.and_then(|p| p.get(k)) {
                    Some(ps) => valid(x, ps, root),
                    None => s.get("additionalProperties") != Some(&Value::Bool(false)),
                })
        }),
        _ => false,
    })
}

fn vocab() -> impl Strategy<Value = Vec<Option<Vec<u8>>>> {
    proptest::collection::vec(
        proptest::collection::vec(proptest::sample::select(PIECES), 1..3).prop_map(|p| Some(p.concat().into_bytes())),
        8..60,
    )
    .prop_map(|mut v| {
        // Every piece alone too, and every letter, so a document can always go on (as in a real
        // vocabulary, which has a token for each byte).
        v.extend(PIECES.iter().map(|p| Some(p.as_bytes().to_vec())));
        v.extend((b'a'..=b'z').map(|c| Some(vec![c])));
        v
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn masks_lead_only_to_valid_documents(
        which in 0..5usize,
        tokens in vocab(),
        picks in proptest::collection::vec((any::<prop::sample::Index>(), 0..4u8), 1..150),
    ) {
        let schema_json = &schemas()[which];
        let schema = Arc::new(Schema::compile(schema_json).unwrap());
        let end = tokens.len() as u32;
        let mut all = tokens.clone();
        all.push(None);
        let vocab = Arc::new(Vocab::new(all, vec![end]));
        let mut m = JsonMatcher::with_schema(vocab.clone(), schema.clone(), 8);
        let mut state = schema.start(8);
        let mut out = Vec::new();
        let mut mask = vec![0u8; tokens.len() + 1];
        for pick in picks {
            m.mask_into(&mut mask);
            // The mask is each token tried alone.
            for (id, t) in tokens.iter().enumerate() {
                let alone = t.as_ref().is_some_and(|t| state.feed(&schema, t).is_some());
                prop_assert_eq!(mask[id] == 1, alone);
            }
            prop_assert_eq!(mask[end as usize] == 1, state.is_complete(&schema));
            let allowed: Vec<u32> = (0..mask.len() as u32).filter(|&i| mask[i as usize] == 1).collect();
            if allowed.is_empty() {
                break;
            }
            // Mostly steer towards an end (the end token, else a token without whitespace, the
            // shortest), so that nested schemas complete often; sometimes pick freely.
            let (pick, free) = pick;
            let steer: Vec<u32> = if free == 0 {
                allowed.clone()
            } else if mask[end as usize] == 1 {
                vec![end]
            } else {
                let solid: Vec<u32> = allowed
                    .iter()
                    .copied()
                    .filter(|&i| !vocab.bytes_of(i).unwrap().iter().any(u8::is_ascii_whitespace))
                    .collect();
                if solid.is_empty() { allowed.clone() } else { solid }
            };
            let t = steer[pick.index(steer.len())];
            m.accept(t).unwrap();
            if t == end {
                break;
            }
            let bytes = vocab.bytes_of(t).unwrap();
            state = state.feed(&schema, bytes).unwrap();
            out.extend_from_slice(bytes);
        }
        if m.is_complete() {
            match serde_json::from_slice::<Value>(&out) {
                Ok(v) => prop_assert!(valid(&v, schema_json, schema_json), "{} is not valid against schema {}", v, which),
                // Valid JSON that `serde_json` will not hold as an `f64` (`1e311`).
                Err(e) => prop_assert!(e.to_string().contains("number out of range"), "{e}: {:?}", String::from_utf8_lossy(&out)),
            }
        }
    }
}
