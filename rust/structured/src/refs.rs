//! Local `$ref`s of a JSON Schema that is placed inside another schema.
//!
//! A local reference (`#`, `#/$defs/Stop`, ...) is a JSON pointer from the root of the
//! document it is written in. Tool parameters are written as documents of their own (pydantic
//! and the agent SDKs put nested models in `$defs` and refer to them as `#/$defs/Name` from the
//! parameters' root), but the forced-call schemas embed them: under
//! `items.anyOf[i].properties.parameters` of the JSON form, under `properties.arguments` of a
//! call object in a model's own format. The embedded root is no longer the document's root, so
//! its references would point at nothing (llguidance refuses the schema) or, worse, at a
//! same-named part of another tool. [`relocate_refs`] prefixes them with the embedding location.
//! (Qwen3-Coder XML writes each parameter's JSON alone: there the whole parameters schema is
//! kept under the parameter's `$defs`, and references point into it.)
use serde_json::Value;

/// Keywords whose values are data, not schemas: a `"$ref"` inside them is a value to match.
const DATA_KEYWORDS: [&str; 4] = ["const", "enum", "default", "examples"];

/// Keywords whose values map names (of properties, of definitions, ...) to schemas: their keys
/// are names, so a property called `const` or `$ref` is a schema like any other.
const NAMED_SCHEMAS: [&str; 6] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];

/// One JSON-pointer reference token (RFC 6901): `~` as `~0`, `/` as `~1`.
pub fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Rewrite every local `$ref` of `schema` (one equal to `#` or starting with `#/`) for
/// `schema` placed at the path `at` (unescaped tokens, outermost first) of another document:
/// `#/$defs/Stop` placed at `["items", "anyOf", "0", "properties", "parameters"]` becomes
/// `#/items/anyOf/0/properties/parameters/$defs/Stop`. Other references (`#anchor`, URLs)
/// are left alone, as are values under `const`, `enum`, `default` and `examples`.
///
/// Every `#/` reference is taken from the embedded root: llguidance, as built here (without
/// its `referencing` feature), resolves them from the document's root and ignores `$id`. It
/// does not undo `~0` / `~1` or percent-encoding in a reference either, which none of the
/// locations smgpy embeds schemas at needs (their tokens are keywords, indices and
/// `smgpy_parameters`).
pub fn relocate_refs(schema: &mut Value, at: &[&str]) {
    if at.is_empty() {
        return;
    }
    let prefix: String = at.iter().map(|t| format!("/{}", pointer_token(t))).collect();
    rewrite(schema, &prefix);
}

/// `node` is a schema (or a list of schemas, or a keyword's value that holds schemas).
fn rewrite(node: &mut Value, prefix: &str) {
    match node {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(r) if key == "$ref" => {
                        // llguidance reads `#/` as the root, as `#`.
                        if r == "#" || r == "#/" {
                            *r = format!("#{prefix}");
                        } else if let Some(rest) = r.strip_prefix("#/") {
                            *r = format!("#{prefix}/{rest}");
                        }
                    }
                    _ if DATA_KEYWORDS.contains(&key.as_str()) => {}
                    Value::Object(named) if NAMED_SCHEMAS.contains(&key.as_str()) => {
                        named.values_mut().for_each(|s| rewrite(s, prefix));
                    }
                    other => rewrite(other, prefix),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rewrite(v, prefix)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn local_refs_are_prefixed_and_the_rest_kept() {
        let mut s = json!({
            "$defs": {"Stop": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Stop"}}}},
            "properties": {
                "stops": {"type": "array", "items": {"$ref": "#/$defs/Stop"}},
                "self": {"$ref": "#"},
                "root": {"$ref": "#/"},
                "anchored": {"$ref": "#stop"},
                "remote": {"$ref": "https://example.com/s.json#/$defs/X"},
                "$ref": {"type": "string"},
                "data": {"const": {"$ref": "#/x"}, "enum": [{"$ref": "#/y"}], "default": {"$ref": "#"}},
                "const": {"$ref": "#/$defs/Stop"},
            },
        });
        relocate_refs(&mut s, &["items", "anyOf", "0", "properties", "parameters"]);
        let p = "#/items/anyOf/0/properties/parameters";
        assert_eq!(s["properties"]["stops"]["items"]["$ref"], format!("{p}/$defs/Stop"));
        assert_eq!(
            s["$defs"]["Stop"]["properties"]["next"]["$ref"],
            format!("{p}/$defs/Stop")
        );
        assert_eq!(s["properties"]["self"]["$ref"], p);
        assert_eq!(s["properties"]["root"]["$ref"], p);
        assert_eq!(s["properties"]["const"]["$ref"], format!("{p}/$defs/Stop"));
        assert_eq!(s["properties"]["anchored"]["$ref"], "#stop");
        assert_eq!(s["properties"]["remote"]["$ref"], "https://example.com/s.json#/$defs/X");
        assert_eq!(s["properties"]["$ref"], json!({"type": "string"}));
        assert_eq!(
            s["properties"]["data"],
            json!({"const": {"$ref": "#/x"}, "enum": [{"$ref": "#/y"}], "default": {"$ref": "#"}})
        );
    }

    #[test]
    fn tokens_are_escaped() {
        assert_eq!(pointer_token("a/b~c"), "a~1b~0c");
        let mut s = json!({"$ref": "#/$defs/X"});
        relocate_refs(&mut s, &["properties", "a/b~c"]);
        assert_eq!(s["$ref"], "#/properties/a~1b~0c/$defs/X");
        let mut s = json!({"$ref": "#/$defs/X"});
        relocate_refs(&mut s, &[]);
        assert_eq!(s["$ref"], "#/$defs/X");
    }
}
