"""The tests' CPU BLAS: MKL (the `mkl` wheel of the test extra) in front of the reference BLAS of
the Linux ``mlx[cpu]`` wheel, for the test processes and the servers they start.

Why: MLX's CPU backend sends every float32 matrix product to ``cblas_sgemm``, and the Linux wheel
links the reference BLAS (plain single-threaded loops). On the project's 2-core CI machine the demo
model (SmolLM2-135M, float32) then prefills 97 tokens in 7.0 s and decodes at 122 ms a token; with
MKL the same takes 0.48 s and 52 ms. The real-model tests spend most of their time there: the suite
takes ~6.5 minutes instead of ~11. It changes no assertion: a test and the mlx-lm reference it
compares with run in the same process, on the same BLAS.

How: the dynamic linker binds ``mlx.core``'s ``cblas_sgemm`` to the first library of the process's
global scope that defines it, so MKL is opened with ``RTLD_GLOBAL`` before MLX is imported; the
servers a test starts as subprocesses get it through ``LD_PRELOAD``. MKL runs sequentially (one
core per test worker: pytest-xdist already runs two). This is the test harness's choice for its
own processes, as ``benches/_blas.py`` is the benches'; smgpy itself never does it.
``SMGPY_TEST_BLAS=off`` keeps the wheel's own BLAS.
"""

from __future__ import annotations

import ctypes
import os
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["use_fast_cpu_blas"]

# MKL_THREADING_SEQUENTIAL in mkl_service.h: no OpenMP threads of MKL's own.
_SEQUENTIAL = 1


def _mkl_runtime() -> Path | None:
    """``libmkl_rt`` of the installed `mkl` wheel, or None."""
    try:
        files = metadata.distribution("mkl").files or []
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name.startswith("libmkl_rt.so"):
            path = Path(str(f.locate()))
            if path.is_file():
                return path.resolve()
    return None


def use_fast_cpu_blas() -> str | None:
    """Put MKL in front of MLX's BLAS for this process and its children; returns the library used,
    or None (not Linux, MKL not installed, ``SMGPY_TEST_BLAS=off``, or MLX already imported)."""
    if not sys.platform.startswith("linux") or os.environ.get("SMGPY_TEST_BLAS", "").lower() == "off":
        return None
    if "mlx.core" in sys.modules:
        return None  # too late: MLX's symbols are bound
    lib = _mkl_runtime()
    if lib is None:
        return None
    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL).MKL_Set_Threading_Layer(_SEQUENTIAL)
    # LD_PRELOAD separates its entries by spaces and colons: a path holding either stays out (the
    # servers the tests start then run on the wheel's BLAS, only slower).
    preload = os.environ.get("LD_PRELOAD", "")
    if not any(c in str(lib) for c in " :") and str(lib) not in preload.split():
        os.environ["LD_PRELOAD"] = f"{lib} {preload}".strip()
        os.environ["MKL_THREADING_LAYER"] = "SEQUENTIAL"
    return str(lib)
