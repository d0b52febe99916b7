"""The MLX engine's process-level behaviour: importing smgpy changes nothing; the opt-in CPU BLAS
(``smgpy.mlx.blas.install_cpu_blas``, ``smgpy serve --cpu-blas``) does what it says; a clean exit.

Each case runs in a fresh interpreter: MLX binds its BLAS once, when ``mlx.core`` loads.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import demo_gguf

demo_gguf()

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU BLAS option is Linux-only")


def python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SMGPY_TEST_")}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def openblas_installed() -> bool:
    try:
        ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return False
    return True


# Prints the library the process's global scope binds `cblas_sgemm` to (what a library loaded
# later would get), or "unbound".
GLOBAL_SGEMM = """
    import ctypes

    class _Info(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                    ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]

    def global_sgemm():
        scope = ctypes.CDLL(None)
        try:
            fn = scope.cblas_sgemm
        except AttributeError:
            return "unbound"
        info = _Info()
        ctypes.CDLL(None).dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info))
        return (info.fname or b"?").decode()
"""


@linux_only
def test_importing_smgpy_and_its_mlx_engine_changes_nothing_in_the_process() -> None:
    code = (
        GLOBAL_SGEMM
        + """
    import os, sys
    env = dict(os.environ)
    before = global_sgemm()
    import smgpy, smgpy.mlx, smgpy.server, smgpy.cli
    assert "mlx.core" not in sys.modules, "importing smgpy.mlx loaded MLX"
    from smgpy.mlx import MLXEngine  # imports mlx.core and mlx-lm
    import mlx.core as mx
    mx.eval(mx.ones((2, 8)) @ mx.ones((8, 8)))
    assert dict(os.environ) == env, "the environment changed"
    print(before, global_sgemm())
    """
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    before, after = out.stdout.split()
    assert before == after == "unbound", out.stdout


@linux_only
def test_install_cpu_blas_is_explicit_and_reported() -> None:
    code = (
        GLOBAL_SGEMM
        + """
    from smgpy.mlx.blas import install_cpu_blas, kernel_in_use
    from smgpy import _native
    got = install_cpu_blas("auto")
    import mlx.core as mx
    print(got.library, got.kernel, kernel_in_use(), global_sgemm() == _native.__file__)
    """
    )
    out = python(code)
    assert out.returncode == 0, out.stderr
    library, kernel, in_use, ours = out.stdout.split()
    assert library == ("libopenblas.so.0" if openblas_installed() else "None")
    assert kernel == in_use == ours == "True"
    assert "MLX CPU matrix products:" in out.stderr or out.stderr == ""


@linux_only
def test_a_named_library_that_is_missing_is_an_error() -> None:
    code = """
        from smgpy.mlx.blas import install_cpu_blas
        try:
            install_cpu_blas("libno-such-blas.so.9")
        except OSError as e:
            print("refused:", e)
    """
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused:") and "libno-such-blas.so.9" in out.stdout


@linux_only
def test_too_late_once_mlx_is_loaded() -> None:
    out = python("import mlx.core; from smgpy.mlx.blas import install_cpu_blas; print(install_cpu_blas())")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"


def test_cpu_only_tricks_stay_off_other_platforms_and_gpu_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS (Metal) and a CUDA build of MLX keep MLX's BLAS untouched (platform and build faked)."""
    from smgpy.mlx import blas

    monkeypatch.setattr(blas, "_installed", [])
    monkeypatch.setattr(sys, "platform", "darwin")
    assert blas.install_cpu_blas("auto") is None
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(blas, "_gpu_build", lambda: "mlx-cuda")
    assert blas.install_cpu_blas("auto") is None
    assert blas.installed_cpu_blas() is None


@pytest.mark.skipif(not openblas_installed(), reason="OpenBLAS is not installed (apt install libopenblas0)")
def test_openblas_is_used_and_gives_the_same_products() -> None:
    code = """
        from smgpy.mlx.blas import install_cpu_blas
        blas = install_cpu_blas("auto")
        import mlx.core as mx
        import numpy as np

        rng = np.random.default_rng(0)
        a = rng.standard_normal((33, 576), dtype=np.float32)
        b = rng.standard_normal((576, 1536), dtype=np.float32)
        got = np.array(mx.array(a) @ mx.array(b))
        assert np.allclose(got, a @ b, rtol=1e-4, atol=1e-3), float(np.abs(got - a @ b).max())
        print(blas.library)
    """
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "libopenblas.so.0"


@pytest.mark.skipif(not openblas_installed(), reason="OpenBLAS is not installed (apt install libopenblas0)")
def test_one_row_products_go_through_gemv_and_match() -> None:
    # Every layout MLX may hand to cblas_sgemm with one output row or column: plain, transposed
    # operands (strided views), and a matrix-times-column product.
    code = """
        from smgpy.mlx.blas import install_cpu_blas, kernel_in_use
        install_cpu_blas("auto")
        from smgpy import _native
        import mlx.core as mx
        import numpy as np

        assert kernel_in_use()
        rng = np.random.default_rng(1)
        x = rng.standard_normal((1, 576), dtype=np.float32)
        w = rng.standard_normal((1536, 576), dtype=np.float32)
        cases = [
            (x, w.T),                      # x @ W.T, the decode shape
            (x, w.T.copy()),               # B not transposed
            (x.T.copy().T, w.T),           # A as a transposed view
            (w, x.T.copy()),               # one output column
            (x[:, :1], rng.standard_normal((1, 49), dtype=np.float32)),
        ]
        before = _native.blas_forwarded()
        for a, b in cases:
            got = np.array(mx.array(a) @ mx.array(b))
            want = a @ b
            assert got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-3), (a.shape, b.shape)
        assert _native.blas_forwarded() > before
        print("ok")
    """
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@pytest.mark.skipif(not openblas_installed(), reason="OpenBLAS is not installed (apt install libopenblas0)")
def test_every_forwarding_mode_gives_the_same_products_for_small_batches() -> None:
    # Decode-step shapes (x @ W.T with 1-8 rows), a K that is not a multiple of 8, strided views,
    # and shapes the kernel does not take (9 rows, W not transposed): all equal numpy's result,
    # and a row's result does not depend on the rows batched with it.
    code = """
        from smgpy.mlx.blas import install_cpu_blas
        install_cpu_blas("auto")
        from smgpy import _native
        import mlx.core as mx
        import numpy as np

        rng = np.random.default_rng(2)
        for mode in ("off", "gemv", "skinny"):
            _native.blas_set_mode(mode)
            for rows, n, k in [(1, 49152, 576), (2, 1536, 576), (3, 577, 1536), (8, 96, 37), (9, 64, 64), (4, 5, 9)]:
                x = rng.standard_normal((rows, k), dtype=np.float32)
                w = rng.standard_normal((n, k), dtype=np.float32)
                got = np.array(mx.array(x) @ mx.array(w).T)
                assert np.allclose(got, x @ w.T, rtol=1e-4, atol=1e-3), (mode, rows, n, k)
                got_nt = np.array(mx.array(x) @ mx.array(w.T.copy()))
                assert np.allclose(got_nt, x @ w.T, rtol=1e-4, atol=1e-3), (mode, rows, n, k)
                if mode == "skinny" and rows <= 8:
                    one = np.array(mx.array(x[:1]) @ mx.array(w).T)
                    assert (one[0] == got[0]).all(), "row 0 alone differs from row 0 in the batch"
            wide = rng.standard_normal((4, 1000), dtype=np.float32)
            w = rng.standard_normal((300, 500), dtype=np.float32)
            got = np.array(mx.array(wide)[:, ::2] @ mx.array(w).T)
            assert np.allclose(got, wide[:, ::2] @ w.T, rtol=1e-4, atol=1e-3), mode
        try:
            _native.blas_set_mode("fast")
        except ValueError as e:
            assert "skinny" in str(e)
        else:
            raise AssertionError("unknown mode accepted")
        print(_native.blas_mode())
    """
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() in ("skinny", "gemv")


@linux_only
def test_without_a_faster_blas_small_batches_still_skip_the_bundled_one() -> None:
    code = """
        from smgpy.mlx.blas import install_cpu_blas, kernel_in_use
        from smgpy.mlx import blas
        blas._CANDIDATES = ("libno-such-blas.so.9",)  # as on a machine without OpenBLAS
        got = install_cpu_blas("auto")
        import mlx.core as mx
        import numpy as np

        assert got.library is None and got.kernel and kernel_in_use()
        x = np.ones((3, 40), dtype=np.float32)
        w = np.arange(40 * 7, dtype=np.float32).reshape(7, 40)
        assert (np.array(mx.array(x) @ mx.array(w).T) == x @ w.T).all()
        print("ok")
    """
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


@linux_only
def test_the_kernel_can_be_left_out() -> None:
    code = """
        from smgpy.mlx.blas import install_cpu_blas, kernel_in_use
        got = install_cpu_blas("auto", kernel=False)
        print(got.kernel, kernel_in_use())
    """
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def test_shutdown_ends_running_requests_and_the_process_exits_cleanly() -> None:
    # Before the MLX thread parked on shutdown, about half of such runs aborted at exit.
    code = """
        import asyncio
        from smgpy.engine import GenerateReqInput
        from smgpy.mlx import MLXEngine, demo_gguf_path

        engine = MLXEngine.from_pretrained(str(demo_gguf_path()), prefix_cache_bytes=0)

        async def main():
            params = {"max_new_tokens": 500, "ignore_eos": True}
            gen = engine.generate_request(GenerateReqInput(input_ids=[1, 2, 3, 4], sampling_params=params))
            await gen.__anext__()
            engine.shutdown()
            async for out in gen:
                last = out
            return last["meta_info"]["finish_reason"]

        print(asyncio.run(main())["type"])
    """
    for _ in range(2):
        out = python(code)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip() == "abort"
