"""Opt-in: an optimized BLAS for MLX's Linux CPU backend, for the process smgpy owns.

The Linux ``mlx[cpu]`` wheel links the reference (netlib) BLAS: plain, single-threaded Fortran
loops. Every float32 matrix product MLX runs on the CPU is one ``cblas_sgemm`` call into it, at
about 1 GFLOP/s on the 2-core x86 machines smgpy is tested on: 5x slower than OpenBLAS for one
row (decode), 30-50x for 64 rows (prefill, batched decode).

The dynamic linker binds a symbol to the first library of the process's global scope that
defines it. Loading OpenBLAS (or BLIS, or MKL) with ``RTLD_GLOBAL`` *before* ``mlx.core`` is
imported therefore makes MLX's ``cblas_sgemm`` resolve to the optimized one. That changes every
library of the process that binds ``cblas_sgemm`` afterwards, so it is a process-level choice:
nothing in smgpy does it on import. ``smgpy serve --cpu-blas auto`` does it (and logs it) for the
server process; an application that embeds smgpy may call :func:`install_cpu_blas` itself, first
thing, if it wants the same.

On top of the library, smgpy's extension exports a ``cblas_sgemm`` (crate ``smgpy-blas``) that
sends decode-sized products (1-8 rows times a transposed weight) to its own kernel, which reads
the weights once (x86-64 with AVX2 and FMA), and passes every other call to the library. With
``kernel=True`` it is made global just before the library, so MLX binds to it first.

This is a CPU-only trick: on macOS MLX uses Accelerate and runs models on Metal, and a CUDA build
of MLX runs them on the GPU, so :func:`install_cpu_blas` does nothing there.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import importlib.util
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuBlas", "install_cpu_blas", "installed_cpu_blas", "kernel_in_use"]

log = logging.getLogger("smgpy.mlx")

# Sonames as the dynamic linker finds them (ld.so.cache), most common first.
_CANDIDATES = ("libopenblas.so.0", "libopenblas.so", "libblis.so.4", "libmkl_rt.so.2")


@dataclass(frozen=True)
class CpuBlas:
    """What :func:`install_cpu_blas` put in front of MLX's bundled BLAS."""

    library: str | None  # the optimized library made global, or None (MLX keeps its bundled one)
    kernel: bool  # smgpy's small-batch kernel sits in front of the library

    def describe(self) -> str:
        lib = self.library or "MLX's bundled reference BLAS"
        return f"{lib} with smgpy's small-batch kernel" if self.kernel else lib


_installed: list[CpuBlas] = []


def installed_cpu_blas() -> CpuBlas | None:
    """The result of the :func:`install_cpu_blas` call that took effect in this process, or None."""
    return _installed[0] if _installed else None


def _gpu_build() -> str | None:
    """The name of an installed GPU build of MLX (``mlx-cuda*``), read without importing MLX."""
    for dist in importlib.metadata.distributions():
        name = str(dist.metadata["Name"] or "").lower()
        if name.startswith("mlx-cuda") or name.startswith("mlx_cuda"):
            return name
    return None


def install_cpu_blas(library: str = "auto", *, kernel: bool = True) -> CpuBlas | None:
    """Put an optimized BLAS (and smgpy's small-batch kernel) in front of MLX's bundled one.

    ``library`` is ``"auto"`` (the usual OpenBLAS / BLIS / MKL sonames, first found) or a library
    name or path. Must run before ``mlx.core`` is first imported; returns what was installed, or
    None when nothing could be (not Linux, a GPU build of MLX, ``mlx.core`` already loaded).
    Calling it again returns the first result. Raises ``OSError`` when a named library cannot be
    loaded or has no ``cblas_sgemm``.
    """
    if _installed:
        return _installed[0]
    if not sys.platform.startswith("linux"):
        log.info("install_cpu_blas: nothing to do on %s (MLX uses Accelerate and Metal there)", sys.platform)
        return None
    gpu = _gpu_build()
    if gpu is not None:
        log.info("install_cpu_blas: %s is installed, models run on the GPU; MLX's CPU BLAS is left alone", gpu)
        return None
    if "mlx.core" in sys.modules:
        log.warning("install_cpu_blas: mlx.core is already loaded, so MLX keeps the BLAS it bound; call it first")
        return None
    found = _load_library(library)
    target = found or _bundled_blas()
    with_kernel = bool(kernel and target and _install_kernel(target))
    if found:
        # A second dlopen with RTLD_GLOBAL promotes the library into the global scope, after
        # smgpy's extension when the kernel is on: MLX then binds the extension's cblas_sgemm.
        ctypes.CDLL(found, mode=ctypes.RTLD_GLOBAL)
    result = CpuBlas(found, with_kernel)
    _installed.append(result)
    log.info("MLX CPU matrix products: %s", result.describe())
    return result


def _load_library(choice: str) -> str | None:
    names = _CANDIDATES if choice == "auto" else (choice,)
    for name in names:
        try:
            lib = ctypes.CDLL(name)  # privately first: only a CBLAS library may go in front of MLX's
        except OSError:
            continue
        if hasattr(lib, "cblas_sgemm"):
            return name
        if choice != "auto":
            raise OSError(f"{name} has no cblas_sgemm: it is not a CBLAS library")
    if choice != "auto":
        raise OSError(f"cannot load the BLAS library {choice!r}")
    log.info("install_cpu_blas: no OpenBLAS, BLIS or MKL found (Debian/Ubuntu: apt install libopenblas0)")
    return None


def _bundled_blas() -> str | None:
    """The BLAS library the ``mlx[cpu]`` wheel ships (``mlx_cpu.libs/libblas-*.so*``), if any."""
    spec = importlib.util.find_spec("mlx")
    for root in list(spec.submodule_search_locations or []) if spec else []:
        for lib in sorted((Path(root).parent / "mlx_cpu.libs").glob("libblas*.so*")):
            return str(lib)
    return None


def _install_kernel(library: str) -> bool:
    from smgpy import _native

    try:
        _native.blas_forward_install(library)
    except OSError as e:
        log.info("smgpy's small-batch kernel not installed: %s", e)
        return False
    ctypes.CDLL(_native.__file__, mode=ctypes.RTLD_GLOBAL)
    return True


def kernel_in_use() -> bool:
    """Whether MLX's small-batch products reach smgpy's kernel (runs one tiny product to check)."""
    installed = installed_cpu_blas()
    if installed is None or not installed.kernel:
        return False
    import mlx.core as mx

    from smgpy import _native

    before = _native.blas_forwarded()
    with mx.stream(mx.cpu):
        mx.eval(mx.ones((1, 16)) @ mx.ones((16, 16)))
    return _native.blas_forwarded() > before
