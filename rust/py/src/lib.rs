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

/// mimalloc's `mi_option_purge_delay` (its option enum in `mimalloc.h`, v2 line).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

extern "C" {
    /// mimalloc's own setter; its symbols are local to this extension (a cdylib exports only its
    /// Python entry points), so this reaches this extension's allocator and no other.
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// Pages freed by this extension go back to the OS at once instead of after mimalloc's delay.
/// The delayed purge only runs when the same thread allocates again, so memory freed by a burst
/// of large requests on threads that then sat idle stayed resident: a soak with 3 MB bodies held
/// ~150 MB more after the load than with this (benches/README.md, "Hardening soak"). Encoding
/// and serving costs were unchanged within noise.
fn purge_freed_memory_at_once() {
    // SAFETY: `mi_option_set` is mimalloc's documented API, takes plain integers, and may be
    // called at any time from any thread; the option index matches the linked v2 header.
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    purge_freed_memory_at_once();
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
