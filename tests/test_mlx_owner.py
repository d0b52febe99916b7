"""The MLX owner thread's failure paths (:func:`smgpy.mlx.owner.own_mlx_thread`): whatever fails
before serving, a missing MLX included, reaches the caller waiting on ``ready``, and the thread ends."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
from smgpy.mlx.owner import own_mlx_thread


def run_failing(load: Any) -> list[BaseException]:
    errors: list[BaseException] = []
    ready, stopped = threading.Event(), threading.Event()

    def serve(stream: Any) -> None:
        raise AssertionError("serve must not run after a failed load")

    t = threading.Thread(
        target=own_mlx_thread, args=(load, serve), kwargs={"failed": errors.append, "ready": ready, "stopped": stopped}
    )
    t.start()
    assert ready.wait(30) and stopped.is_set()
    t.join(30)
    assert not t.is_alive()
    return errors


def test_a_load_error_reaches_the_waiting_caller() -> None:
    pytest.importorskip("mlx.core")

    def load() -> None:
        raise FileNotFoundError("no such model")

    errors = run_failing(load)
    assert [type(e) for e in errors] == [FileNotFoundError]


def test_mlx_that_cannot_be_imported_is_a_load_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mlx.core", None)  # `import mlx.core` now raises ImportError
    errors = run_failing(lambda: None)
    assert len(errors) == 1 and isinstance(errors[0], ImportError)
