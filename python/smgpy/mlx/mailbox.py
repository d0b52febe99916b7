"""Outputs from the MLX thread to an asyncio loop, without handing the GIL over per decode step.

``loop.call_soon_threadsafe`` writes its wake-up byte with the GIL released. The loop thread it
wakes takes the GIL and runs its whole turn (putting the step's outputs into the requests' queues,
running every request's consumer) while the MLX thread waits to get the GIL back: 160-170 us per
decode step at one client on the tiny model of ``benches/mlx_tiny.py``, during which the next step
cannot be queued. A :class:`Mailbox` queues a step's outputs and rings a native
:class:`smgpy._native.Doorbell`, which keeps the GIL: the MLX thread goes on to queue the next step,
and the loop delivers the outputs once the MLX thread waits for the model (MLX releases the GIL
while it waits), so the loop's work overlaps the model's instead of delaying it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from typing import Any

from smgpy import _native

__all__ = ["Mailbox", "Mailboxes"]

Items = list[tuple[asyncio.Queue[dict[str, Any]], dict[str, Any]]]


class Mailbox:
    """Where one event loop receives outputs from other threads: ``post`` from any thread, delivery
    on the loop. Made on the loop's thread (see :class:`Mailboxes`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak: the loop holds this mailbox through its reader, and drops it when it closes.
        self._loop = weakref.ref(loop)
        self._batches: deque[Items] = deque()
        self._bell: _native.Doorbell | None = _native.Doorbell()
        try:
            loop.add_reader(self._bell.fileno(), self._deliver)
        except NotImplementedError:  # a loop without readers (Windows' proactor): wake it the usual way
            self._bell = None

    def post(self, items: Items) -> None:
        """Queue ``items`` (request queue, output) for the loop and wake it. Dropped once the loop
        is closed: nobody is listening any more."""
        loop = self._loop()
        if loop is None or loop.is_closed():
            return
        if self._bell is None:
            try:
                loop.call_soon_threadsafe(_put_all, items)
            except RuntimeError:
                pass  # closed since the check
            return
        self._batches.append(items)
        self._bell.ring()

    def _deliver(self) -> None:
        """On the loop: every queued batch, in order."""
        assert self._bell is not None
        self._bell.take()  # before reading: a batch posted after this rings again
        while self._batches:
            _put_all(self._batches.popleft())


class Mailboxes:
    """One :class:`Mailbox` per event loop, made on first use and dropped with its loop."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Mailbox] = weakref.WeakKeyDictionary()

    def for_running_loop(self) -> Mailbox:
        """The running loop's mailbox (call on the loop's thread)."""
        loop = asyncio.get_running_loop()
        box = self._by_loop.get(loop)
        if box is None:
            box = self._by_loop[loop] = Mailbox(loop)
        return box


def _put_all(items: Items) -> None:
    for q, item in items:
        q.put_nowait(item)
