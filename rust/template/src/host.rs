//! Render input built directly from a host language's objects (Python dicts and lists), with no
//! JSON in between.
//!
//! Converting Python objects to `serde_json` values and those to template values copied every
//! string twice and cost as much as rendering a short template. [`HostValue`] wraps a template
//! value so that the binding crate can build one per Python object while minijinja stays private
//! to this crate. Python semantics are kept: integers of any size stay exact, floats stay floats,
//! dicts keep their key order.
use crate::dict::pair_dict;
use crate::none::py_none;
/// One template value, built from a host object.
#[derive(Debug, Clone)]
pub struct HostValue(pub(crate) minijinja::Value);

impl HostValue {
    pub fn none() -> Self {
        Self(minijinja::Value::from(()))
    }

    pub fn bool(b: bool) -> Self {
        Self(minijinja::Value::from(b))
    }

    pub fn int(i: i64) -> Self {
        Self(minijinja::Value::from(i))
    }

    /// An integer beyond 64 bits.
    pub fn big_int(i: i128) -> Self {
        Self(minijinja::Value::from(i))
    }

    pub fn float(f: f64) -> Self {
        Self(minijinja::Value::from(f))
    }

    pub fn string(s: &str) -> Self {
        Self(minijinja::Value::from(s))
    }

    pub fn list(items: Vec<HostValue>) -> Self {
        Self(minijinja::Value::from(
            items.into_iter().map(|v| v.0).collect::<Vec<_>>(),
        ))
    }

    /// A dict, keys in order.
    pub fn dict(pairs: Vec<(HostValue, HostValue)>) -> Self {
        Self(pair_dict(pairs.into_iter().map(|(k, v)| (k.0, v.0)).collect()))
    }

    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }

    /// The string, when this value is one.
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_str()
    }
}

/// Everything a render takes besides the template, as host values.
#[derive(Debug, Clone, Default)]
pub struct HostRenderArgs {
    /// Each message as its `(key, value)` pairs in order; None-valued keys are dropped and
    /// reasoning fields aliased when rendering, as transformers does.
    /// Keys are strings ([`HostValue::string`]).
    pub messages: Vec<Vec<(HostValue, HostValue)>>,
    pub tools: Option<Vec<HostValue>>,
    pub documents: Option<Vec<HostValue>>,
    pub add_generation_prompt: bool,
    /// Extra template variables (`chat_template_kwargs`).
    pub kwargs: Vec<(String, HostValue)>,
}

/// Top-level `tools` / `documents`: a list, or Python's `None`.
pub(crate) fn host_list(items: &Option<Vec<HostValue>>) -> minijinja::Value {
    match items {
        Some(items) => minijinja::Value::from(items.iter().map(|v| v.0.clone()).collect::<Vec<_>>()),
        None => py_none(),
    }
}
