//! Python binding for structured output: `JsonVocab` / `JsonMatcher` wrap `smgpy-structured`
//! and only convert arguments and results.
use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use smgpy_structured::{JsonMatcher, JsonOptions, Schema, Vocab};

/// A tokenizer's vocabulary as bytes, ready for JSON masks. Built once per model.
///
/// `JsonVocab(tokens, end_ids)`: `tokens[id]` is the bytes token `id` stands for in text, or
/// `None` for tokens that never belong in a JSON document (special tokens); `end_ids` end the
/// output and are allowed once the document is complete.
#[pyclass(name = "JsonVocab", module = "smgpy._native", frozen)]
struct PyJsonVocab {
    inner: Arc<Vocab>,
}

#[pymethods]
impl PyJsonVocab {
    #[new]
    fn new(py: Python<'_>, tokens: Vec<Option<Vec<u8>>>, end_ids: Vec<u32>) -> Self {
        let inner = py.detach(|| Arc::new(Vocab::new(tokens, end_ids)));
        Self { inner }
    }

    /// A matcher for one sequence. `object_only`: the document must be an object
    /// (`json_object`); `max_whitespace`: the longest run of whitespace between JSON tokens;
    /// `schema`: a JSON Schema (as JSON text) the document must be valid against. `ValueError`
    /// when the schema uses what cannot be enforced (the message names it).
    #[pyo3(signature = (object_only = true, max_whitespace = 64, schema = None))]
    fn matcher(&self, object_only: bool, max_whitespace: u8, schema: Option<&str>) -> PyResult<PyJsonMatcher> {
        let inner = match schema {
            Some(text) => {
                let value: serde_json::Value = serde_json::from_str(text)
                    .map_err(|e| PyValueError::new_err(format!("the schema is not valid JSON: {e}")))?;
                let compiled = Schema::compile(&value).map_err(|e| PyValueError::new_err(e.to_string()))?;
                JsonMatcher::with_schema(self.inner.clone(), Arc::new(compiled), max_whitespace)
            }
            None => JsonMatcher::new(
                self.inner.clone(),
                JsonOptions {
                    object_only,
                    max_whitespace,
                },
            ),
        };
        Ok(PyJsonMatcher {
            inner,
            mask: Vec::new(),
        })
    }

    /// Number of token ids.
    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// Keeps one sequence's output a JSON document: `accept` each sampled token, `mask` gives the
/// tokens allowed next.
#[pyclass(name = "JsonMatcher", module = "smgpy._native")]
struct PyJsonMatcher {
    inner: JsonMatcher,
    mask: Vec<u8>,
}

#[pymethods]
impl PyJsonMatcher {
    /// Advance past a sampled token; `ValueError` (state unchanged) when the token cannot
    /// continue the document.
    fn accept(&mut self, token: u32) -> PyResult<()> {
        self.inner
            .accept(token)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// `size` bytes, one per logit: 1 where the token may come next, else 0.
    fn mask<'py>(&mut self, py: Python<'py>, size: usize) -> Bound<'py, PyBytes> {
        self.mask.resize(size, 0);
        let (inner, mask) = (&self.inner, &mut self.mask);
        py.detach(|| inner.mask_into(mask));
        PyBytes::new(py, &self.mask)
    }

    /// Whether the output so far is a complete document.
    #[getter]
    fn is_complete(&self) -> bool {
        self.inner.is_complete()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyJsonVocab>()?;
    m.add_class::<PyJsonMatcher>()?;
    Ok(())
}
