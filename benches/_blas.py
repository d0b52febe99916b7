"""The CPU BLAS the MLX benches run on: the same optimized library for both sides of a comparison.

MLX's Linux CPU wheel (``mlx[cpu]``) links the reference BLAS: plain single-threaded loops (a
256 x 576 x 1536 float32 product: 152 ms there, 3.9 ms with OpenBLAS, on a 2-core x86 machine).
Where a bench compares ``smgpy serve`` with another MLX server on the CPU, that cost would swamp
what the servers themselves do. For a fair comparison both servers therefore get the same
optimized BLAS (OpenBLAS, BLIS or MKL), chosen by the bench (``--cpu-blas off|auto|LIB``).

That is a process-level choice: the dynamic linker binds MLX's ``cblas_sgemm`` to the first
library of the process's global scope that defines it, so a library preloaded before MLX loads
takes its place for every caller in that process. It is made here, by the bench, for the
processes the bench starts (``LD_PRELOAD``) and for its own in-process measurements (a global
``dlopen`` before ``mlx.core`` is imported); smgpy itself never does it.

Benches run as scripts (``python benches/<name>.py``), so this folder is on ``sys.path`` and they
import this module as ``_blas``.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys

# Sonames as the dynamic linker finds them (ld.so.cache), most common first.
CANDIDATES = ("libopenblas.so.0", "libopenblas.so", "libblis.so.4", "libmkl_rt.so", "libmkl_rt.so.2")
OFF = ("off", "", "none")


def add_cpu_blas_argument(parser: argparse.ArgumentParser, *, default: str, used_by: str) -> None:
    """Add ``--cpu-blas`` (read it with :func:`find_blas`) to ``parser``: the BLAS of ``used_by``
    (e.g. "both servers"), ``default`` when the option is not given."""
    parser.add_argument(
        "--cpu-blas",
        default=default,
        help=f"the BLAS of {used_by}: off (the mlx wheel's own), auto (OpenBLAS/BLIS/MKL, first found) "
        f"or a library (default {default})",
    )


def _loadable(lib: str) -> bool:
    """Whether ``lib`` loads and exports ``cblas_sgemm`` (the symbol MLX's products go through)."""
    try:
        return hasattr(ctypes.CDLL(lib), "cblas_sgemm")
    except OSError:
        return False


def find_blas(choice: str) -> str | None:
    """The library a bench's ``--cpu-blas`` names: None for ``off`` (MLX keeps the BLAS it links),
    the first of :data:`CANDIDATES` that loads for ``auto``, else ``choice`` itself (a library name
    or path). Raises ``SystemExit`` when no such library can be loaded."""
    choice = choice.strip()
    if choice.lower() in OFF:
        return None
    if choice.lower() == "auto":
        for name in CANDIDATES:
            if _loadable(name):
                return name
        raise SystemExit(
            "--cpu-blas auto: no OpenBLAS/BLIS/MKL found; apt install libopenblas0 (or pass --cpu-blas off)"
        )
    if not _loadable(choice):
        raise SystemExit(f"--cpu-blas {choice}: cannot load it, or it has no cblas_sgemm (not a CBLAS library)")
    return choice


def preload_here(lib: str | None) -> None:
    """Make ``lib`` global in this process, for measurements the bench runs in process. Must come
    before ``mlx.core`` is imported (MLX binds its BLAS when it loads). Does nothing for None."""
    if lib is None:
        return
    if "mlx.core" in sys.modules:
        raise RuntimeError(f"preload_here({lib!r}): mlx.core is already imported; preload the BLAS first")
    ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)


def child_env(lib: str | None, env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default: this process's environment) for a subprocess, with ``lib`` put
    first in ``LD_PRELOAD`` when it is set, so the subprocess's MLX binds to it."""
    out = dict(os.environ if env is None else env)
    if lib is not None:
        out["LD_PRELOAD"] = " ".join(filter(None, [lib, out.get("LD_PRELOAD")]))
    return out
