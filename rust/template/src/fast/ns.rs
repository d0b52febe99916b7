//! jinja2's `namespace()` for the fast renderer: attributes set with `{% set ns.x = ... %}` stay visible
//! after the loop or `if` that set them.
//!
//! Only the fast renderer creates and reads these; any other use of one (printing it, passing it to a
//! filter) makes the render fall back to minijinja, which has its own namespace type.

use minijinja::value::{Object, ObjectRepr, Value};
use std::sync::{Arc, Mutex};

#[derive(Debug)]
pub struct Namespace(Mutex<Vec<(String, Value)>>);

impl Namespace {
    /// A new namespace holding `pairs`.
    pub fn value(pairs: Vec<(String, Value)>) -> Value {
        Value::from_object(Namespace(Mutex::new(pairs)))
    }

    /// The attribute `key`, if set.
    pub fn get(&self, key: &str) -> Option<Value> {
        let pairs = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    pub fn set(&self, key: &str, value: Value) {
        let mut pairs = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match pairs.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => pairs.push((key.to_string(), value)),
        }
    }
}

impl Object for Namespace {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        self.get(key.as_str()?)
    }
}
