"""The MLX thread: continuous batching on top of mlx-lm's ``BatchGenerator``.

One thread owns every MLX call (model, caches, sampling). The asyncio side talks to it through
a thread-safe inbox (new requests, aborts) and gets results back into each request's
``asyncio.Queue``: the outputs of one decode step travel together, in one post to each event
loop's :class:`~smgpy.mlx.mailbox.Mailbox`, so a batch of eight wakes the loop once, not eight
times, and the MLX thread keeps the GIL to queue the next step. Between two decode steps the
thread drains the inbox, drops aborted sequences and admits waiting ones, so a request joins or
leaves the running batch within one step.

mlx-lm's ``BatchGenerator`` already pipelines: each step queues the next forward pass
(``mx.async_eval``) before it reads the tokens of the current one, so the Python work done here
between steps overlaps with the model's compute. Its decode step is replaced by the lean one of
``mlx_lm_api.install_lean_step``: only sequences that report logprobs are normalised.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx

from smgpy.mlx import mlx_lm_api
from smgpy.mlx.detokenize import TextDecoder
from smgpy.mlx.mailbox import Mailbox
from smgpy.mlx.prefix_cache import PrefixCache
from smgpy.mlx.rewrite import Rewrites, rewrite_model
from smgpy.mlx.sampling import SamplingParams, make_logits_processors, make_sampler

__all__ = ["Scheduler", "Sequence"]

log = logging.getLogger("smgpy.mlx")

# How long an idle MLX thread waits for more arrivals before it starts a prefill (seconds).
_COALESCE_S = 0.01


@dataclass(frozen=True, eq=False)
class Outlet:
    """Where one request's outputs go: an asyncio queue and the mailbox of the loop that owns it."""

    mailbox: Mailbox
    queue: asyncio.Queue[dict[str, Any]]


@dataclass(eq=False)
class Sequence:
    """One sample of one request, as the MLX thread sees it."""

    rid: str
    index: int
    tokens: list[int]
    params: SamplingParams
    max_tokens: int
    stop_ids: frozenset[int]
    decoder: TextDecoder
    outlet: Outlet
    top_logprobs: int | None  # None: no logprobs asked
    with_index: bool
    matcher: Any = None  # smgpy._native.GrammarMatcher when the request asked for structured output
    generated: int = 0
    cached_tokens: int = 0
    uid: int = -1
    done: bool = False
    text_tokens: list[int] = field(default_factory=list)


class Scheduler:
    """Runs on the MLX thread. Public methods other than ``run`` are called from any thread."""

    def __init__(
        self,
        load: Callable[[], tuple[Any, Any]],
        *,
        max_running: int,
        prefix_cache_bytes: int,
        prefill_step_size: int = 512,
        graph_rewrites: bool = False,
    ) -> None:
        self._load = load
        self._graph_rewrites = graph_rewrites
        self.rewrites: Rewrites | None = None
        self.max_running = max_running
        self._prefill_step = prefill_step_size
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._waiting: deque[list[Sequence]] = deque()
        self._by_uid: dict[int, Sequence] = {}
        self._cache = PrefixCache(prefix_cache_bytes)
        self._lock = threading.Lock()
        self.pending = 0  # submitted, not admitted yet (guarded by _lock)
        self.running = 0
        # Prompt tokens run through the model so far (prefix-cache hits and shared n-prefills excluded).
        self.prefilled_tokens = 0
        self.ready = threading.Event()
        self.load_error: BaseException | None = None
        self.model: Any = None
        self.tokenizer: Any = None
        self._gen: Any = None  # mlx-lm's BatchGenerator (untyped)
        self._stream: Any = None
        self._outbox: list[tuple[Outlet, dict[str, Any]]] = []
        # The uids of running sequences that report logprobs: the decode step normalises only these.
        self._wants_logprobs: set[int] = set()
        self.lean_step = False
        self.stopped = threading.Event()

    # ----- called from the asyncio side -----

    def submit(self, group: list[Sequence]) -> None:
        with self._lock:
            self.pending += 1
        self._inbox.put(("add", group))

    def abort(self, rid: str) -> None:
        self._inbox.put(("abort", rid))

    def shutdown(self) -> None:
        self._inbox.put(("stop", None))

    def load_info(self) -> dict[str, Any]:
        """Load in SGLang's ``/v1/loads`` names (what routers read), plus the prefix cache's state."""
        by_uid = list(self._by_uid.values())  # a snapshot: the MLX thread may change the dict
        used = sum(len(s.tokens) + s.generated for s in by_uid)
        cache = self._cache
        return {
            "num_running_reqs": self.running,
            "num_waiting_reqs": self.pending,
            "num_used_tokens": used,
            "max_running_requests": self.max_running,
            "cache_hit_rate": cache.hits / cache.queries if cache.queries else 0.0,
            "prefix_cache_bytes": cache.nbytes,
            "prefix_cache_entries": len(cache),
            "prefilled_tokens": self.prefilled_tokens,
        }

    @property
    def prefix_cache_bytes(self) -> int:
        """The prefix cache's byte budget."""
        return self._cache.max_bytes

    def flush_cache(self) -> None:
        """Drop the prefix cache (asynchronously, on the MLX thread)."""
        self._inbox.put(("flush", None))

    # ----- the MLX thread -----

    def run(self) -> None:
        try:
            self.model, self.tokenizer = self._load()
            if self._graph_rewrites:
                self.rewrites = rewrite_model(self.model)
                log.info("model rewrites (exact, CPU only): %s", self.rewrites.summary())
            self._stream = mx.default_stream(mx.default_device())
            self._gen = self._new_generator()
        except BaseException as e:  # reported to from_pretrained, which re-raises it
            self.load_error = e
            self.ready.set()
            self.stopped.set()
            return
        self.ready.set()
        self._serve()
        self._release()
        self.stopped.set()
        # Park instead of returning. When an OS thread that ran MLX ends, MLX's thread-local
        # compile cache is destroyed and must take the GIL to drop Python references; if that
        # races with interpreter shutdown, CPython ends the thread mid-destructor and the whole
        # process aborts ("terminate called without an active exception"). A parked daemon
        # thread is simply discarded at exit.
        threading.Event().wait()

    def _serve(self) -> None:
        """The scheduling loop, until shutdown."""
        while True:
            self._flush()
            idle = not self._by_uid and not self._waiting
            if not self._drain(block=idle):
                break
            self._admit()
            if not self._by_uid:
                continue
            if self.rewrites is not None:
                # Positions reached this step: a bound for the rope tables (see rewrite.py).
                self.rewrites.reserve_positions(max(len(s.tokens) + s.generated for s in self._by_uid.values()) + 2)
            try:
                _, responses = self._gen.next()
            except Exception as e:  # a failed step must not kill the thread: fail the batch, go on
                log.exception("MLX decode step failed")
                self._fail_all(f"generation failed: {e}")
                continue
            for r in responses:
                self._on_token(r)

    def _release(self) -> None:
        """Drop the model, the batch and the prefix cache, on the thread that made them.

        The thread stays parked afterwards, so nothing else would ever free that memory.
        Requests still running or waiting end with an abort, so no consumer waits forever.
        """
        gone = {"type": "abort", "message": "the engine shut down"}
        for seq in [*self._by_uid.values(), *(s for group in self._waiting for s in group)]:
            self._finish(seq, gone, "")
        self._flush()
        self._by_uid.clear()
        self._waiting.clear()
        self._gen.close()
        self._gen = None
        self._cache.clear()
        self.model = None
        gc.collect()
        mx.synchronize(self._stream)

    def _new_generator(self) -> Any:
        gen = mlx_lm_api.new_batch_generator(
            self.model,
            completion_batch_size=self.max_running,
            prefill_batch_size=min(self.max_running, 8),
            prefill_step_size=self._prefill_step,
            stream=self._stream,
        )
        self._wants_logprobs.clear()
        self.lean_step = mlx_lm_api.install_lean_step(gen, self._wants_logprobs)
        if not self.lean_step:
            log.info("mlx-lm %s: its batch differs from what smgpy knows; stock decode step", mlx_lm_api.version())
        return gen

    def _drain(self, block: bool) -> bool:
        """Apply inbox commands; return False on shutdown.

        When the thread was idle, it lingers ``_COALESCE_S`` after the first request so that a
        burst of clients is prefilled as one batch instead of one prompt per decode step.
        """
        linger: float | None = None
        while True:
            try:
                if block:
                    cmd, arg = self._inbox.get()
                    block = False
                    linger = time.monotonic() + _COALESCE_S
                elif linger is not None:
                    cmd, arg = self._inbox.get(timeout=max(0.0, linger - time.monotonic()))
                else:
                    cmd, arg = self._inbox.get_nowait()
            except queue.Empty:
                return True
            if cmd == "add":
                self._waiting.append(arg)
            elif cmd == "abort":
                self._abort(arg)
            elif cmd == "flush":
                self._cache.clear()
            else:
                return False

    def _abort(self, rid: str) -> None:
        for group in [g for g in self._waiting if g[0].rid == rid]:
            self._waiting.remove(group)
            with self._lock:
                self.pending -= 1
            for seq in group:
                self._finish(seq, {"type": "abort"}, "")
        uids = [uid for uid, seq in self._by_uid.items() if seq.rid == rid]
        if uids and self._gen is not None:
            self._gen.remove(uids)
        for uid in uids:
            seq = self._by_uid.pop(uid)
            self._wants_logprobs.discard(uid)
            self.running -= 1
            self._finish(seq, {"type": "abort"}, "")

    def _fail_all(self, message: str) -> None:
        for seq in list(self._by_uid.values()):
            self._finish(seq, {"type": "abort", "message": message}, "")
        self._by_uid.clear()
        self.running = 0
        self._gen = self._new_generator()

    def _admit(self) -> None:
        while self._waiting and (not self._by_uid or self.running + len(self._waiting[0]) <= self.max_running):
            group = self._waiting.popleft()
            with self._lock:
                self.pending -= 1
            try:
                self._insert(group)
            except Exception as e:
                log.exception("could not start request %s", group[0].rid)
                for seq in group:
                    self._finish(seq, {"type": "abort", "message": f"could not start: {e}"}, "")

    def _insert(self, group: list[Sequence]) -> None:
        assert self._gen is not None
        tokens = group[0].tokens
        cache, cached = self._cache.fetch(tokens)
        if len(group) > 1:
            # n > 1: run the prompt once, then give each sample its own copy of the cache.
            with mx.stream(self._stream):
                cache = cache or mlx_lm_api.make_prompt_cache(self.model)
                rest = tokens[cached:-1]
                for i in range(0, len(rest), self._prefill_step):
                    self.model(mx.array(rest[i : i + self._prefill_step])[None], cache=cache)
                    mx.eval([c.state for c in cache])
            caches: list[Any] = [cache] + [copy.deepcopy(cache) for _ in group[1:]]
            prompts = [tokens[-1:] for _ in group]
            known = [tokens[:-1] for _ in group]
            self.prefilled_tokens += len(rest) + len(group)
        else:
            caches = [cache]  # None: BatchGenerator makes a fresh one
            prompts = [tokens[cached:]]
            known = [tokens[:cached]]
            self.prefilled_tokens += len(tokens) - cached
        end_ids = sorted(group[0].stop_ids)
        uids = mlx_lm_api.insert(
            self._gen,
            prompts,
            max_tokens=[s.max_tokens for s in group],
            caches=caches,
            all_tokens=known,
            samplers=[make_sampler(s.params, s.index) for s in group],
            logits_processors=[make_logits_processors(s.params, len(tokens), end_ids, s.matcher) for s in group],
            stop_token_ids=[end_ids for _ in group],
        )
        for uid, seq in zip(uids, group, strict=True):
            seq.uid = uid
            seq.cached_tokens = cached
            self._by_uid[uid] = seq
            if seq.top_logprobs is not None:
                self._wants_logprobs.add(uid)
        self.running += len(group)

    def _on_token(self, r: Any) -> None:
        seq = self._by_uid.get(r.uid)
        if seq is None:
            return
        token = int(r.token)
        seq.generated += 1
        finish: dict[str, Any] | None = None
        if r.finish_reason == "stop":
            matched = token if token in seq.params.stop_token_ids else None
            finish = {"type": "stop", "matched": matched}
        elif r.finish_reason == "length":
            finish = {"type": "length"}
        # A matched stop token id is reported, not shown; EOS and padding are dropped by the decoder.
        delta = "" if finish and finish.get("matched") is not None else seq.decoder.push(token)
        # A row that asks for logprobs always has them; the guard keeps a surprise from ending the thread.
        wants = seq.top_logprobs is not None and r.logprobs is not None
        logprobs = self._logprobs(seq, token, r.logprobs) if wants else None
        if finish is None:
            self._emit(seq, self._output(seq, delta, [token], None, logprobs))
            return
        del self._by_uid[r.uid]
        self._wants_logprobs.discard(r.uid)
        self.running -= 1
        if r.prompt_cache is not None and r.all_tokens:
            self._cache.insert(list(r.all_tokens), r.prompt_cache)
        delta += seq.decoder.flush()
        seq.done = True
        self._emit(seq, self._output(seq, delta, [token], finish, logprobs))

    def _logprobs(self, seq: Sequence, token: int, row: Any) -> dict[str, Any]:
        decode = self.tokenizer.decode
        out: dict[str, Any] = {"output_token_logprobs": [(float(row[token].item()), token, decode([token]))]}
        k = seq.top_logprobs or 0
        if k > 0:
            k = min(k, row.shape[-1])
            idx = mx.argpartition(-row, kth=k - 1)[:k]
            vals = row[idx]
            order = mx.argsort(-vals)
            ids: list[int] = idx[order].tolist()  # type: ignore[assignment]
            lps: list[float] = vals[order].tolist()
            out["output_top_logprobs"] = [
                [(float(lp), int(t), decode([int(t)])) for lp, t in zip(lps, ids, strict=True)]
            ]
        return out

    def _output(
        self,
        seq: Sequence,
        delta: str,
        ids: list[int],
        finish: dict[str, Any] | None,
        logprobs: dict[str, Any] | None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "prompt_tokens": len(seq.tokens),
            "completion_tokens": seq.generated,
            "cached_tokens": seq.cached_tokens,
            "finish_reason": finish,
        }
        if logprobs:
            meta.update(logprobs)
        out: dict[str, Any] = {"delta": delta, "output_ids": ids, "meta_info": meta}
        if seq.with_index:
            out["index"] = seq.index
        return out

    def _finish(self, seq: Sequence, finish: dict[str, Any], delta: str) -> None:
        if not seq.done:
            seq.done = True
            self._emit(seq, self._output(seq, delta, [], finish, None))

    def _emit(self, seq: Sequence, item: dict[str, Any]) -> None:
        self._outbox.append((seq.outlet, item))

    def _flush(self) -> None:
        """Hand the outputs gathered since the last flush to their loops, one wake-up per loop."""
        if not self._outbox:
            return
        by_loop: dict[Mailbox, list[tuple[asyncio.Queue[dict[str, Any]], dict[str, Any]]]] = {}
        for outlet, item in self._outbox:
            by_loop.setdefault(outlet.mailbox, []).append((outlet.queue, item))
        self._outbox.clear()
        for mailbox, items in by_loop.items():
            mailbox.post(items)
