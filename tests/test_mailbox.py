"""The MLX thread's way to its event loops (smgpy.mlx.mailbox): order, wake-ups, the GIL, closed loops."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from smgpy import _native
from smgpy.mlx.mailbox import Mailbox, Mailboxes


@pytest.fixture
def long_switch_interval() -> Iterator[None]:
    """No forced GIL switch during a test that checks who holds the GIL."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_doorbell_rings_once_until_taken() -> None:
    import select

    bell = _native.Doorbell()
    assert not select.select([bell.fileno()], [], [], 0)[0]
    bell.ring()
    bell.ring()
    assert select.select([bell.fileno()], [], [], 0)[0]
    bell.take()
    assert not select.select([bell.fileno()], [], [], 0)[0], "take clears every ring before it"
    bell.ring()
    assert select.select([bell.fileno()], [], [], 1)[0]


def test_posts_from_another_thread_arrive_in_order() -> None:
    async def main() -> list[int]:
        box = Mailboxes().for_running_loop()
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        def produce() -> None:
            for step in range(200):
                box.post([(q, {"step": step, "row": row}) for row in range(3)])

        t = threading.Thread(target=produce)
        t.start()
        seen = [await asyncio.wait_for(q.get(), 10) for _ in range(600)]
        t.join()
        assert [(o["step"], o["row"]) for o in seen] == [(s, r) for s in range(200) for r in range(3)]
        return [o["step"] for o in seen]

    assert len(asyncio.run(main())) == 600


def test_one_mailbox_per_loop() -> None:
    boxes = Mailboxes()

    async def get() -> Mailbox:
        a = boxes.for_running_loop()
        assert boxes.for_running_loop() is a
        return a

    first, second = asyncio.run(get()), asyncio.run(get())
    assert first is not second


class _Recorder:
    """Stands in for a request's queue: records what the loop delivered, and when all arrived."""

    def __init__(self, n: int) -> None:
        self.got: list[int] = []
        self.n = n
        self.all_in = asyncio.Event()

    def put_nowait(self, item: dict[str, Any]) -> None:
        self.got.append(item["i"])
        if len(self.got) == self.n:
            self.all_in.set()


def _early_deliveries(usual_way: bool, n: int = 300) -> tuple[list[int], int]:
    """Post ``n`` outputs from a thread; count those the loop delivered before the poster's next
    statement. ``usual_way``: through ``call_soon_threadsafe`` instead of the doorbell."""

    async def main() -> tuple[list[int], int]:
        box = Mailboxes().for_running_loop()
        if usual_way:
            assert box._bell is not None
            asyncio.get_running_loop().remove_reader(box._bell.fileno())
            box._bell = None
        rec = _Recorder(n)
        early = 0

        def produce() -> None:
            nonlocal early
            pause = threading.Event()
            for i in range(n):
                while len(rec.got) < i and not pause.wait(0.0002):
                    pass  # the loop delivers the previous output before the next post
                box.post([(rec, {"i": i})])  # type: ignore[list-item]
                # Only Python between the post and this check: the loop cannot deliver in between
                # unless the post let go of the GIL.
                early += len(rec.got) > i

        t = threading.Thread(target=produce)
        t.start()
        await asyncio.wait_for(rec.all_in.wait(), 30)
        t.join()
        return rec.got, early

    return asyncio.run(main())


def test_the_poster_keeps_the_gil(long_switch_interval: None) -> None:
    """A post does not let go of the GIL, so the loop it wakes cannot run first: the MLX thread goes
    on to queue its next step. ``call_soon_threadsafe`` does let go (shown, not asserted: whether the
    loop wins the race there depends on the machine)."""
    got, early = _early_deliveries(usual_way=False)
    assert got == list(range(300))
    assert early == 0, f"{early} of 300 posts were delivered before the poster went on"
    got, early_usual = _early_deliveries(usual_way=True)
    assert got == list(range(300))
    print(f"call_soon_threadsafe: {early_usual} of 300 delivered before the poster went on")


def test_posts_a_closed_loop_never_took_are_dropped() -> None:
    """What a closed loop never delivered is let go (its queues would keep the loop alive), and the
    registry drops the mailboxes of closed loops."""
    boxes = Mailboxes()

    async def make() -> Mailbox:
        return boxes.for_running_loop()

    loop = asyncio.new_event_loop()
    box = loop.run_until_complete(make())
    q: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    box.post([(q, {"x": 1})])  # the loop is not running: the batch waits
    assert len(box._batches) == 1
    loop.close()
    box.post([(q, {"x": 2})])
    assert not box._batches and q.empty()
    asyncio.run(make())
    assert loop not in boxes._by_loop


def test_a_delivery_that_raises_does_not_strand_later_outputs() -> None:
    class Broken:
        def put_nowait(self, item: dict[str, Any]) -> None:
            raise RuntimeError("a broken queue")

    async def main() -> list[BaseException]:
        errors: list[BaseException] = []
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx["exception"]))
        box = Mailboxes().for_running_loop()
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        box.post([(Broken(), {"i": 0})])  # type: ignore[list-item]
        box.post([(q, {"i": 1})])
        assert (await asyncio.wait_for(q.get(), 10))["i"] == 1
        return errors

    errors = asyncio.run(main())
    assert [str(e) for e in errors] == ["a broken queue"]


def test_closing_mailboxes_stops_watching_their_doorbells() -> None:
    """An engine shutting down closes its mailboxes from its own thread: each loop stops watching."""

    async def main() -> None:
        boxes = Mailboxes()
        box = boxes.for_running_loop()
        assert box._bell is not None
        fd = box._bell.fileno()
        t = threading.Thread(target=boxes.close)
        t.start()
        t.join()
        for _ in range(3):
            await asyncio.sleep(0)
        assert not asyncio.get_running_loop().remove_reader(fd), "the reader was removed already"
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        box.post([(q, {"x": 1})])
        assert not box._batches

    asyncio.run(main())


def test_a_loop_without_readers_is_woken_the_usual_way() -> None:
    class NoReaders(asyncio.SelectorEventLoop):
        def add_reader(self, *args: Any, **kwargs: Any) -> None:
            raise NotImplementedError

    loop = NoReaders()
    try:

        async def main() -> list[int]:
            box = Mailboxes().for_running_loop()
            q: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
            t = threading.Thread(target=lambda: [box.post([(q, {"i": i})]) for i in range(50)])
            t.start()
            got = [(await asyncio.wait_for(q.get(), 10))["i"] for _ in range(50)]
            t.join()
            return got

        assert loop.run_until_complete(main()) == list(range(50))
    finally:
        loop.close()
