//! The `smgpy._native` extension module. This crate only converts between Python and the core
//! crates; every behaviour lives in a pure-Rust crate.

use pyo3::prelude::*;

pub mod convert;
mod doorbell;
mod embed_sink;
mod engine_bridge;
mod engine_output;
mod errors;
mod output_sink;
mod parsers;
mod reasoning;
mod sampling;
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
    /// mimalloc's collection of the calling thread's heap (`force = false`: the cheap part).
    fn mi_collect(force: bool);
}

/// Least time between two collections on one thread.
const COLLECT_EVERY: std::time::Duration = std::time::Duration::from_millis(1);

/// Run by the extension's runtime threads (HTTP workers, heavy requests) as they go idle: frees
/// made to this thread's heap from other threads (a request's buffers are often dropped on
/// another worker than the one that built them) are only taken back when the owning thread
/// allocates again or collects, so a thread that went idle after a burst kept that memory
/// resident, and the soak's quiet-pause RSS wandered by 10 MB and more (benches/README.md,
/// "Hardening soak"). At most once a millisecond per thread, so a busy worker that parks between
/// every request does not pay for it each time.
pub(crate) fn release_idle_memory() {
    thread_local! {
        static LAST: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
    }
    let now = std::time::Instant::now();
    if LAST.get().is_some_and(|t| now.duration_since(t) < COLLECT_EVERY) {
        return;
    }
    LAST.set(Some(now));
    // SAFETY: `mi_collect` is mimalloc's documented API; it touches only the calling thread's
    // heap and the allocator's own shared state, under its own synchronisation.
    unsafe { mi_collect(false) }
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
    smgpy_server::offload::set_idle_hook(release_idle_memory);
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    parsers::register(m)?;
    reasoning::register(m)?;
    template::register(m)?;
    tokenizer::register(m)?;
    stop::register(m)?;
    structured::register(m)?;
    server::register(m)?;
    sampling::register(m)?;
    doorbell::register(m)?;
    embed_sink::register(m)?;
    Ok(())
}
