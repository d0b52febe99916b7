//! What a parser knows of the request: the declared tools, which reject calls to unknown names
//! and type XML-style parameters by their schema.
use super::ToolDef;

/// Declared tools, used to reject unknown names and to type XML-style parameters.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ctx {
    tools: Option<Vec<ToolDef>>,
}

impl Ctx {
    pub(crate) fn new(tools: Option<Vec<ToolDef>>) -> Self {
        Self { tools }
    }

    pub(crate) fn declared(&self, name: &str) -> bool {
        self.tools.as_ref().is_none_or(|ts| ts.iter().any(|t| t.name == name))
    }

    /// The name of the only declared tool, if exactly one is declared.
    pub(crate) fn sole_tool(&self) -> Option<&str> {
        match self.tools.as_deref() {
            Some([only]) => Some(&only.name),
            _ => None,
        }
    }

    /// The JSON-schema type of parameter `key` of tool `tool`, if declared: its `type` (the first
    /// that is not `null` of a list), else the first non-null type among `anyOf` / `oneOf`.
    pub(crate) fn param_type(&self, tool: &str, key: &str) -> Option<&str> {
        let def = self.tools.as_ref()?.iter().find(|t| t.name == tool)?;
        schema_type(def.parameters.as_ref()?.get("properties")?.get(key)?)
    }
}

/// The type a JSON-schema node gives its value (see `Ctx::param_type`).
fn schema_type(node: &serde_json::Value) -> Option<&str> {
    use serde_json::Value;
    match node.get("type") {
        Some(Value::String(s)) => return Some(s),
        Some(Value::Array(types)) => return types.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => {}
    }
    ["anyOf", "oneOf"]
        .iter()
        .filter_map(|k| node.get(k)?.as_array())
        .flatten()
        .filter_map(schema_type)
        .find(|t| *t != "null")
}
