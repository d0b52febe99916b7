"""``serve_oai``: serve a Python engine over the OpenAI / Anthropic HTTP APIs.

The HTTP server (axum, in Rust) runs on its own threads inside this process. Each request is
handed to the asyncio loop through a socket the loop watches; one pump task per request drains
``engine.generate_request(obj)`` and pushes every output into a Rust sink with a synchronous
call. When the client goes away (or a stop string matches) the pump task is cancelled, the
engine's generator is closed, and ``engine.abort_request(rid)`` is called.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import dataclasses
import functools
import inspect
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from smgpy import _native
from smgpy.engine import (
    ContextLengthExceeded,
    EmbeddingReqInput,
    EngineOverloaded,
    EngineRequestError,
    GenerateReqInput,
)
from smgpy.options import ServerOptions

__all__ = ["serve_oai", "serve_oai_async"]

logger = logging.getLogger("smgpy")

# push()/flush() return codes of the Rust sink.
_OK, _FULL, _CLOSED = 0, 1, 2
# Seconds between heartbeats of the event loop (see `engine_stall_timeout`).
_HEARTBEAT_S = 1.0
# Request fields that only smgpy's own GenerateReqInput declares.
_CACHE_HINTS = ("prompt_cache_key", "cache_breakpoints")


class _Pump:
    """Runs engine requests on the asyncio loop on behalf of the Rust server."""

    def __init__(self, engine: Any, native: _native.Server, request_class: type | None) -> None:
        self._engine = engine
        self._native = native
        self._request_class = request_class
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # Pumps waiting for room in their request's full output channel (a slow client).
        self._room: dict[str, asyncio.Future[None]] = {}
        self._embeds_on = callable(getattr(engine, "embed_request", None))
        self._embeds: dict[str, asyncio.Task[None]] = {}

    def on_wake(self) -> None:
        starts, cancels, ready = self._native.take_work()
        loop = asyncio.get_running_loop()
        for rid, fields, sink in starts:
            if rid in self._tasks:
                # Request ids are the server's own and unique; a repeat must never reach (and
                # then cancel or wake) the request already running under that id.
                logger.error("refused a second engine request with the running id %r", rid)
                sink.fail(_native.FailKind.INTERNAL, "the server could not start this request; retry it")
                continue
            self._tasks[rid] = loop.create_task(self._run(rid, fields, sink), name=f"smgpy-{rid}")
        for rid in cancels:
            task = self._tasks.get(rid) or self._embeds.get(rid)
            if task is not None:
                task.cancel()
        for rid in ready:
            room = self._room.get(rid)
            if room is not None and not room.done():
                room.set_result(None)
        if self._embeds_on:
            for rid, fields, esink in self._native.take_embeds():
                task = loop.create_task(self._embed(rid, fields, esink), name=f"smgpy-{rid}")
                self._embeds[rid] = task
                task.add_done_callback(functools.partial(self._embed_done, rid))

    def _embed_done(self, rid: str, _task: asyncio.Task[None]) -> None:
        self._embeds.pop(rid, None)

    def cancel_all(self) -> list[asyncio.Task[None]]:
        tasks = [*self._tasks.values(), *self._embeds.values()]
        for t in tasks:
            t.cancel()
        return tasks

    def _build(self, rid: str, fields: dict[str, Any]) -> Any:
        if self._request_class is None:
            return GenerateReqInput(rid=rid, **fields)
        # Cache hints are smgpy's, not sglang's: set them only where the class takes them.
        hints = {k: fields.pop(k) for k in _CACHE_HINTS if k in fields}
        obj = self._request_class(**fields)
        obj.rid = rid  # tokenspeed requires rid to be set after construction
        for k, v in hints.items():
            with contextlib.suppress(AttributeError):
                setattr(obj, k, v)
        return obj

    async def _run(self, rid: str, fields: dict[str, Any], sink: _native.OutputSink) -> None:
        agen: Any = None
        finished = False
        exhausted = False  # an async generator that ran to its end: nothing to close
        try:
            generate = getattr(self._engine, "generate_request", None)
            if generate is None:
                raise EngineRequestError(
                    "this server serves an embedding model only: it answers /v1/embeddings, not text generation"
                )
            agen = generate(self._build(rid, fields))
            if not hasattr(agen, "__anext__") and inspect.isawaitable(agen):
                agen = await agen
            push = sink.push
            async for out in agen:
                code = push(out)
                if not code:  # _OK, the common case
                    continue
                if code == _FULL:  # slow client: sleep until the HTTP side has room
                    code = await self._drain(rid, sink)
                if code == _CLOSED:
                    break
            else:
                finished = True
                exhausted = inspect.isasyncgen(agen)  # a generator that ended needs no aclose
                # The last outputs may still be held for the end of this loop turn: send them.
                if sink.flush() == _FULL:
                    await self._drain(rid, sink)
        except asyncio.CancelledError:
            pass
        except ContextLengthExceeded as e:
            finished = True
            sink.fail(_native.FailKind.CONTEXT_LENGTH, str(e))
        except EngineRequestError as e:
            finished = True
            sink.fail(_native.FailKind.BAD_REQUEST, str(e))
        except EngineOverloaded as e:
            finished = True
            sink.fail(_native.FailKind.OVERLOADED, str(e) or "the engine's queue is full; retry later")
        except GeneratorExit:  # this coroutine itself is being closed
            raise
        except BaseException:
            # The engine failed on this request (any exception, `BaseException` subclasses of its
            # own included): log it, keep serving the others, and tell the client only that it
            # failed (exception text can hold anything). Nothing is left for asyncio to report as
            # "never retrieved". A real Ctrl-C / SIGTERM does not arrive here: `serve_oai` turns it
            # into a cancellation, caught above.
            finished = True
            logger.exception("engine failed on request %r", rid)
            sink.fail(_native.FailKind.INTERNAL, f"the engine failed on request {rid} (the server log has the details)")
        finally:
            self._tasks.pop(rid, None)
            if not finished:
                self._abort(rid)
            if agen is not None and not exhausted and hasattr(agen, "aclose"):
                with contextlib.suppress(BaseException):
                    await agen.aclose()

    async def _embed(self, rid: str, fields: dict[str, Any], sink: _native.EmbedSink) -> None:
        """Run one embedding request and hand its vectors to the HTTP side as one f32 buffer."""
        try:
            result = await self._engine.embed_request(EmbeddingReqInput(rid=rid, **fields))
            data, rows, dim, tokens = _vector_bytes(result)
            sink.done(data, rows, dim, tokens)
        except asyncio.CancelledError:
            sink.fail(_native.FailKind.INTERNAL, "the server stopped before this request was answered; retry it")
        except ContextLengthExceeded as e:
            sink.fail(_native.FailKind.CONTEXT_LENGTH, str(e))
        except EngineRequestError as e:
            sink.fail(_native.FailKind.BAD_REQUEST, str(e))
        except EngineOverloaded as e:
            sink.fail(_native.FailKind.OVERLOADED, str(e) or "the engine's queue is full; retry later")
        except Exception:
            logger.exception("engine failed on embedding request %r", rid)
            sink.fail(_native.FailKind.INTERNAL, f"the engine failed on request {rid} (the server log has the details)")

    async def _drain(self, rid: str, sink: _native.OutputSink) -> int:
        """Hand every output the sink holds to the HTTP side, sleeping while its channel is full."""
        code = sink.flush()
        while code == _FULL:
            room = asyncio.get_running_loop().create_future()
            self._room[rid] = room
            try:
                sink.wait_for_room()
                await room
            finally:
                self._room.pop(rid, None)
            code = sink.flush()
        return code

    def _abort(self, rid: str) -> None:
        try:
            self._engine.abort_request(rid)
        except Exception:
            logger.exception("engine.abort_request(%r) failed", rid)


def _vector_bytes(result: Any) -> tuple[bytes, int, int, int | None]:
    """``embed_request``'s answer as ``(little-endian f32 bytes, rows, dim, prompt_tokens)``: a 2-D
    array is converted in one call, a list row by row (see :mod:`smgpy.engine`)."""
    shape = getattr(result, "shape", None)
    if shape is not None and hasattr(result, "astype") and hasattr(result, "tobytes"):
        if len(shape) != 2:
            raise ValueError(f"embed_request returned an array of shape {tuple(shape)}; expected (inputs, dim)")
        return bytes(result.astype("<f4").tobytes()), int(shape[0]), int(shape[1]), None
    buf = array.array("f")
    rows, dim, tokens = 0, -1, None
    for item in result:
        if isinstance(item, dict):
            meta = item.get("meta_info") or {}
            if "prompt_tokens" in meta:
                tokens = (tokens or 0) + int(meta["prompt_tokens"])
            item = item["embedding"]
        before = len(buf)
        if hasattr(item, "astype") and hasattr(item, "tobytes"):
            buf.frombytes(item.astype("=f4").tobytes())
        else:
            buf.extend(float(x) for x in item)
        width = len(buf) - before
        if dim not in (-1, width):
            raise ValueError(f"embed_request returned vectors of sizes {dim} and {width}")
        dim, rows = width, rows + 1
    if sys.byteorder == "big":
        buf.byteswap()
    return buf.tobytes(), rows, max(dim, 0), tokens


def _engine_attr(engine: Any, name: str) -> Any:
    value = getattr(engine, name, None)
    return value() if callable(value) and name in ("model_name", "context_length", "chat_template") else value


async def _engine_vocabulary(engine: Any) -> _native.Vocabulary | None:
    """The engine's ``vocabulary`` when it declares one (read off this loop: an engine may build
    it on first access); a failure leaves compiling to the engine, with a warning."""
    try:
        vocabulary = await asyncio.to_thread(getattr, engine, "vocabulary", None)
    except Exception as e:  # an engine's attribute: anything it raises
        logger.warning("the engine's vocabulary is unavailable (%s); it compiles structured outputs itself", e)
        return None
    return vocabulary if isinstance(vocabulary, _native.Vocabulary) else None


class _Heartbeat:
    """Proves to `/health` that the loop turns over: a request whose synchronous work blocks the
    loop for seconds makes the server report itself not ready.

    A class rather than a closure that schedules itself by name: such a closure is a reference
    cycle through the native server, which then outlives ``serve_oai_async`` until a garbage
    collection (its response store's SQLite connection still open). :meth:`stop` leaves none."""

    def __init__(self, loop: asyncio.AbstractEventLoop, native: _native.Server) -> None:
        self._loop = loop
        self._native: _native.Server | None = native
        self._handle: asyncio.TimerHandle | None = None

    def beat(self) -> None:
        if self._native is None:
            return
        self._native.heartbeat()
        self._handle = self._loop.call_later(_HEARTBEAT_S, self.beat)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self._native = None


def options_of(options: ServerOptions | None, overrides: dict[str, Any]) -> ServerOptions:
    """``options`` (default: :class:`ServerOptions`'s defaults) with ``overrides`` applied; an
    unknown name is a ``TypeError`` that lists the known ones."""
    unknown = sorted(set(overrides) - set(ServerOptions.names()))
    if unknown:
        raise TypeError(
            f"serve_oai() got unknown option(s) {', '.join(map(repr, unknown))}; "
            f"the options are: {', '.join(ServerOptions.names())}"
        )
    return dataclasses.replace(options or ServerOptions(), **overrides)


async def serve_oai_async(
    engine: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    options: ServerOptions | None = None,
    request_class: type | None = None,
    on_ready: Callable[[str, int], None] | None = None,
    **overrides: Any,
) -> None:
    """Serve ``engine`` inside the running asyncio loop until cancelled.

    ``options`` (:class:`smgpy.ServerOptions`) says how the server answers: names, parsers,
    limits, stores; its fields can also be given as keyword arguments, which override it (e.g.
    ``serve_oai_async(engine, api_key="k", request_timeout=60)``). Every option and its default
    is documented there.

    Engine attributes ``model_name``, ``context_length``, ``chat_template``, ``special_tokens``,
    ``tokenizer``, ``get_load``, ``vocab_size`` (client token ids are checked against it) and
    ``max_running_requests`` (a larger ``n`` is refused), ``max_total_num_tokens``, ``model_path`` and
    ``flush_cache()`` (for routers: ``/server_info``, ``/v1/loads``, ``POST /flush_cache``) and
    ``accepts_images`` (True: image parts reach the engine as ``image_data``; otherwise they are a 400)
    and ``accepts_local_images`` (True: ``file://`` image URLs reach it too, for it to read within the
    directory its operator allowed; otherwise they are a 400) are used when present.
    ``accepts_input_ids = True``: the engine takes prompts as token ids, which the server then makes
    with the engine's ``tokenizer`` when that is a native :class:`smgpy.Tokenizer` (off this loop).
    ``accepts_n = True``: the engine samples ``sampling_params["n"]`` choices of one request itself
    (one prefill) and tags each output with its ``index``; otherwise the server sends ``n`` requests.
    ``lark_grammars = True`` says the engine enforces llguidance Lark grammars sent as ``ebnf`` (tool
    calls are then constrained in the model's own format).
    ``vocabulary`` (a :class:`smgpy.Vocabulary` of the engine's model): each request's structured-output
    constraint is compiled against it once, by the server, and handed over as the request's ``grammar``.
    ``request_class`` builds the engine's request objects (default: :class:`smgpy.GenerateReqInput`).
    ``port=0`` picks a free port; ``on_ready(host, port)`` is called once listening.

    On cancellation the server drains: ``/health`` and new requests answer 503, running requests
    get ``shutdown_timeout`` seconds to finish, the rest end with an error; then it re-raises
    ``CancelledError``.
    """
    opts = options_of(options, overrides)
    generates = callable(getattr(engine, "generate_request", None)) and callable(getattr(engine, "abort_request", None))
    embeds = callable(getattr(engine, "embed_request", None))
    if not generates and not embeds:
        raise TypeError(
            "engine must have `async generate_request(obj)` and `abort_request(rid)`, or `async embed_request(obj)` "
            "(see smgpy.engine)"
        )
    _native.init_logging(opts.log_level)
    loop = asyncio.get_running_loop()
    model_name = opts.model_name or _engine_attr(engine, "model_name") or "default"
    chat_template = opts.read_template()
    if chat_template is None:
        chat_template = _engine_attr(engine, "chat_template")
    special_tokens = opts.special_tokens
    if special_tokens is None:
        special_tokens = getattr(engine, "special_tokens", None)
    context_length = opts.context_length
    if context_length is None:
        context_length = _engine_attr(engine, "context_length")
    get_load = getattr(engine, "get_load", None)
    vocab_size = getattr(engine, "vocab_size", None)
    max_running = getattr(engine, "max_running_requests", None)
    max_tokens = getattr(engine, "max_total_num_tokens", None)
    model_path = getattr(engine, "model_path", None)
    flush = getattr(engine, "flush_cache", None)
    vocabulary = await _engine_vocabulary(engine) if generates else None

    def positive(name: str) -> int | None:
        v = getattr(engine, name, None)
        return v if isinstance(v, int) and v > 0 else None

    native = _native.Server(
        host=host,
        port=port,
        model_name=str(model_name),
        chat_template=chat_template,
        special_tokens=special_tokens,
        tool_parser=opts.tool_parser,
        reasoning_parser=opts.reasoning_parser,
        api_key=opts.api_key,
        allowed_origins=opts.allowed_origins,
        context_length=context_length,
        tokenizer=getattr(engine, "tokenizer", None),
        get_load=get_load if callable(get_load) else None,
        vocab_size=vocab_size if isinstance(vocab_size, int) and vocab_size > 0 else None,
        max_running_requests=max_running if isinstance(max_running, int) and max_running > 0 else None,
        response_store=os.fspath(opts.response_store) if opts.response_store is not None else None,
        flush_cache=flush if callable(flush) else None,
        worker_id=opts.worker_id,
        model_path=str(model_path) if model_path else None,
        max_total_num_tokens=max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None,
        accepts_images=getattr(engine, "accepts_images", False) is True,
        local_images=getattr(engine, "accepts_local_images", False) is True,
        lark_grammars=bool(getattr(engine, "lark_grammars", False)),
        prompt_ids=getattr(engine, "accepts_input_ids", False) is True,
        accepts_n=getattr(engine, "accepts_n", False) is True,
        http_threads=opts.http_threads,
        embedding_model_name=str(getattr(engine, "embedding_model_name", None) or model_name) if embeds else None,
        embedding_dimensions=positive("embedding_dimensions"),
        embedding_max_tokens=positive("embedding_max_tokens"),
        embedding_tokenizer=getattr(engine, "embedding_tokenizer", None),
        matryoshka_dimensions=[int(d) for d in getattr(engine, "matryoshka_dimensions", None) or []],
        vocabulary=vocabulary,
        # The limits whose defaults are the Rust server's own, exactly those (see smgpy.options).
        **{name: getattr(opts, name) for name in _native.server_defaults()},
    )
    pump = _Pump(engine, native, request_class)
    stopped: asyncio.Future[None] = loop.create_future()

    def on_wake() -> None:
        pump.on_wake()
        if native.stopped and not stopped.done():
            stopped.set_result(None)

    native.bind_loop(loop.call_soon)
    fd = native.wake_fd()
    loop.add_reader(fd, on_wake)
    heartbeat = _Heartbeat(loop, native)

    try:
        bound_host, bound_port = native.start()
        tool, reasoning = native.parsers
        logger.info(
            "smgpy serving %s on http://%s:%d (tool parser: %s, reasoning parser: %s)",
            model_name,
            bound_host,
            bound_port,
            tool or "off",
            reasoning or "off",
        )
        heartbeat.beat()
        if on_ready is not None:
            on_ready(bound_host, bound_port)
        # The server's end arrives through the wake-up socket (see `on_wake`), so no Rust thread
        # calls into Python to report it; a Rust thread that did could still be inside Python
        # while the interpreter shuts down after `serve_oai` returns (a crash at exit). On
        # cancellation (SIGINT/SIGTERM in `serve_oai`) ask the server to stop, then wait for it.
        try:
            await asyncio.shield(stopped)
        except asyncio.CancelledError:
            native.shutdown()
            await asyncio.shield(stopped)
            raise
    finally:
        heartbeat.stop()
        pump.on_wake()  # cancellations queued by the last aborted streams
        tasks = pump.cancel_all()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        loop.remove_reader(fd)
        logger.info("smgpy server stopped")


def serve_oai(engine: Any, host: str = "127.0.0.1", port: int = 8000, **kwargs: Any) -> None:
    """Serve ``engine`` until SIGINT / SIGTERM, then shut down gracefully and return.

    Takes the same keyword arguments as :func:`serve_oai_async` (``options``, any
    :class:`smgpy.ServerOptions` field, ``request_class``, ``on_ready``).
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await serve_oai_async(engine, host, port, **kwargs)

    asyncio.run(main())
