//! Python tuples, for the pairs `dict.items()` and `|items` produce.
//!
//! jinja2 hands templates real Python tuples there, and `{{ pair }}` prints `('a', 1)`, not the
//! `['a', 1]` a list prints. minijinja has no tuple type, so a pair is this small object: it
//! behaves as a sequence everywhere (indexing, unpacking in `for k, v in ...`, `|length`, `tojson`
//! writes a JSON array as `json.dumps` does for a tuple) and only [`crate::pyrepr`] tells it apart.
//! Tuple literals in template source (`(1, 2)`) are still lists: minijinja's parser does not keep
//! the difference.

use minijinja::value::{Enumerator, Object, ObjectRepr, Value};
use std::sync::Arc;

/// A Python tuple of template values.
#[derive(Debug)]
pub struct Tuple(pub Vec<Value>);

impl Object for Tuple {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let index = usize::try_from(key.clone()).ok()?;
        self.0.get(index).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.0.len())
    }
}

/// The pair `(key, value)` as a tuple value.
pub fn pair(key: Value, value: Value) -> Value {
    Value::from_object(Tuple(vec![key, value]))
}
