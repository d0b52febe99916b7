//! Proptest strategies for JSON values, shared by the unit tests of the JSON readers.
use proptest::prelude::*;
use serde_json::Value;

/// A JSON scalar, each kind equally likely: null, a boolean, an integer, a finite float, or a
/// string drawn from the regex `strings`.
pub(crate) fn scalar(strings: &'static str) -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        strings.prop_map(Value::String),
    ]
}
