//! Python binding for this area (filled in by its owner).
use pyo3::prelude::*;

pub fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}

/// Build the server's template from `chat_template` (a source string, a path to a file, or a
/// `ChatTemplate`) and `special_tokens`. TEMPORARY until the template binding lands.
pub fn template_from_py(
    t: &Bound<'_, PyAny>,
    special_tokens: Option<&Bound<'_, pyo3::types::PyDict>>,
) -> PyResult<smgpy_template::ChatTemplate> {
    let src: String = t.extract()?;
    let src = match std::fs::read_to_string(&src) {
        Ok(s) if src.len() < 4096 && !src.contains('{') => s,
        _ => src,
    };
    let tokens = match special_tokens {
        Some(d) => match crate::convert::py_to_value(d.as_any())? {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        },
        None => serde_json::Map::new(),
    };
    smgpy_template::ChatTemplate::new(&src, tokens).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}
