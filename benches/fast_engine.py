"""Engines without a model, to isolate the serving cost: ``FastEngine`` yields tokens as fast as it
can; ``SteppedEngine`` delivers them in steps from a thread, the way a batching model engine does."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def token_output(i: int, n: int) -> dict[str, Any]:
    """Output ``i`` of ``n``: the text " tok", finished by length at the last one."""
    return {
        "delta": " tok",
        "output_ids": [i],
        "meta_info": {
            "prompt_tokens": 10,
            "completion_tokens": i + 1,
            "cached_tokens": 0,
            "finish_reason": {"type": "length"} if i == n - 1 else None,
        },
    }


class FastEngine:
    model_name = "fast"
    chat_template = CHATML

    def __init__(self, tokens: int = 2500) -> None:
        self.tokens = tokens

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        n = obj.sampling_params.get("max_new_tokens") or self.tokens
        for i in range(n):
            yield token_output(i, n)

    def abort_request(self, rid: str) -> None:
        pass


class SteppedEngine:
    """Tokens come in steps, as from a model: one thread makes a token for every running request
    each ``step_s`` seconds and hands the whole step to the event loop with one
    ``call_soon_threadsafe``, where each request's generator awaits its own queue. That is how
    smgpy's MLX engine (and most batching engines) deliver tokens, so each stream gets one token
    per loop turn instead of a burst."""

    model_name = "stepped"
    chat_template = CHATML

    def __init__(self, tokens: int = 2500, step_s: float = 0.002) -> None:
        self.tokens = tokens
        self.step_s = step_s
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="stepped-engine", daemon=True)
        self._thread.start()

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        n = obj.sampling_params.get("max_new_tokens") or self.tokens
        q: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        rid = getattr(obj, "rid", "") or str(id(q))
        self._inbox.put(("add", (rid, asyncio.get_running_loop(), q, n)))
        done = False
        try:
            while not done:
                out = await q.get()
                done = out["meta_info"]["finish_reason"] is not None
                yield out
        finally:
            if not done:
                self.abort_request(rid)

    def abort_request(self, rid: str) -> None:
        self._inbox.put(("abort", rid))

    def _run(self) -> None:
        running: dict[str, list[Any]] = {}  # rid -> [loop, queue, tokens, produced]
        while True:
            if not running:
                cmd, arg = self._inbox.get()
                self._apply(running, cmd, arg)
            while not self._inbox.empty():
                cmd, arg = self._inbox.get_nowait()
                self._apply(running, cmd, arg)
            time.sleep(self.step_s)
            by_loop: dict[Any, list[tuple[Any, dict[str, Any]]]] = {}
            for rid, r in list(running.items()):
                loop, q, n, i = r
                r[3] = i + 1
                by_loop.setdefault(loop, []).append((q, token_output(i, n)))
                if i == n - 1:
                    del running[rid]
            for loop, items in by_loop.items():
                loop.call_soon_threadsafe(_deliver, items)

    @staticmethod
    def _apply(running: dict[str, list[Any]], cmd: str, arg: Any) -> None:
        if cmd == "add":
            rid, loop, q, n = arg
            running[rid] = [loop, q, n, 0]
        else:
            running.pop(arg, None)


def _deliver(items: list[tuple[Any, dict[str, Any]]]) -> None:
    for q, out in items:
        q.put_nowait(out)


ENGINES = {"fast": FastEngine, "stepped": SteppedEngine}


def make_engine(kind: str, tokens: int = 2500) -> FastEngine | SteppedEngine:
    """An engine by name (``fast`` or ``stepped``), for the bench servers."""
    return ENGINES[kind](tokens)
