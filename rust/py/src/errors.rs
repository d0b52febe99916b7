//! The one place where core errors become Python exceptions.
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    smgpy._native,
    GrammarError,
    PyValueError,
    "A structured-output constraint that cannot be enforced (the message names the keyword, \
     the regex position or the grammar line), or a token the constraint does not allow."
);

/// `smgpy_structured` errors as `GrammarError` (a `ValueError`).
pub fn structured(e: smgpy_structured::StructuredError) -> PyErr {
    GrammarError::new_err(e.to_string())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("GrammarError", m.py().get_type::<GrammarError>())?;
    Ok(())
}
