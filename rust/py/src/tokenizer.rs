//! Python binding for `smgpy-tokenizer`: `Tokenizer` (a model's tokenizer.json in Rust) and
//! `Decoder` (incremental detokenization of one sequence). Conversion only; long encodes release
//! the GIL.
use std::sync::Arc;

use pyo3::prelude::*;

/// Inputs longer than this are encoded with the GIL released.
const DETACH_BYTES: usize = 4096;

fn error(e: smgpy_tokenizer::TokenizerError) -> PyErr {
    crate::errors::invalid(e.to_string())
}

/// A model's tokenizer, loaded from its `tokenizer.json` (the same ids as the `tokenizers` and
/// `transformers` Python packages). The server uses it without the GIL when an engine exposes it
/// as its `tokenizer`.
#[pyclass(name = "Tokenizer", module = "smgpy._native", frozen)]
pub struct PyTokenizer {
    pub inner: smgpy_tokenizer::Tokenizer,
}

#[pymethods]
impl PyTokenizer {
    /// Load `path` (a `tokenizer.json`); `bos` is the BOS token's text, if any (see `encode_prompt`).
    #[staticmethod]
    #[pyo3(signature = (path, bos = None))]
    fn from_file(path: std::path::PathBuf, bos: Option<String>) -> PyResult<Self> {
        Ok(Self {
            inner: smgpy_tokenizer::Tokenizer::from_file(path, bos).map_err(error)?,
        })
    }

    /// Ids of `text`; `add_special_tokens` applies the tokenizer's post-processing.
    #[pyo3(signature = (text, add_special_tokens = false))]
    fn encode(&self, py: Python<'_>, text: &str, add_special_tokens: bool) -> PyResult<Vec<u32>> {
        if text.len() > DETACH_BYTES {
            let owned = text.to_string();
            py.detach(|| self.inner.encode(&owned, add_special_tokens))
                .map_err(error)
        } else {
            self.inner.encode(text, add_special_tokens).map_err(error)
        }
    }

    /// Ids of a prompt: special tokens are added unless it starts with the BOS token.
    fn encode_prompt(&self, py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
        let owned = text.to_string();
        py.detach(|| self.inner.encode_prompt(&owned)).map_err(error)
    }

    /// Text of `ids` (special tokens kept unless `skip_special_tokens`).
    #[pyo3(signature = (ids, skip_special_tokens = false))]
    fn decode(&self, ids: Vec<u32>, skip_special_tokens: bool) -> PyResult<String> {
        self.inner.decode(&ids, skip_special_tokens).map_err(error)
    }

    /// Number of ids, added tokens included.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    /// An incremental decoder for one sequence; ids in `drop` leave no text.
    #[pyo3(signature = (drop = Vec::new()))]
    fn decoder(&self, drop: Vec<u32>) -> PyDecoder {
        PyDecoder {
            inner: self.inner.decoder(Arc::from(drop)),
        }
    }
}

/// Generated ids to text deltas, never splitting a character (see `Tokenizer.decoder`).
#[pyclass(name = "Decoder", module = "smgpy._native")]
pub struct PyDecoder {
    inner: smgpy_tokenizer::Decoder,
}

#[pymethods]
impl PyDecoder {
    /// Add one id; the text it completes (empty while a character is still partial).
    fn push(&mut self, id: u32) -> PyResult<String> {
        self.inner.push(id).map_err(error)
    }

    /// Text still held back at the end (an incomplete character as U+FFFD).
    fn flush(&mut self) -> PyResult<String> {
        self.inner.flush().map_err(error)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTokenizer>()?;
    m.add_class::<PyDecoder>()?;
    Ok(())
}
