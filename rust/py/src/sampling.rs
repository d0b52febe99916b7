//! `check_sampling_params`: the HTTP routes' sampling rules, for an engine called directly.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Check an engine's `sampling_params` (sglang's names) with the rules the server applies to
/// every request (`ValueError` naming the key otherwise), so an engine validates exactly as the
/// server does instead of keeping rules of its own that drift.
#[pyfunction]
fn check_sampling_params(params: &Bound<'_, PyDict>) -> PyResult<()> {
    let value = crate::convert::py_to_value(params.as_any())?;
    smgpy_protocol::sampling::check_engine_params(value).map_err(|e| crate::errors::invalid(e.message))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_sampling_params, m)?)?;
    Ok(())
}
