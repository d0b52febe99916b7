//! Python binding for `smgpy-blas` (one-row products through gemv for MLX on Linux).
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;

/// Route `cblas_sgemm` calls that reach this module to `library`, one-row products through its
/// `cblas_sgemv`. The caller then makes this module global before `mlx.core` loads (see
/// `smgpy.mlx.blas`). Raises `OSError` when the library cannot be used.
#[pyfunction]
fn blas_forward_install(library: &str) -> PyResult<()> {
    smgpy_blas::install(library).map_err(|e| PyOSError::new_err(e.to_string()))
}

/// How many one-row products went through gemv so far.
#[pyfunction]
fn blas_forwarded() -> u64 {
    smgpy_blas::forwarded()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(blas_forward_install, m)?)?;
    m.add_function(wrap_pyfunction!(blas_forwarded, m)?)?;
    Ok(())
}
