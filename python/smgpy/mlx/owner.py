"""The body of a thread that owns an MLX model: load it, serve on the thread's stream, then park.

MLX's streams belong to the thread that made them, so a model is loaded, run and freed on one
thread (the generation engine's and the embedder's each). Such a thread never returns: when an OS
thread that ran MLX ends, MLX's thread-local state (its compile cache among it) is destroyed and
must take the GIL to drop Python references, and if that races with interpreter shutdown, CPython
ends the thread mid-destructor and the whole process aborts ("terminate called without an active
exception"). A parked daemon thread is simply discarded at exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["own_mlx_thread"]


def own_mlx_thread(
    load: Callable[[], None],
    serve: Callable[[Any], None],
    *,
    failed: Callable[[BaseException], None],
    ready: threading.Event,
    stopped: threading.Event,
) -> None:
    """Run ``load()``, then ``serve(stream)`` inside this thread's default stream, set ``stopped``
    and park for good. ``serve`` frees what the thread made before it returns (nothing else ever
    will). An error from ``load`` goes to ``failed`` (for the caller waiting on ``ready`` to raise)
    and ends the thread: nothing of MLX's is left to outlive it."""
    try:
        import mlx.core as mx  # a broken MLX install is a load error too, not a silent dead thread

        load()
        stream = mx.default_stream(mx.default_device())
    except BaseException as e:
        failed(e)
        ready.set()
        stopped.set()
        return
    ready.set()
    with mx.stream(stream):
        serve(stream)
    stopped.set()
    threading.Event().wait()
