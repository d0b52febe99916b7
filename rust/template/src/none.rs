//! A `None` that, like Python's, cannot be iterated.
//!
//! transformers passes `tools=None` when no tools are given. In jinja2 `{% for t in tools %}` then raises
//! `TypeError: 'NoneType' object is not iterable`, and `tools is iterable` is false; minijinja's own none
//! iterates as empty. Top-level `tools` and `documents` are passed as this object instead, and the
//! `none` test, the formatter and `tojson` treat it as `None`.

use minijinja::value::{Object, ObjectRepr, Value};
use std::sync::Arc;

/// Python's `None` for top-level template variables.
#[derive(Debug)]
pub struct PyNone;

impl Object for PyNone {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn is_true(self: &Arc<Self>) -> bool {
        false
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result
    where
        Self: Sized + 'static,
    {
        f.write_str("None")
    }
}

/// The non-iterable `None` value.
pub fn py_none() -> Value {
    Value::from_object(PyNone)
}

/// Is `v` None, either kind?
pub fn is_py_none(v: &Value) -> bool {
    v.is_none() || v.downcast_object_ref::<PyNone>().is_some()
}
