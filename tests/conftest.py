"""Shared fixtures: run a real smgpy server on a free port in a background thread."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import smgpy  # noqa: E402

# smgpy.mlx puts an optimized BLAS in front of MLX's reference one, which only works before
# `mlx.core` is first imported; some test modules import mlx-lm directly, so do it here first.
with contextlib.suppress(ImportError):
    import smgpy.mlx  # noqa: E402, F401

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


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


@pytest.fixture
def serve() -> Any:
    return serve_in_thread
