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

/// Everything a render takes, with messages, tools and documents in one [`crate::Doc`].
#[derive(Debug)]
pub struct DocRenderArgs {
    pub doc: crate::Doc,
    /// The messages list. Each message must already be as transformers passes it: no None-valued
    /// keys, and no reasoning field (`reasoning_content`, `thinking`, `reasoning`) to alias; use
    /// [`HostRenderArgs`] for those.
    pub messages: crate::Slot,
    pub tools: Option<crate::Slot>,
    pub documents: Option<crate::Slot>,
    pub add_generation_prompt: bool,
    /// Extra template variables (`chat_template_kwargs`).
    pub kwargs: Vec<(String, HostValue)>,
}

impl DocRenderArgs {
    /// The document form of JSON render arguments, or `None` when a message is not an object or has a
    /// reasoning field (those go through the value path, which aliases them) or `continue_final_message`
    /// is set. Messages lose their None-valued keys, as transformers drops them.
    pub fn from_json(args: &crate::RenderArgs) -> Option<Self> {
        if args.continue_final_message {
            return None;
        }
        let mut doc = crate::Doc::with_capacity(16 * args.messages.len() + 64, 4096);
        let root = doc.reserve(1).ok()?;
        let first = doc.set_list(root, args.messages.len()).ok()?;
        for (k, message) in args.messages.iter().enumerate() {
            let map = message.as_object()?;
            let reasoning = |(k, v): (&String, &serde_json::Value)| {
                crate::chat_template::REASONING_FIELDS.contains(&k.as_str()) && !v.is_null()
            };
            if map.iter().any(reasoning) {
                return None;
            }
            let kept = map.values().filter(|v| !v.is_null()).count();
            let pairs = doc.set_dict(first + k, kept).ok()?;
            for (j, (key, value)) in map.iter().filter(|(_, v)| !v.is_null()).enumerate() {
                doc.set_str(pairs + 2 * j, key).ok()?;
                doc.set_json(pairs + 2 * j + 1, value).ok()?;
            }
        }
        let mut list = |items: &Option<Vec<serde_json::Value>>| -> Option<Option<crate::Slot>> {
            match items {
                None => Some(None),
                Some(items) => {
                    let slot = doc.reserve(1).ok()?;
                    let first = doc.set_list(slot, items.len()).ok()?;
                    for (k, item) in items.iter().enumerate() {
                        doc.set_json(first + k, item).ok()?;
                    }
                    Some(Some(slot))
                }
            }
        };
        let tools = list(&args.tools)?;
        let documents = list(&args.documents)?;
        Some(Self {
            doc,
            messages: root,
            tools,
            documents,
            add_generation_prompt: args.add_generation_prompt,
            kwargs: args
                .kwargs
                .iter()
                .map(|(k, v)| (k.clone(), HostValue(crate::value::to_jinja(v))))
                .collect(),
        })
    }
}

/// Top-level `tools` / `documents`: a list, or Python's `None`.
pub(crate) fn host_list(items: Option<Vec<HostValue>>) -> minijinja::Value {
    match items {
        Some(items) => minijinja::Value::from(items.into_iter().map(|v| v.0).collect::<Vec<_>>()),
        None => py_none(),
    }
}
