//! Python object <-> `serde_json::Value`, walked directly (no JSON text crosses the boundary),
//! and Python object -> chat-template value (`HostValue`) for rendering without JSON at all.
//! Dict key order is kept (`serde_json` is built with `preserve_order`).

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};
use smgpy_template::{Doc, HostValue, Slot};

/// Convert a Python value made of dict/list/tuple/str/int/float/bool/None into a JSON value.
pub fn py_to_value(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(Value::Number(v.into()));
        }
        if let Ok(v) = obj.extract::<u64>() {
            return Ok(Value::Number(v.into()));
        }
        // Larger than 64 bits: keep it as a float approximation (JSON has no big integers).
        let f: f64 = obj.extract()?;
        return Ok(Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(Number::from_f64(f.value()).map(Value::Number).unwrap_or(Value::Null));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = match k.cast::<PyString>() {
                Ok(s) => s.to_str()?.to_owned(),
                Err(_) => k.str()?.to_str()?.to_owned(),
            };
            map.insert(key, py_to_value(&v)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return seq_to_value(l.iter());
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return seq_to_value(t.iter());
    }
    unsupported(obj, "convert", "to JSON")
}

/// The error for an object of a type no conversion takes: "cannot {verb} a Python {type} {to}".
fn unsupported<T>(obj: &Bound<'_, PyAny>, verb: &str, to: &str) -> PyResult<T> {
    Err(crate::errors::wrong_type(format!(
        "cannot {verb} a Python {} {to}: use dict, list, str, int, float, bool or None",
        obj.get_type().name()?
    )))
}

/// A list's or tuple's items as a JSON array.
fn seq_to_value<'py>(items: impl Iterator<Item = Bound<'py, PyAny>>) -> PyResult<Value> {
    items
        .map(|v| py_to_value(&v))
        .collect::<PyResult<_>>()
        .map(Value::Array)
}

/// Convert a Python object straight into a template value (no JSON in between). Integers of any
/// size up to 128 bits stay exact, as Python's `json.dumps` would print them.
pub fn py_to_host(obj: &Bound<'_, PyAny>) -> PyResult<HostValue> {
    // Exact built-in types first: each test is one pointer comparison, while the subclass-aware casts
    // below call into the interpreter (under the stable ABI) for every object of a long conversation.
    if obj.is_exact_instance_of::<PyString>() {
        if let Ok(s) = obj.cast_exact::<PyString>() {
            return Ok(HostValue::string(s.to_str()?));
        }
    }
    if obj.is_exact_instance_of::<PyDict>() {
        if let Ok(d) = obj.cast_exact::<PyDict>() {
            return Ok(HostValue::dict(dict_pairs(d)?));
        }
    }
    if obj.is_none() {
        return Ok(HostValue::none());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(HostValue::string(s.to_str()?));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return Ok(HostValue::dict(dict_pairs(d)?));
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return seq_to_host(l.iter());
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(HostValue::bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(v) = obj.extract::<i64>() {
            return Ok(HostValue::int(v));
        }
        if let Ok(v) = obj.extract::<i128>() {
            return Ok(HostValue::big_int(v));
        }
        return Ok(HostValue::float(obj.extract()?));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Ok(HostValue::float(f.value()));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return seq_to_host(t.iter());
    }
    unsupported(obj, "pass", "to a chat template")
}

/// A list's or tuple's items as a template list.
fn seq_to_host<'py>(items: impl Iterator<Item = Bound<'py, PyAny>>) -> PyResult<HostValue> {
    items
        .map(|v| py_to_host(&v))
        .collect::<PyResult<_>>()
        .map(HostValue::list)
}

/// Write a Python object into a template document at `slot` (same rules as [`py_to_host`]).
pub fn py_into_doc(obj: &Bound<'_, PyAny>, doc: &mut Doc, slot: Slot) -> PyResult<()> {
    if obj.is_exact_instance_of::<PyString>() {
        if let Ok(s) = obj.cast_exact::<PyString>() {
            return doc.set_str(slot, s.to_str()?).map_err(crate::errors::too_large);
        }
    }
    if obj.is_exact_instance_of::<PyDict>() {
        if let Ok(d) = obj.cast_exact::<PyDict>() {
            return dict_into_doc(d, doc, slot);
        }
    }
    if obj.is_none() {
        doc.set_none(slot);
        return Ok(());
    }
    if let Ok(l) = obj.cast::<PyList>() {
        return items_into_doc(l.len(), l.iter(), doc, slot);
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return doc.set_str(slot, s.to_str()?).map_err(crate::errors::too_large);
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        return dict_into_doc(d, doc, slot);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        doc.set_bool(slot, b.is_true());
        return Ok(());
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(v) = obj.extract::<i64>() {
            doc.set_int(slot, v);
            return Ok(());
        }
        if let Ok(v) = obj.extract::<i128>() {
            return doc.set_big_int(slot, v).map_err(crate::errors::too_large);
        }
        doc.set_float(slot, obj.extract()?);
        return Ok(());
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        doc.set_float(slot, f.value());
        return Ok(());
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return items_into_doc(t.len(), t.iter(), doc, slot);
    }
    unsupported(obj, "pass", "to a chat template")
}

/// A list's or tuple's `len` items into a document (a list that grows while it is read writes no
/// more than the slots reserved for it).
fn items_into_doc<'py>(
    len: usize,
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    doc: &mut Doc,
    slot: Slot,
) -> PyResult<()> {
    let first = doc.set_list(slot, len).map_err(crate::errors::too_large)?;
    for (k, item) in items.enumerate().take(len) {
        py_into_doc(&item, doc, first + k)?;
    }
    Ok(())
}

/// A dict into a document, keys as strings (`str(key)` for other keys).
pub fn dict_into_doc(d: &Bound<'_, PyDict>, doc: &mut Doc, slot: Slot) -> PyResult<()> {
    let len = d.len();
    let first = doc.set_dict(slot, len).map_err(crate::errors::too_large)?;
    let mut k = 0;
    for (key, value) in d.iter() {
        if k == len {
            return Err(crate::errors::misuse("a dict changed size while it was read"));
        }
        match key.cast_exact::<PyString>() {
            Ok(s) => doc.set_str(first + 2 * k, s.to_str()?),
            Err(_) => match key.cast::<PyString>() {
                Ok(s) => doc.set_str(first + 2 * k, s.to_str()?),
                Err(_) => doc.set_str(first + 2 * k, key.str()?.to_str()?),
            },
        }
        .map_err(crate::errors::too_large)?;
        py_into_doc(&value, doc, first + 2 * k + 1)?;
        k += 1;
    }
    doc.truncate(slot, k);
    Ok(())
}

/// A dict's items as template values, keys as strings (`str(key)` for non-string keys), in
/// order. Keys go straight from the Python string to the template value (short ones are stored
/// inline, no allocation).
pub fn dict_pairs(d: &Bound<'_, PyDict>) -> PyResult<Vec<(HostValue, HostValue)>> {
    let mut pairs = Vec::with_capacity(d.len());
    for (k, v) in d.iter() {
        let key = match k.cast_exact::<PyString>() {
            Ok(s) => HostValue::string(s.to_str()?),
            Err(_) => match k.cast::<PyString>() {
                Ok(s) => HostValue::string(s.to_str()?),
                Err(_) => HostValue::string(k.str()?.to_str()?),
            },
        };
        pairs.push((key, py_to_host(&v)?));
    }
    Ok(pairs)
}

/// A dict's items with their keys as Rust strings (`str(key)` for non-string keys).
pub fn str_key_pairs(d: &Bound<'_, PyDict>) -> PyResult<Vec<(String, HostValue)>> {
    let mut pairs = Vec::with_capacity(d.len());
    for (k, v) in d.iter() {
        let key = match k.cast::<PyString>() {
            Ok(s) => s.to_str()?.to_owned(),
            Err(_) => k.str()?.to_str()?.to_owned(),
        };
        pairs.push((key, py_to_host(&v)?));
    }
    Ok(pairs)
}

/// Convert a JSON value into Python objects.
pub fn value_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            let list = PyList::empty(py);
            for x in a {
                list.append(value_to_py(py, x)?)?;
            }
            list.into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, value_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}
