"""Outputs from the MLX thread to an asyncio loop, without handing the GIL over per decode step.

``loop.call_soon_threadsafe`` writes its wake-up byte with the GIL released. The loop thread it
wakes takes the GIL and runs its whole turn (putting the step's outputs into the requests' queues,
running every request's consumer) while the MLX thread waits to get the GIL back: 170-180 us per
decode step at one client on the tiny model of ``benches/mlx_tiny.py``, during which the next step
cannot be queued. A :class:`Mailbox` queues a step's outputs and rings a native
:class:`smgpy._native.Doorbell`, which keeps the GIL: the MLX thread goes on to queue the next step,
and the loop delivers the outputs once the MLX thread waits for the model (MLX releases the GIL
while it waits), so the loop's work overlaps the model's instead of delaying it.

Outputs wait at most one step: a post that finds the previous one not yet delivered (the loop never
got the GIL in between) wakes the loop the usual way, letting go of the GIL.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from smgpy import _native

__all__ = ["Mailbox", "Mailboxes"]

Items = list[tuple[asyncio.Queue[Any], Any]]


class Mailbox:
    """Where one event loop receives outputs from other threads: ``post`` from any thread, delivery
    on the loop. Made on the loop's thread (see :class:`Mailboxes`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak: the loop holds this mailbox through its reader, and drops it when it closes.
        self._loop: Callable[[], asyncio.AbstractEventLoop | None] = weakref.ref(loop)
        self._batches: deque[Items] = deque()
        self._bell: _native.Doorbell | None = _native.Doorbell()
        try:
            loop.add_reader(self._bell.fileno(), self._deliver)
        except NotImplementedError:  # a loop without readers: wake it the usual way
            self._bell = None

    def post(self, items: Items) -> None:
        """Queue ``items`` (request queue, output) for the loop and wake it. Dropped once the loop
        is closed: nobody is listening any more."""
        loop = self._loop()
        if loop is None or loop.is_closed():
            self._batches.clear()  # what a closed loop never took: its queues would keep it alive
            return
        if self._bell is None:
            try:
                loop.call_soon_threadsafe(_put_all, items)
            except RuntimeError:
                pass  # closed since the check
            return
        behind = bool(self._batches)
        self._batches.append(items)
        self._bell.ring()
        if behind:
            # The loop has not had the GIL since the last post: hand it over now.
            try:
                loop.call_soon_threadsafe(self._deliver)
            except RuntimeError:
                self._batches.clear()

    def close(self) -> None:
        """Stop watching the doorbell (on the loop's thread); later posts go nowhere."""
        loop = self._loop()
        if self._bell is not None and loop is not None and not loop.is_closed():
            loop.remove_reader(self._bell.fileno())
        self._bell = None
        self._batches.clear()
        self._loop = _dead_loop

    def _deliver(self) -> None:
        """On the loop: every queued batch, in order."""
        if self._bell is None:
            return
        self._bell.take()  # before reading: a batch posted after this rings again
        try:
            while self._batches:
                _put_all(self._batches.popleft())
        finally:
            if self._batches:  # a delivery raised: the rest must not wait for the next post
                self._bell.ring()


class Mailboxes:
    """One :class:`Mailbox` per event loop, made on first use and dropped with its loop."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Mailbox] = weakref.WeakKeyDictionary()

    def for_running_loop(self) -> Mailbox:
        """The running loop's mailbox (call on the loop's thread)."""
        loop = asyncio.get_running_loop()
        box = self._by_loop.get(loop)
        if box is None:
            for old in [old for old in self._by_loop if old.is_closed()]:
                self._by_loop.pop(old).close()
            box = self._by_loop[loop] = Mailbox(loop)
        return box

    def close(self) -> None:
        """Close every mailbox (an engine shutting down), each on its own loop's thread."""
        for loop, box in list(self._by_loop.items()):
            if loop.is_closed():
                box.close()
                continue
            try:
                loop.call_soon_threadsafe(box.close)
            except RuntimeError:  # closed meanwhile
                box.close()
        self._by_loop.clear()


def _dead_loop() -> None:
    """The loop reference of a closed mailbox."""
    return None


def _put_all(items: Items) -> None:
    for q, item in items:
        q.put_nowait(item)
