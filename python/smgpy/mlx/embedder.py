"""``MLXEmbedder``: an embedding model served through smgpy's engine protocol (``embed_request``).

One thread owns the model (MLX's streams belong to the thread that made them). Requests that
arrive while it computes wait in a bounded queue; when it is free it takes every waiting request
(up to ``max_batch`` inputs, a request with more goes alone), sorts their inputs by length and
cuts them into padded forward passes (:func:`plan_passes`). So concurrent requests share forward
passes without any request waiting for a timer. ``stats`` counts what the thread did, for tests and
``/v1/loads``.

Token ids arrive without special tokens (the server tokenizes with :attr:`embedding_tokenizer` and
checks :attr:`embedding_max_tokens`); texts sent by a caller that bypasses the server are tokenized
here and checked the same way.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import queue
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smgpy.engine import EngineOverloaded, EngineRequestError

__all__ = ["EmbeddingServing", "MLXEmbedder", "is_embedding_model", "plan_passes"]

log = logging.getLogger("smgpy.mlx")


def is_embedding_model(name: str) -> bool:
    """Whether ``name`` (a ``--model`` value) is a sentence-embedding model smgpy serves on
    ``/v1/embeddings``: all-MiniLM-L6-v2 by name, or a directory that
    :func:`smgpy.mlx.sentence.is_embedding_model_dir` recognises."""
    from smgpy.mlx.embedding_models import is_known_name
    from smgpy.mlx.sentence import is_embedding_model_dir

    return is_known_name(name) or is_embedding_model_dir(Path(name).expanduser())


def plan_passes(widths: list[int], max_batch: int, max_tokens: int) -> list[range]:
    """Cut inputs sorted by padded width (ascending) into forward passes, as ranges of their indices.

    Every input of a pass is padded to the pass's last (widest) one, so a pass ends where the next
    input would make it hold more than ``max_batch`` inputs or more than ``max_tokens`` padded tokens
    (which bounds one pass's activations: attention's are inputs x width x width per head), or would
    double the width of a pass that already holds 8 inputs (past that, the padding wasted costs more
    than another pass). On 100 texts of 1 to 256 tokens (sentence-transformers' test set) a pass per
    64 inputs computed 11,328 padded tokens for 5,872 real ones; these cuts compute 6,671.
    """
    passes: list[range] = []
    start = 0
    for i in range(1, len(widths)):
        count, w = i - start + 1, widths[i]  # the pass's size and width with input i in it
        if count > max_batch or count * w > max_tokens or (count > 8 and w > 2 * widths[start]):
            passes.append(range(start, i))
            start = i
    if widths:
        passes.append(range(start, len(widths)))
    return passes


@dataclass
class _Job:
    ids: list[list[int]]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    out: list[Any] = field(default_factory=list)


class MLXEmbedder:
    """Serve a sentence-embedding model directory (see :mod:`smgpy.mlx.sentence`).

    ``max_batch``: inputs in one forward pass (and the most requests' inputs grouped at once);
    ``max_batch_tokens``: padded tokens in one forward pass (an input longer than that runs alone);
    ``max_waiting``: inputs queued before new requests are refused with 429.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        model_name: str | None = None,
        max_batch: int = 64,
        max_batch_tokens: int = 8192,
        max_waiting: int = 8192,
    ) -> None:
        if max_batch < 1 or max_batch_tokens < 1 or max_waiting < 1:
            raise ValueError("max_batch, max_batch_tokens and max_waiting must be at least 1")
        self.max_batch = max_batch
        self.max_batch_tokens = max_batch_tokens
        self.max_waiting = max_waiting
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._waiting = 0
        self._lock = threading.Lock()
        self.stats = {
            "requests": 0,
            "inputs": 0,
            "forward_passes": 0,
            "largest_pass": 0,
            "most_requests_grouped": 0,
            "cancelled": 0,
        }
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._error: BaseException | None = None
        self._model: Any = None
        self._thread = threading.Thread(target=self._run, args=(Path(path),), name="smgpy-embed", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        m: Any = self._model
        self.model_path = str(path)
        self.model_name = model_name or m.model_name
        self.embedding_model_name = self.model_name
        self.embedding_dimensions: int = m.dimensions
        self.embedding_max_tokens: int = m.max_input_tokens
        self.embedding_tokenizer = m.tokenizer
        self.matryoshka_dimensions: list[int] = []
        self.max_seq_length: int = m.max_seq_length
        # What `smgpy serve` reports of any engine; an embedding model has no sampling.
        self.context_length: int = m.max_seq_length
        self.default_sampling: dict[str, Any] = {}

    @classmethod
    def from_pretrained(
        cls, name: str, *, model_name: str | None = None, max_batch: int = 64, **_chat_options: Any
    ) -> MLXEmbedder:
        """Load ``name`` (a directory, or all-MiniLM-L6-v2: see :mod:`smgpy.mlx.embedding_models`).
        Options that only mean something to a chat engine (``dtype``, ``max_running``, ...) are
        accepted and ignored, so ``smgpy serve`` passes its usual ones."""
        from smgpy.mlx.embedding_models import MINILM, embedding_model_path, is_known_name

        if model_name is None and is_known_name(name):
            model_name = MINILM
        return cls(embedding_model_path(name), model_name=model_name, max_batch=max_batch)

    # -- the engine protocol -------------------------------------------------------------------

    async def embed_request(self, obj: Any) -> Any:
        """Vectors of ``obj.input_ids`` (or ``obj.text``), one row per input: a float32 NumPy array."""
        ids = obj.input_ids
        if ids is None:
            texts = list(obj.text or [])
            ids = await asyncio.to_thread(lambda: [self._model.encode_text(t) for t in texts])
        for i, one in enumerate(ids):
            if not one:
                raise EngineRequestError(f"input[{i}] is empty")
            if len(one) > self.embedding_max_tokens:
                raise EngineRequestError(
                    f"input[{i}] has {len(one)} tokens, more than the {self.embedding_max_tokens} that "
                    f"{self.model_name} reads in one input"
                )
        with self._lock:
            if self._waiting + len(ids) > self.max_waiting:
                raise EngineOverloaded(f"{self._waiting} inputs are waiting to be embedded; retry later")
            self._waiting += len(ids)
        loop = asyncio.get_running_loop()
        job = _Job(ids=[list(x) for x in ids], loop=loop, future=loop.create_future())
        self._queue.put(job)
        return await job.future

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        """Refused: this engine embeds only (a chat model goes beside it, see ``EmbeddingServing``)."""
        raise EngineRequestError(
            f"this server serves the embedding model {self.model_name} only: it answers /v1/embeddings; start "
            "smgpy with --model CHAT_MODEL --embedding-model ... to generate text too"
        )
        yield {}  # pragma: no cover - makes this an async generator

    def abort_request(self, rid: str) -> None:
        """Nothing to abort: an embedding request runs to its end in one pass."""

    def get_load(self) -> dict[str, Any]:
        return {"num_running_reqs": 0, "num_waiting_reqs": self._waiting, "embedding": dict(self.stats)}

    def shutdown(self) -> None:
        """Stop the model thread (waiting requests fail)."""
        self._queue.put(None)
        self._stopped.wait(30)

    # -- the model thread -----------------------------------------------------------------------

    def _run(self, path: Path) -> None:
        from smgpy.mlx.owner import own_mlx_thread

        def load() -> None:
            from smgpy.mlx.sentence import SentenceModel

            self._model = SentenceModel(path)

        def failed(error: BaseException) -> None:
            self._error = error  # __init__ re-raises it

        own_mlx_thread(load, self._serve_all, failed=failed, ready=self._ready, stopped=self._stopped)

    def _serve_all(self, stream: Any) -> None:
        """Take every waiting request (up to ``max_batch`` inputs) whenever free, until shutdown;
        then free the model's arrays and let the stream finish all it queued."""
        import mlx.core as mx

        while True:
            first = self._queue.get()
            if first is None:
                break
            jobs = [first]
            count = len(first.ids)
            stop = False
            while count < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                jobs.append(nxt)
                count += len(nxt.ids)
            self._serve(jobs)
            if stop:
                break
        self._fail_waiting()
        self._model = None
        gc.collect()
        mx.synchronize(stream)

    def _serve(self, jobs: list[_Job]) -> None:
        import numpy as np

        # A request whose client hung up was cancelled on the loop: its inputs are not computed.
        # (Reading `done()` from this thread is a plain flag read; a cancel that lands after it
        # only wastes this one pass.)
        gone = [job for job in jobs if job.future.done()]
        if gone:
            jobs = [job for job in jobs if not job.future.done()]
            self.stats["cancelled"] += len(gone)
            with self._lock:
                self._waiting -= sum(len(job.ids) for job in gone)
        order = sorted(((len(ids), j, i) for j, job in enumerate(jobs) for i, ids in enumerate(job.ids)))
        results: list[list[Any]] = [[None] * len(job.ids) for job in jobs]
        try:
            specials = self._model.max_seq_length - self._model.max_input_tokens
            widths = [n + specials for n, _, _ in order]
            for cut in plan_passes(widths, self.max_batch, self.max_batch_tokens):
                part = order[cut.start : cut.stop]
                vectors = self._model.embed([jobs[j].ids[i] for _, j, i in part])
                for row, (_, j, i) in zip(vectors, part, strict=True):
                    results[j][i] = row
                self.stats["forward_passes"] += 1
                self.stats["largest_pass"] = max(self.stats["largest_pass"], len(part))
            self.stats["most_requests_grouped"] = max(self.stats["most_requests_grouped"], len(jobs))
            self.stats["requests"] += len(jobs)
            self.stats["inputs"] += len(order)
            for job, rows in zip(jobs, results, strict=True):
                _answer(job, np.stack(rows), None)
        except Exception as e:  # one bad pass fails its requests, not the thread
            log.exception("embedding forward pass failed")
            for job in jobs:
                _answer(job, None, e)
        finally:
            with self._lock:
                self._waiting -= len(order)

    def _fail_waiting(self) -> None:
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                _answer(job, None, RuntimeError("the embedding model stopped"))


def _answer(job: _Job, value: Any, error: BaseException | None) -> None:
    def settle() -> None:
        if job.future.done():  # the request was cancelled meanwhile
            return
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(value)

    try:
        job.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed: nobody waits
        pass


class EmbeddingServing:
    """A chat engine with an embedding model beside it (``smgpy serve --embedding-model``): text
    requests go to ``chat``, ``/v1/embeddings`` to ``embedder``; every other attribute is the chat
    engine's, so it serves as it would alone."""

    def __init__(self, chat: Any, embedder: MLXEmbedder) -> None:
        self.chat = chat
        self.embedder = embedder
        self.embed_request = embedder.embed_request
        self.embedding_model_name = embedder.embedding_model_name
        self.embedding_dimensions = embedder.embedding_dimensions
        self.embedding_max_tokens = embedder.embedding_max_tokens
        self.embedding_tokenizer = embedder.embedding_tokenizer
        self.matryoshka_dimensions = embedder.matryoshka_dimensions

    def __getattr__(self, name: str) -> Any:
        return getattr(self.chat, name)

    def shutdown(self) -> None:
        self.embedder.shutdown()
        self.chat.shutdown()
