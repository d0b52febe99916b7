//! Python binding for structured output: `Vocabulary`, `Grammar` and `GrammarMatcher` wrap
//! `smgpy-structured` and only convert arguments and results. Compiling and computing masks
//! release the GIL.
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use smgpy_structured::{Grammar, GrammarMatcher, Source, Vocabulary};

use crate::errors::structured as error;

/// A model's vocabulary as bytes, ready for masks. Built once per model.
///
/// `Vocabulary(tokens, special_ids, end_ids, size)`: `tokens[id]` is the bytes token `id` adds
/// to the decoded text (`None` for tokens that never belong in constrained output);
/// `special_ids` are kept out of text, except tool-call and reasoning markers (a Lark grammar
/// names the others as `<|name|>`); `end_ids` end the output once the constraint is complete;
/// `size` is the number of logits (the output layer may be padded past the tokenizer).
#[pyclass(name = "Vocabulary", module = "smgpy._native", frozen)]
pub struct PyVocabulary {
    pub(crate) inner: Arc<Vocabulary>,
}

#[pymethods]
impl PyVocabulary {
    #[new]
    fn new(
        py: Python<'_>,
        tokens: Vec<Option<Vec<u8>>>,
        special_ids: Vec<u32>,
        end_ids: Vec<u32>,
        size: usize,
    ) -> PyResult<Self> {
        let inner = py
            .detach(|| Vocabulary::new(tokens, &special_ids, end_ids, size))
            .map_err(error)?;
        Ok(Self { inner: Arc::new(inner) })
    }

    /// Compile the constraint an engine received under `key` (`json_schema`, `regex`, `ebnf`
    /// or `structural_tag`, SGLang's names), or take it from this vocabulary's cache.
    /// `GrammarError` when it cannot be enforced.
    fn compile(&self, py: Python<'_>, key: &str, text: String) -> PyResult<PyGrammar> {
        let source = Source::from_key(key, text).ok_or_else(|| {
            crate::errors::grammar(format!(
                "unknown constraint key `{key}`; expected one of {}",
                Source::KEYS.join(", ")
            ))
        })?;
        let vocab = self.inner.clone();
        let inner = py.detach(move || vocab.compile(&source)).map_err(error)?;
        Ok(PyGrammar { inner })
    }

    /// Number of logits a mask covers.
    fn __len__(&self) -> usize {
        self.inner.size()
    }
}

/// A compiled constraint; `matcher()` starts one sequence.
#[pyclass(name = "Grammar", module = "smgpy._native", frozen)]
pub struct PyGrammar {
    inner: Grammar,
}

impl From<Grammar> for PyGrammar {
    fn from(inner: Grammar) -> Self {
        Self { inner }
    }
}

#[pymethods]
impl PyGrammar {
    /// A matcher at the start of the output.
    fn matcher(&self) -> PyGrammarMatcher {
        let inner = self.inner.matcher();
        PyGrammarMatcher {
            mask: vec![0; inner.size()],
            bits: Vec::with_capacity(inner.size().div_ceil(32) * 4),
            inner,
        }
    }
}

/// One sequence's constrained state.
#[pyclass(name = "GrammarMatcher", module = "smgpy._native")]
struct PyGrammarMatcher {
    inner: GrammarMatcher,
    mask: Vec<u8>,
    bits: Vec<u8>,
}

#[pymethods]
impl PyGrammarMatcher {
    /// Accept `token` (the one sampled at the step before; `None` at the first step), then
    /// return the mask of the next step as a bitmask: little-endian 32-bit words, bit `i % 32`
    /// of word `i // 32` set where token `i` may come next (the layout of xgrammar's and
    /// llguidance's bitmasks). `None` when no token may come next (the output is complete and
    /// has no end token). The GIL is released meanwhile. `GrammarError` when `token` was not
    /// allowed.
    #[pyo3(signature = (token))]
    fn step<'py>(&mut self, py: Python<'py>, token: Option<u32>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let (inner, bits) = (&mut self.inner, &mut self.bits);
        let any = py
            .detach(|| {
                if let Some(t) = token {
                    inner.accept(t)?;
                }
                let words = inner.mask_words()?;
                bits.clear();
                for w in words {
                    bits.extend_from_slice(&w.to_le_bytes());
                }
                Ok(words.iter().any(|&w| w != 0))
            })
            .map_err(error)?;
        Ok(any.then(|| PyBytes::new(py, &self.bits)))
    }

    /// An independent copy of this state: speculative decoding walks a copy through drafted
    /// tokens to mask each drafted position, and the original takes only the tokens kept.
    fn copy(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            mask: vec![0; self.inner.size()],
            bits: Vec::with_capacity(self.bits.capacity()),
        }
    }

    /// Advance past a sampled token; `GrammarError` when it was not allowed.
    fn accept(&mut self, token: u32) -> PyResult<()> {
        self.inner.accept(token).map_err(error)
    }

    /// The tokens allowed next, one byte per logit (GIL released).
    fn mask<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let (inner, mask) = (&mut self.inner, &mut self.mask);
        py.detach(|| inner.mask_into(mask)).map_err(error)?;
        Ok(PyBytes::new(py, &self.mask))
    }

    /// Whether the output may end here.
    #[getter]
    fn is_accepting(&mut self) -> bool {
        self.inner.is_accepting()
    }

    /// Whether the constraint is complete and only an end token may follow.
    #[getter]
    fn is_stopped(&self) -> bool {
        self.inner.is_stopped()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyVocabulary>()?;
    m.add_class::<PyGrammar>()?;
    m.add_class::<PyGrammarMatcher>()?;
    Ok(())
}
