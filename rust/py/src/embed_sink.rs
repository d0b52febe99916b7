//! [`EmbedSink`]: where the pump (`smgpy.server`) puts an engine's answer to one embedding
//! request. The vectors arrive as one buffer of little-endian f32 (`rows * dim` numbers), which the
//! pump makes from a NumPy array or a list without a Python float object per number.
use std::sync::Mutex;

use pyo3::prelude::*;
use smgpy_server::engine::{Embeddings, EngineError};
use tokio::sync::oneshot;

use crate::engine_bridge::FailKind;

type Reply = oneshot::Sender<Result<Embeddings, EngineError>>;

/// The answer slot of one embedding request; the first `done` or `fail` answers, later calls
/// do nothing (the client may also have gone, which is no error here).
#[pyclass(module = "smgpy._native", name = "EmbedSink", frozen)]
pub struct EmbedSink {
    reply: Mutex<Option<Reply>>,
}

impl EmbedSink {
    pub(crate) fn new(reply: Reply) -> Self {
        Self {
            reply: Mutex::new(Some(reply)),
        }
    }

    fn answer(&self, result: Result<Embeddings, EngineError>) {
        if let Some(tx) = self.reply.lock().ok().and_then(|mut r| r.take()) {
            let _ = tx.send(result);
        }
    }
}

#[pymethods]
impl EmbedSink {
    /// The vectors: `data` holds `rows * dim` little-endian f32 values, row after row;
    /// `prompt_tokens` is the engine's own count of the tokens it read, if it keeps one.
    #[pyo3(signature = (data, rows, dim, prompt_tokens = None))]
    fn done(&self, data: &[u8], rows: usize, dim: usize, prompt_tokens: Option<u64>) -> PyResult<()> {
        if dim == 0 || data.len() != rows.saturating_mul(dim).saturating_mul(4) {
            let e = format!(
                "embedding data holds {} bytes, not rows * dim * 4 = {rows} * {dim} * 4",
                data.len()
            );
            self.answer(Err(EngineError::Internal(
                "the engine's vectors had the wrong size (the server log has the details)".into(),
            )));
            return Err(crate::errors::invalid(e));
        }
        let values = data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        self.answer(Ok(Embeddings {
            dim,
            data: values,
            prompt_tokens,
        }));
        Ok(())
    }

    /// The request failed: `kind` picks the answer (400, 429 or 500), `message` is shown.
    fn fail(&self, kind: PyRef<'_, FailKind>, message: String) {
        self.answer(Err(kind.error(message)));
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<EmbedSink>()
}
