//! The `smgpy._native` extension module. This crate only converts between Python and the core
//! crates; every behaviour lives in a pure-Rust crate.

use pyo3::prelude::*;

mod blas;
pub mod convert;
mod doorbell;
mod embed_sink;
mod engine_bridge;
mod engine_output;
mod errors;
mod output_sink;
mod parsers;
mod reasoning;
mod server;
mod stop;
mod structured;
mod template;
mod tokenizer;

/// Rust allocations of this extension (not Python's, nor the process's `malloc`) go to mimalloc.
/// Serving a request allocates many small, short-lived buffers on several threads (tokenizer
/// offsets, rendered text, JSON); under load glibc's allocator took about a fifth of the HTTP
/// threads' time, in arena locking and consolidation (benches/README.md, "Per-request cost").
/// mimalloc's v2 line: encoding a chat prompt took 15 us with it against 20 us with v3, whose page
/// handling kept returning and re-faulting memory in that pattern; streaming costs the same with both.
/// `local_dynamic_tls`: this library is loaded with `dlopen`, where the initial-exec TLS model
/// can fail to load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    doorbell::register(m)?;
    embed_sink::register(m)?;
    Ok(())
}
