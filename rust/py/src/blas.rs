//! Python binding for `smgpy-blas` (one-row products through gemv for MLX on Linux).
use pyo3::prelude::*;
use smgpy_blas::Mode;

/// Route `cblas_sgemm` calls that reach this module to `library`, one-row products through its
/// `cblas_sgemv`. The caller then makes this module global before `mlx.core` loads (see
/// `smgpy.mlx.blas`). Raises `OSError` when the library cannot be used.
#[pyfunction]
fn blas_forward_install(library: &str) -> PyResult<()> {
    smgpy_blas::install(library).map_err(crate::errors::blas)
}

/// How many one-row products went through gemv so far.
#[pyfunction]
fn blas_forwarded() -> u64 {
    smgpy_blas::forwarded()
}

/// What the forwarding takes over: `"off"` (nothing), `"gemv"` (one-row products) or
/// `"skinny"` (products with up to 8 rows through smgpy's kernel, where the CPU has AVX2 and FMA).
#[pyfunction]
fn blas_set_mode(mode: &str) -> PyResult<()> {
    let mode = match mode {
        "off" => Mode::PassThrough,
        "gemv" => Mode::Gemv,
        "skinny" => Mode::Skinny,
        other => {
            return Err(crate::errors::invalid(format!(
                "unknown BLAS forwarding mode {other:?}: use \"off\", \"gemv\" or \"skinny\""
            )))
        }
    };
    smgpy_blas::set_mode(mode);
    Ok(())
}

/// The forwarding mode in effect (`"skinny"` falls back to `"gemv"` without AVX2 and FMA).
#[pyfunction]
fn blas_mode() -> &'static str {
    match smgpy_blas::mode() {
        Mode::PassThrough => "off",
        Mode::Gemv => "gemv",
        Mode::Skinny => "skinny",
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(blas_forward_install, m)?)?;
    m.add_function(wrap_pyfunction!(blas_forwarded, m)?)?;
    m.add_function(wrap_pyfunction!(blas_set_mode, m)?)?;
    m.add_function(wrap_pyfunction!(blas_mode, m)?)?;
    Ok(())
}
