//! Python binding for stop-sequence matching: `smgpy._native.StopMatcher` wraps
//! `smgpy_stop::StopMatcher` and only converts arguments and results.
use pyo3::prelude::*;

use smgpy_stop::StopOutput;

/// `stops` may be one string or a list of strings, as in the OpenAI `stop` parameter.
#[derive(FromPyObject)]
enum StopsArg {
    One(String),
    Many(Vec<String>),
}

/// Streaming stop-sequence matcher on decoded text.
///
/// `feed` returns only text that is certain to be output: a suffix that could begin a stop
/// string is held back until it is known not to be one. The match is the stop string with the
/// earliest start in the whole text (ties go to the shortest), so the concatenated output is
/// the same for any chunking. After a stop, `feed` returns "".
#[pyclass(name = "StopMatcher", module = "smgpy._native")]
pub struct PyStopMatcher {
    inner: smgpy_stop::StopMatcher,
}

impl From<smgpy_stop::StopMatcher> for PyStopMatcher {
    fn from(inner: smgpy_stop::StopMatcher) -> Self {
        Self { inner }
    }
}

#[pymethods]
impl PyStopMatcher {
    #[new]
    #[pyo3(signature = (stops, include_stop = false))]
    fn new(stops: StopsArg, include_stop: bool) -> PyResult<Self> {
        let stops = match stops {
            StopsArg::One(s) => vec![s],
            StopsArg::Many(v) => v,
        };
        smgpy_stop::StopMatcher::new(stops, include_stop)
            .map(Self::from)
            .map_err(crate::errors::stop)
    }

    /// Feed one text delta; returns the text that is safe to emit now.
    fn feed(&mut self, text: &str) -> String {
        match self.inner.push(text) {
            StopOutput::Emit(t) | StopOutput::Stopped { text: t, .. } => t,
        }
    }

    /// End of the stream: returns the text still held back (a pending match becomes final).
    fn finish(&mut self) -> String {
        self.inner.finish()
    }

    /// Whether a stop string ended the stream.
    #[getter]
    fn stopped(&self) -> bool {
        self.inner.is_stopped()
    }

    /// The stop string that ended the stream, as given, or None.
    #[getter]
    fn matched(&self) -> Option<String> {
        self.inner.matched().and_then(|i| self.inner.stops().get(i).cloned())
    }

    /// Index in the stop list of the stop string that ended the stream, or None.
    #[getter]
    fn matched_index(&self) -> Option<usize> {
        self.inner.matched()
    }

    /// The stop strings, in the order given.
    #[getter]
    fn stops(&self) -> Vec<String> {
        self.inner.stops().to_vec()
    }

    /// Whether the stop string itself is part of the output.
    #[getter]
    fn include_stop(&self) -> bool {
        self.inner.include_stop()
    }

    fn __repr__(&self) -> String {
        format!(
            "StopMatcher(stops={:?}, include_stop={})",
            self.inner.stops(),
            self.inner.include_stop()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStopMatcher>()?;
    Ok(())
}
