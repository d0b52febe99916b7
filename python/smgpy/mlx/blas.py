"""Give MLX's CPU backend an optimized BLAS on Linux, when the machine has one.

The Linux ``mlx[cpu]`` wheel links the reference (netlib) BLAS: plain, single-threaded Fortran
loops. Every float32 matrix product MLX runs on the CPU is one ``cblas_sgemm`` call into it, at
about 1 GFLOP/s on the 2-core x86 machines smgpy is tested on: 5x slower than OpenBLAS for one
row (decode), 30-50x for 64 rows (prefill, batched decode). Decode of a 135M model spends most
of its time there, and prompt processing runs no faster than decode.

The dynamic linker binds a symbol to the first library of the process's global scope that
defines it, before the libraries a module brought in itself. Loading OpenBLAS (or BLIS, or MKL)
with ``RTLD_GLOBAL`` *before* ``mlx.core`` is imported therefore makes MLX's ``cblas_sgemm``
resolve to the optimized one: same C interface, same results up to float rounding. Once
``mlx.core`` is loaded it is too late, which is why :mod:`smgpy.mlx` calls this first.

One more step on top: a decode step multiplies 1-8 rows of activations (one per sequence) by
every weight matrix, and OpenBLAS's ``sgemm`` first copies ("packs") the whole weight matrix for
each such call, before 0.3.27 (Debian 12, Ubuntu 24.04) even for a single row. smgpy's extension
exports a ``cblas_sgemm`` (crate ``smgpy-blas``) that sends those products to its own kernel,
which reads the weights once (x86-64 with AVX2 and FMA), or one-row products to ``sgemv``
elsewhere, and passes every other call through; it is made global just before the BLAS library,
so MLX binds to it first. Decode steps of a 135M model took 1.2-1.4x less time at batch 1-8.

``SMGPY_BLAS`` chooses: unset tries the usual library names, a library name or path loads that
one, ``none`` keeps MLX's own BLAS. ``SMGPY_BLAS_GEMV=0`` turns the forwarding off;
``smgpy._native.blas_set_mode("off" | "gemv" | "skinny")`` switches it at run time. On
Debian and Ubuntu, ``apt install libopenblas0`` provides the library.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

__all__ = ["fast_blas", "gemv_forwarding", "load_fast_blas", "report"]

log = logging.getLogger("smgpy.mlx")

# Sonames as the dynamic linker finds them (ld.so.cache), most common first.
_CANDIDATES = ("libopenblas.so.0", "libopenblas.so", "libblis.so.4", "libmkl_rt.so.2")
_OFF = ("none", "off", "0", "false")

_state: dict[str, str | None] = {}


def fast_blas() -> str | None:
    """The BLAS library :func:`load_fast_blas` put in front of MLX's, or None."""
    return _state.get("loaded")


def gemv_forwarding() -> bool:
    """Whether MLX's small-batch products reach smgpy's forwarding (runs one tiny product to check)."""
    if not _state.get("gemv"):
        return False
    import mlx.core as mx

    from smgpy import _native

    before = _native.blas_forwarded()
    with mx.stream(mx.cpu):
        mx.eval(mx.ones((1, 16)) @ mx.ones((16, 16)))
    return _native.blas_forwarded() > before


def _native_mode() -> str:
    from smgpy import _native

    return {"skinny": "smgpy's kernel", "gemv": "sgemv"}.get(_native.blas_mode(), "sgemm")


def load_fast_blas() -> str | None:
    """Load an optimized BLAS globally before MLX; return its name, or None. Runs once."""
    if "loaded" not in _state:
        _state["loaded"] = _load()
    return _state["loaded"]


def report() -> None:
    """Log, once, which BLAS MLX's CPU products use, with a hint when it is the slow one."""
    if _state.get("reported") or not sys.platform.startswith("linux"):
        return
    _state["reported"] = "yes"
    if fast_blas():
        how = f" (small-batch products: {_native_mode()})" if gemv_forwarding() else ""
        log.info("MLX CPU matrix products use %s%s", fast_blas(), how)
    elif os.environ.get("SMGPY_BLAS", "").strip().lower() not in _OFF and _on_cpu():
        log.warning(
            "smgpy.mlx put no optimized BLAS in front of the reference one bundled with mlx (slow on CPU: "
            "prefill runs at decode speed); install OpenBLAS (Debian/Ubuntu: apt install libopenblas0) "
            "or set SMGPY_BLAS, and import smgpy.mlx before mlx.core"
        )


def _on_cpu() -> bool:
    import mlx.core as mx

    return bool(mx.default_device() == mx.cpu)


def _load() -> str | None:
    if not sys.platform.startswith("linux"):
        return None  # macOS MLX uses Accelerate; nothing to replace
    choice = os.environ.get("SMGPY_BLAS", "").strip()
    if choice.lower() in _OFF:
        return None
    if "mlx.core" in sys.modules:
        log.debug("mlx.core was imported before smgpy.mlx: MLX keeps the BLAS it was loaded with")
        return None
    for name in (choice,) if choice else _CANDIDATES:
        if _try(name):
            return name
    if choice:
        log.warning("SMGPY_BLAS=%s: no usable BLAS there (a library exporting cblas_sgemm); MLX keeps its own", choice)
    # No faster library: MLX keeps the one its wheel bundles, but small-batch products (decode)
    # can still skip it through smgpy's kernel.
    bundled = _bundled_blas()
    if bundled:
        _forward_one_row(bundled)
    return None


def _bundled_blas() -> str | None:
    """The BLAS library the ``mlx[cpu]`` wheel ships (``mlx_cpu.libs/libblas-*.so*``), if any."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("mlx")
    for root in spec.submodule_search_locations or [] if spec else []:
        for lib in sorted((Path(root).parent / "mlx_cpu.libs").glob("libblas*.so*")):
            return str(lib)
    return None


def _try(name: str) -> bool:
    try:
        lib = ctypes.CDLL(name)  # privately first: only a CBLAS library may go in front of MLX's
    except OSError:
        return False
    if not hasattr(lib, "cblas_sgemm"):
        return False
    _forward_one_row(name)
    # A second dlopen with RTLD_GLOBAL promotes the loaded library into the global scope, after
    # smgpy's extension when the forwarding is on: MLX then binds the extension's cblas_sgemm.
    ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    return True


def _forward_one_row(name: str) -> None:
    if os.environ.get("SMGPY_BLAS_GEMV", "").strip().lower() in _OFF:
        return
    from smgpy import _native

    try:
        _native.blas_forward_install(name)
    except OSError as e:
        log.debug("small-batch product forwarding not installed: %s", e)
        return
    ctypes.CDLL(_native.__file__, mode=ctypes.RTLD_GLOBAL)
    _state["gemv"] = name
