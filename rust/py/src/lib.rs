//! The `smgpy._native` extension module. This crate only converts between Python and the core
//! crates; every behaviour lives in a pure-Rust crate.

use pyo3::prelude::*;

mod blas;
pub mod convert;
mod engine_bridge;
mod errors;
mod parsers;
mod reasoning;
mod server;
mod stop;
mod structured;
mod template;
mod tokenizer;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    parsers::register(m)?;
    reasoning::register(m)?;
    template::register(m)?;
    tokenizer::register(m)?;
    stop::register(m)?;
    structured::register(m)?;
    server::register(m)?;
    blas::register(m)?;
    Ok(())
}
