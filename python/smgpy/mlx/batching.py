"""The MLX thread: smgpy's own continuous-batching loop on mlx-lm's models and caches.

One thread owns every MLX call (model, caches, sampling). The asyncio side talks to it through
a thread-safe inbox (new requests, aborts) and gets results back into each request's
``asyncio.Queue``: the outputs of one decode step travel together, in one post to each event
loop's :class:`~smgpy.mlx.mailbox.Mailbox`, so a batch of eight wakes the loop once.

Each turn of the loop, in order:

1. apply the inbox (arrivals, aborts) without waiting when there is work, so a lone request
   starts at once (no linger); a burst that arrives while a turn runs is prefilled together;
2. retire the rows whose sequences ended, and place prefilled sequences in free rows
   (:mod:`smgpy.mlx.slots`: a join copies only the joiner's keys and values);
3. queue the decode step of every live row (``mx.async_eval``): its input is the previous
   step's sampled tokens, still lazy, so the step is queued before they are read;
4. read the previous step's tokens and hand their outputs (stop ids, lengths, text) to the
   event loops (after a turn that queued a prefill chunk, before step 3: that step ran before
   the chunk, and where queueing waits for the device its tokens would otherwise wait for the
   next step too);
5. queue one chunk of prefill, at most ``prefill_step_size`` tokens: a long prompt is cut into
   chunks that alternate with decode steps, so running rows never wait for more than one chunk.
   While rows run, a chunk deep in a prompt is made shorter, so that with its attention over the
   context it costs no more than the first (:func:`chunk_tokens`), and a prompt longer than one
   chunk leaves room in each turn for the rows' decode step (:func:`decode_cost`).

When rows have drafts (prompt lookup, or a draft model: the draft batch mirrors the rows) and
:class:`~smgpy.mlx.pacing.StepCost` says a wider pass pays on this machine, steps 3-4 become one
speculative step instead (:meth:`Scheduler._speculate`): the running step's tokens are read, every
row is fed its pending token and its drafts in one forward pass, each row keeps what verification
accepts, and rows that kept fewer columns than others are left with holes in their cache
(:meth:`~smgpy.mlx.slots.SlotBatch.settle`).

Python's work in 4-5 overlaps the device's work on 3. mlx-lm's ``BatchGenerator`` evaluated
arriving prompts while every running row waited (~20 % of the MLX thread at 32 clients on a GPU)
and copied the whole batch's caches on each join and finish (~10 %); both are gone here.

Prompts are prefilled up to their last token, which is the row's first decode input. Prompts
without a prefix-cache hit are prefilled together, left-padded, for models whose layers are all
plain attention (the padding is masked); every other model (recurrent state, sliding windows,
hybrids) prefills each prompt alone, since their layers would read the padding as input.
Models whose caches cannot be batched at all run one sequence at a time (logged).
"""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import mlx.core as mx

from smgpy.engine import FinishReason, GenerateOutput, MetaInfo, TokenLogprob
from smgpy.mlx import mlx_lm_api
from smgpy.mlx.batch_probe import probe_batching
from smgpy.mlx.compiled_step import CompiledDecode, check_batch
from smgpy.mlx.detokenize import TextDecoder
from smgpy.mlx.draft import DraftBatch, DraftModel, DraftState
from smgpy.mlx.lookup import Lookup
from smgpy.mlx.mailbox import Mailbox
from smgpy.mlx.owner import own_mlx_thread
from smgpy.mlx.pacing import StepCost
from smgpy.mlx.prefix_cache import TIER_BLOCK, TIER_PINNED, TIER_PLAIN, Hit, PrefixCache
from smgpy.mlx.prefix_disk import DiskStore
from smgpy.mlx.sampling import GrammarMask, SamplingParams, TokenSampler, make_logits_processors, make_sampler
from smgpy.mlx.slots import (
    MergeBatch,
    SingleBatch,
    SlotBatch,
    can_merge,
    is_plain_kv,
    prefill_caches,
    prefilled_row,
)
from smgpy.mlx.verify import greedy_choice, kept_greedy, kept_sampled, sampled_choice
from smgpy.mlx.vlm import ImagePrompt, ImagesRefused, VisionInputs, VisionModel

__all__ = ["Outlet", "Scheduler", "Sequence", "StepTimes"]

log = logging.getLogger("smgpy.mlx")

# Prompts prefilled together in one padded batch, at most.
_PREFILL_ROWS = 8
# With no row running there is nobody to stall: a turn may prefill this many chunks.
_IDLE_CHUNKS = 8


def chunk_tokens(at: int, budget: int, hidden: int | None, busy: float = 0.0) -> int:
    """How many prompt tokens from context position ``at`` fit in the cost of ``budget`` tokens
    from position 0, less ``busy``: the size of a prefill chunk while rows are decoding, so that
    no turn (the rows' decode step, then the chunk) stalls them longer than one first chunk.

    A token's projections and MLP cost about ``24 d^2`` flops per layer (``d`` the hidden size)
    and its attention ``4 p d`` at context position ``p``, so a token at ``p`` costs
    ``1 + p / (6 d)`` tokens at 0, and a chunk of ``x`` tokens from ``at`` costs
    ``x (1 + (2 at + x) / (12 d))``. Deep in a long prompt attention dominates: for the tiny test
    model (``d`` = 64) the second 512-token chunk of a 1,000-token prompt measured 1.8 times the
    first, as this predicts (1.7); for SmolLM2-135M (``d`` = 576) the same chunk costs 1.2 times.

    ``busy`` is the decode step queued in the same turn, in the same units
    (:func:`decode_cost`): the turn's budget covers it, as a step's token budget counts its
    decode rows in vLLM's chunked prefill. The chunk keeps a quarter of the budget at least, so a
    long prompt still advances beside a full batch. Without a hidden size, chunks are counted in
    tokens."""
    if hidden is None or budget <= 1:
        return max(1, budget)
    scale = 12.0 * hidden
    full = budget * (1 + budget / scale)
    cost = max(full - busy, full / 4)
    b = 1 + 2 * at / scale
    # x^2 / scale + b x - cost = 0, its positive root
    x = (-b + math.sqrt(b * b + 4 * cost / scale)) * scale / 2
    return max(1, min(budget, math.floor(x + 1e-6)))


def decode_cost(rows: int, span: int, hidden: int | None, head: float) -> float:
    """A decode step of ``rows`` rows attending over ``span`` columns, in prompt tokens at
    position 0 (the unit of :func:`chunk_tokens`): per row, one token through the layers, its
    attention (``span / (6 d)``) and the logits head (``head``: see :func:`head_share`), which a
    prefill token skips."""
    if hidden is None or rows <= 0:
        return 0.0
    return rows * (1 + span / (6.0 * hidden) + head)


def head_share(vocab: int | None, hidden: int | None, layers: int | None) -> float:
    """The logits head's flops (``2 V d``) over one token's through the layers
    (``24 d^2`` each): ``V / (12 d L)``. 32 for the tiny test model (a 49,152-token vocabulary
    over 2 layers of 64), 0.24 for SmolLM2-135M, 0.08 for SmolLM2-1.7B; 0 where unknown."""
    if not vocab or not hidden or not layers:
        return 0.0
    return vocab / (12.0 * hidden * layers)


@dataclass(frozen=True, eq=False)
class Outlet:
    """Where one request's outputs go: an asyncio queue and the mailbox of the loop that owns it."""

    mailbox: Mailbox
    queue: asyncio.Queue[GenerateOutput]


class _Logprobs(TypedDict, total=False):
    """The logprob keys of one output's ``meta_info`` (see :class:`smgpy.engine.MetaInfo`)."""

    output_token_logprobs: list[TokenLogprob]
    output_top_logprobs: list[list[TokenLogprob]]


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
    pin: bool = False  # the client asked to keep this prefix (a cache key or breakpoints)
    breakpoints: list[int] = field(default_factory=list)  # prompt positions the client marked
    generated: int = 0
    cached_tokens: int = 0
    done: bool = False
    row: int = -1
    out_ids: list[int] = field(default_factory=list)
    sampler: Any = None
    processors: list[Any] = field(default_factory=list)
    context: Any = None  # mx.array of the tokens fed so far, for rows with logits processors
    prefetched: Hit | None = None  # the prefix cache's answer, once asked
    # A prompt with images (vision-language models): its real ids and pixels. ``tokens`` then
    # holds the prefix cache's keys, with each image's tokens keyed by the image's content hash.
    vision: ImagePrompt | None = None
    rope_delta: int = 0  # M-RoPE models: this row's position minus its index, after its images
    drafter: Lookup | DraftState | None = None  # its draft source (speculative decoding), once eligible
    uncached: int = 0  # 1 while its last emitted token is not in its row's cache (see _mark_unfed)

    @property
    def ids(self) -> list[int]:
        """The prompt's real token ids (``tokens`` but for image tokens)."""
        return self.tokens if self.vision is None else self.vision.input_ids


def _draft_processors(seq: Sequence) -> tuple[list[Any], GrammarMask | None] | None:
    """How a verification applies the row's logits processors to its drafted positions: the
    pure ones (logit bias, penalties, ``min_new_tokens``: functions of the context and the
    logits) at each position over the context up to it, and the structured-output mask (state
    in its matcher) through :meth:`GrammarMask.draft_masks`. None while that mask has not given
    its first one (the first token is a decode step's)."""
    others: list[Any] = []
    grammar = None
    for p in seq.processors:
        if isinstance(p, GrammarMask):
            if not p.started:
                return None
            if not p.off:
                grammar = p
        else:
            others.append(p)
    return others, grammar


@dataclass(eq=False)
class _Prefill:
    """Prompts being prefilled together (one row per request; its samples share it)."""

    groups: list[list[Sequence]]
    runs: list[list[int]]  # per group: the tokens to run (prompt[cached:-1])
    caches: list[Any]  # per layer: one batch cache (several groups) or one sequence's caches
    shared: bool  # several groups in one left-padded batch
    width: int = 0
    pos: int = 0
    start: int = 0  # prompt tokens the job's cache held when it began (a prefix-cache hit)
    # Absolute prompt positions at which to snapshot the state for the prefix cache (models
    # whose state cannot be trimmed back: see prefix_cache), ascending.
    checkpoints: list[int] = field(default_factory=list)
    vision: VisionInputs | None = None  # the prompt's embeddings, when it has images

    @property
    def finished(self) -> bool:
        return self.pos >= self.width


@dataclass(eq=False)
class _Step:
    """A queued decode step: the sequence of each row when it was built, and its lazy results."""

    seqs: list[Sequence | None]
    sampled: mx.array
    logprobs: dict[int, mx.array]
    # Every row's first token: the batch was empty before (a lone request, or a burst into an idle
    # engine). Read before the next step is queued (see ``_serve``).
    first: bool = False


@dataclass
class StepTimes:
    """Where the MLX thread's time goes (seconds, summed), for ``benches/``: host work of decode
    steps (graph building, scheduling, outputs) against waiting for the device's results."""

    steps: int = 0
    rows: int = 0
    host: float = 0.0
    wait: float = 0.0
    prefill: float = 0.0
    by_rows: dict[int, list[float]] = field(default_factory=dict)

    def record(self, rows: int, host: float, wait: float) -> None:
        self.steps += 1
        self.rows += rows
        self.host += host
        self.wait += wait
        acc = self.by_rows.setdefault(rows, [0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += host
        acc[2] += wait


class Scheduler:
    """Runs on the MLX thread. Public methods other than ``run`` are called from any thread."""

    def __init__(
        self,
        load: Callable[[], tuple[Any, Any]],
        *,
        max_running: int,
        prefix_cache_bytes: int,
        prefill_step_size: int = 512,
        prefix_disk: DiskStore | None = None,
        kv_bits: int | None = None,
        kv_group_size: int = 64,
        compile_step: bool = True,
        lookup_tokens: int = 0,
        load_draft: Callable[[Any], DraftModel] | None = None,
        draft_tokens: int = 3,
    ) -> None:
        self._load = load
        # Speculation in every row: draft tokens verified per step, from prompt lookup (0: off)
        # or, when ``load_draft`` is given (it takes the model's tokenizer), a draft model.
        self.lookup_tokens = max(0, lookup_tokens)
        self._load_draft = load_draft
        self.draft: DraftModel | None = None
        self.draft_batch: DraftBatch | None = None  # the draft model's caches of the batch's rows
        self.draft_tokens = max(0, draft_tokens)
        self.speculative_steps = 0
        self.batched_speculative_steps = 0  # of those, steps that verified drafts of several rows
        self.drafts_proposed = 0  # draft tokens verified, and accepted (for benches and logs)
        self.drafts_accepted = 0
        self._unfed: list[Sequence] = []  # rows whose last emitted token is not fed yet
        self.cost = StepCost()  # what a wider step costs here (whether speculation pays)
        self._compile_step = compile_step
        # The decode step compiled once per shape, where the load check passed (None: eager).
        self.compiled: CompiledDecode | None = None
        self.kv_bits = kv_bits
        self.kv_group_size = kv_group_size
        self.max_running = max_running
        self._prefill_step = max(1, prefill_step_size)
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._waiting: deque[list[Sequence]] = deque()
        self._cache = PrefixCache(prefix_cache_bytes, disk=prefix_disk)
        self._lock = threading.Lock()
        self.pending = 0  # submitted, not admitted yet (guarded by _lock)
        self.running = 0  # admitted: prefilling, ready or decoding
        # Prompt tokens run through the model so far (prefix-cache hits and shared n-prefills excluded).
        self.prefilled_tokens = 0
        self.ready = threading.Event()
        self.load_error: BaseException | None = None
        self.model: Any = None
        self._hidden: int | None = None  # the model's hidden size, for the size of prefill chunks
        self._head = 0.0  # the logits head's cost in tokens through the layers (see head_share)
        self.tokenizer: Any = None
        self._stream: Any = None
        self._outbox: list[tuple[Outlet, GenerateOutput]] = []
        self.batch: SlotBatch | MergeBatch | SingleBatch | None = None
        # How prompts are prefilled and rows batched, decided from the model's caches at load.
        self.mode = ""
        self._grouped = False  # masks take a query-group axis (set at load: `_choose_mode`)
        self._rows: list[Sequence | None] = []  # the sequence in each batch row
        self._inputs: mx.array | None = None  # the next step's input per row (lazy)
        self._prefill: _Prefill | None = None
        self._joining: list[tuple[list[Sequence], list[Any], int]] = []  # prefilled, not placed
        self._ended: list[Sequence] = []  # ended in a row; the row is freed next turn
        self.times = StepTimes()
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
        rows = list(self._rows)  # a snapshot: the MLX thread may change the list
        used = sum(len(s.tokens) + s.generated for s in rows if s is not None)
        cache = self._cache
        return {
            "num_running_reqs": self.running,
            "num_waiting_reqs": self.pending,
            "num_used_tokens": used,
            "max_running_requests": self.max_running,
            "cache_hit_rate": cache.hits / cache.queries if cache.queries else 0.0,
            **cache.stats(),
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
        """The MLX thread's body (:func:`smgpy.mlx.owner.own_mlx_thread`): load, serve, release."""
        own_mlx_thread(self._load_all, self._serve_all, failed=self._failed, ready=self.ready, stopped=self.stopped)

    def _load_all(self) -> None:
        self.model, self.tokenizer = self._load()
        self._hidden = mlx_lm_api.hidden_size(self.model)
        if self._load_draft is not None:
            self.draft = self._load_draft(self.tokenizer)
            self.draft_batch = self.draft.batch(self._cache.max_bytes // 4)
        self._choose_mode()

    def _failed(self, error: BaseException) -> None:
        self.load_error = error  # from_pretrained re-raises it

    def _serve_all(self, stream: Any) -> None:
        self._stream = stream
        self._serve()
        self._release()

    def _choose_mode(self) -> None:
        """Slots for plain attention, the caches' own batching otherwise, one at a time last; each
        checked against the model's own code (:mod:`smgpy.mlx.batch_probe`)."""
        caches = mlx_lm_api.make_prompt_cache(self.model)
        self._head = head_share(mlx_lm_api.vocab_size(self.model), self._hidden, len(caches))  # one cache per layer
        module = type(self.model).__module__
        kinds = _kinds(caches)
        by_caches = "slots" if is_plain_kv(caches) else "merge" if can_merge(caches) else "single"
        fit = probe_batching(self.model, by_caches)
        self.mode, self._grouped = fit.mode, fit.grouped
        if fit.reason:
            log.warning(
                "%s cannot be batched (two prompts run batched and alone: %s); one sequence runs at a time",
                module,
                fit.reason,
            )
        elif self.mode == "merge":
            log.info(
                "%s: its caches (%s) are batched by their own merge/filter and each prompt is prefilled alone",
                module,
                kinds,
            )
        elif self.mode == "single":
            log.info("%s: its caches (%s) cannot be batched; one sequence runs at a time", module, kinds)
        if fit.grouped:
            log.info("%s: its attention scores each group of query heads apart; masks take a group axis", module)
        if self.mode == "single":
            self.max_running = 1
        if self.kv_bits is not None:
            self._check_kv_quantization(caches, fit.reason)
        self.batch = self._new_batch()
        if self.mode == "slots" and self._compile_step:
            layers = len(caches)
            deltas = isinstance(self.model, VisionModel) and self.model.mrope
            bits, group = self.kv_bits, self.kv_group_size
            step = CompiledDecode(
                self.model, layers, deltas=deltas, grouped=self._grouped, kv_bits=bits, kv_group_size=group
            )
            if step.check(
                lambda: check_batch(self.model, layers, grouped=self._grouped, kv_bits=bits, kv_group_size=group)
            ):
                self.compiled = step
                log.info("decode step compiled (once per batch shape)")

    def _check_kv_quantization(self, caches: list[Any], unbatched: str) -> None:
        """Refuse ``kv_bits`` at load where it cannot apply, rather than failing a request later
        (``unbatched``: why the model's plain caches cannot be batched, if they cannot)."""
        if self.mode != "slots":
            module = type(self.model).__module__
            why = f"it cannot be batched ({unbatched})" if unbatched else f"it uses {_kinds(caches)}"
            raise ValueError(f"--kv-bits needs a model whose layers all use plain attention caches; {module}: {why}")
        # One token through the model gives every layer's key and value widths.
        self.model(mx.array([[0]], dtype=mx.uint32), cache=caches)
        for i, c in enumerate(caches):
            for name, a in (("keys", c.keys), ("values", c.values)):
                if a.shape[-1] % self.kv_group_size:
                    raise ValueError(
                        f"--kv-group-size {self.kv_group_size} does not divide layer {i}'s {name} width "
                        f"({a.shape[-1]}); pick one of 32, 64 or 128 that does"
                    )
        quantized = probe_batching(self.model, self.mode, self.kv_bits, self.kv_group_size)
        if (quantized.mode, quantized.grouped) != ("slots", self._grouped):
            raise ValueError(
                f"--kv-bits: {type(self.model).__module__}'s attention cannot read a quantized cache "
                f"({quantized.reason})"
            )
        log.info("KV cache of the running batch quantized: %d bits, groups of %d", self.kv_bits, self.kv_group_size)

    def _new_batch(self) -> SlotBatch | MergeBatch | SingleBatch:
        if self.mode == "slots":
            layers = len(mlx_lm_api.make_prompt_cache(self.model))
            return SlotBatch(layers, self.kv_bits, self.kv_group_size, grouped=self._grouped)
        if self.mode == "merge":
            return MergeBatch()
        return SingleBatch()

    def _serve(self) -> None:
        """The scheduling loop, until shutdown."""
        step: _Step | None = None
        chunked = False  # the last turn queued a prefill chunk
        while True:
            self._flush()
            idle = step is None and self._prefill is None and not self._joining and not self._waiting
            now = time.monotonic()
            self._cache.service(now)
            block = idle and not any(self._rows)
            if not self._drain(block=block, timeout=self._cache.next_service_in(now) if block else None):
                break
            t0 = time.perf_counter()
            try:
                self._retire()
                self._start_prefill()
                self._join()
                drafting = self._speculating()
                if drafting and self._worth_drafting(drafting):
                    waited = 0.0
                    if step is not None:  # the rows' last tokens are the drafts' context: read them
                        waited = self._collect_unpipelined(step)
                        step = None
                    shape = self._speculate(drafting)
                    if shape is not None:
                        t2 = time.perf_counter()
                        # The turn, as a decode turn is measured, but for the wait for the step before.
                        self.cost.speculated(*shape, t2 - t0 - waited)
                        chunked = self._prefill_chunk(idle=False)
                        self.times.prefill += time.perf_counter() - t2
                        continue
                wait = 0.0
                if step is not None and (chunked or step.first):
                    # The step queued before a prefill chunk ran before it: its tokens go out now,
                    # not after the next step is queued. Where queueing waits for the device (MLX's
                    # CPU backend bounds its queue), they would wait for that step too, and a
                    # running row would stall for a chunk and two steps instead of a chunk and one.
                    # So do the first tokens of a batch that was empty: a lone request's time to
                    # first token is then one step, not two (on a GPU, one step and the host's
                    # building of the next); once per such batch, so throughput does not notice.
                    wait = self._collect_unpipelined(step)
                    step = None
                    self._retire()  # rows that ended just now: the next step need not compute them
                nxt = self._decode() if any(s is not None for s in self._rows) else None
                if step is not None:
                    # The previous step's outputs go out before a prefill chunk is queued: where
                    # queueing waits for the device (MLX's CPU backend bounds its queue), they
                    # would otherwise wait for the chunk too.
                    wait = self._collect(step)
                    self._flush()
                t1 = time.perf_counter()
                chunked = self._prefill_chunk(idle=nxt is None)
                t2 = time.perf_counter()
                if nxt is not None:
                    self.times.record(len(nxt.seqs), (t1 - t0) - wait, wait)
                    if step is not None:  # pipelined: a turn lasts about one step
                        self.cost.decoded(len(nxt.seqs), t1 - t0)
                    else:
                        self.cost.unmeasured(len(nxt.seqs))
                self.times.prefill += t2 - t1
                step = nxt
            except Exception as e:  # a failed step must not kill the thread: fail the batch, go on
                log.exception("MLX step failed")
                step = None
                self._fail_all(f"generation failed: {e}")

    def _release(self) -> None:
        """Drop the model, the batch and the prefix cache, on the thread that made them.

        The thread stays parked afterwards, so nothing else would ever free that memory.
        Requests still running or waiting end with an abort, so no consumer waits forever.
        """
        gone: FinishReason = {"type": "abort", "message": "the engine shut down"}
        for seq in self._all_sequences():
            self._finish(seq, gone, "")
        self._flush()
        self._clear_state()
        self._cache.flush_writes()
        self._cache.release()
        self.model = None
        gc.collect()
        mx.synchronize(self._stream)

    def _all_sequences(self) -> list[Sequence]:
        seqs = [s for s in self._rows if s is not None]
        seqs += [s for g in self._waiting for s in g]
        seqs += [s for g, _, _ in self._joining for s in g]
        if self._prefill is not None:
            seqs += [s for g in self._prefill.groups for s in g]
        return seqs

    def _clear_state(self) -> None:
        self._unfed = []
        self._rows = []
        self._inputs = None
        self._waiting.clear()
        self._joining = []
        self._prefill = None
        self._ended = []
        self.running = 0
        with self._lock:
            self.pending = 0
        if self.batch is not None:
            self.batch.reset()
        if self.draft_batch is not None:
            self.draft_batch.reset()

    def _drain(self, block: bool, timeout: float | None = None) -> bool:
        """Apply inbox commands; return False on shutdown. Blocks (up to ``timeout``, when given)
        only when there is no work."""
        while True:
            try:
                cmd, arg = self._inbox.get(timeout=timeout) if block else self._inbox.get_nowait()
            except queue.Empty:
                return True
            block = False
            if cmd == "add":
                self._waiting.append(arg)
            elif cmd == "abort":
                self._abort(arg)
            elif cmd == "flush":
                self._cache.clear()
                if self.draft_batch is not None:
                    self.draft_batch.cache.clear()
            else:
                return False

    def _abort(self, rid: str) -> None:
        for group in [g for g in self._waiting if g[0].rid == rid]:
            self._waiting.remove(group)
            with self._lock:
                self.pending -= 1
            for seq in group:
                self._finish(seq, {"type": "abort"}, "")
        job = self._prefill
        if job is not None and any(g[0].rid == rid for g in job.groups):
            # Its prompt is dropped with the job's others, which start over (rare: an abort
            # inside a shared prefill).
            self._prefill = None
            for group in job.groups:
                if group[0].rid == rid:
                    self.running -= len(group)
                    for seq in group:
                        self._finish(seq, {"type": "abort"}, "")
                else:
                    self.running -= len(group)
                    with self._lock:
                        self.pending += 1
                    self._waiting.appendleft(group)
        for entry in [j for j in self._joining if j[0][0].rid == rid]:
            self._joining.remove(entry)
            self.running -= len(entry[0])
            for seq in entry[0]:
                self._finish(seq, {"type": "abort"}, "")
        for in_row in self._rows:
            if in_row is not None and in_row.rid == rid and not in_row.done:
                self._finish(in_row, {"type": "abort"}, "")
                self._end_row(in_row)

    def _fail_all(self, message: str) -> None:
        for seq in self._all_sequences():
            self._finish(seq, {"type": "abort", "message": message}, "")
        self._clear_state()
        self.batch = self._new_batch()

    # ----- rows -----

    def _retire(self) -> None:
        """Free the rows of sequences that ended (finished or aborted) since the last turn."""
        if not self._ended:
            return
        assert self.batch is not None
        rows = []
        for seq in self._ended:
            if seq.row < 0 or self._rows[seq.row] is not seq:
                continue
            rows.append(seq.row)
            self._rows[seq.row] = None
            seq.row = -1
        self._ended = []
        keep = self.batch.leave(rows)
        if self.draft_batch is not None and keep is None:  # its rows are the batch's rows
            self.draft_batch.leave(rows)
        if keep is not None:  # rows renumbered (MergeBatch)
            self._rows = [self._rows[r] for r in keep]
            for r, kept in enumerate(self._rows):
                if kept is not None:
                    kept.row = r
            if self._inputs is not None:
                self._inputs = self._inputs[mx.array(keep, dtype=mx.int32)] if keep else None
        else:
            while self._rows and self._rows[-1] is None:
                self._rows.pop()
            if self._inputs is not None:
                self._inputs = self._inputs[: len(self._rows)] if self._rows else None

    def _end_row(self, seq: Sequence) -> None:
        """A sequence in a row ended: its slot counts as free now, its row is freed next turn."""
        self.running -= 1
        self._ended.append(seq)
        if seq.out_ids and self._cache.max_bytes > 0 and seq.row >= 0:
            # Keys and values of the prompt and every generated token: the last one was fed to
            # the step queued before the end was seen, and the copy is built after that step.
            assert self.batch is not None
            known = seq.tokens + seq.out_ids
            if seq.uncached:
                known = known[: -seq.uncached]
            caches = self.batch.extract(seq.row, len(known))
            arrays = [a for c in caches for a in _cache_arrays(c)]
            if arrays:
                mx.async_eval(arrays)  # type: ignore[no-untyped-call]  # releases the batch's buffers
                tier = TIER_PINNED if seq.pin else TIER_PLAIN
                self._cache.insert(known, caches, prompt_len=len(seq.tokens), tier=tier)

    def _join(self) -> None:
        """Place prefilled sequences in free rows; each one's last prompt token is its first input."""
        if not self._joining:
            return
        assert self.batch is not None
        new_rows: list[int] = []
        new_tokens: list[int] = []
        for group, caches, length in self._joining:
            for i, seq in enumerate(group):
                # n > 1: each sample gets its own row (a copy of the shared prompt's keys and values).
                own = caches if i == len(group) - 1 or self.mode == "slots" else copy.deepcopy(caches)
                row = self.batch.join(own, length)
                while len(self._rows) <= row:
                    self._rows.append(None)
                self._rows[row] = seq
                seq.row = row
                self._setup(seq)
                new_rows.append(row)
                new_tokens.append(seq.ids[-1])
                self.prefilled_tokens += 1  # its last prompt token, the row's first input
        self._joining = []
        rows = len(self._rows)
        old = self._inputs
        if old is None:
            base = mx.zeros((rows,), dtype=mx.uint32)
        elif old.shape[0] < rows:
            base = mx.concatenate([old.astype(mx.uint32), mx.zeros((rows - old.shape[0],), dtype=mx.uint32)])
        else:
            base = old.astype(mx.uint32)
        mask = [False] * rows
        vals = [0] * rows
        for r, t in zip(new_rows, new_tokens, strict=True):
            mask[r] = True
            vals[r] = t
        self._inputs = mx.where(mx.array(mask), mx.array(vals, dtype=mx.uint32), base)

    def _setup(self, seq: Sequence) -> None:
        end_ids = sorted(seq.stop_ids)
        seq.sampler = make_sampler(seq.params, seq.index)
        seq.processors = make_logits_processors(seq.params, len(seq.tokens), end_ids, seq.matcher)
        if seq.processors:
            # The context a processor sees: the tokens so far, without the input being fed.
            seq.context = mx.array(seq.ids[:-1], dtype=mx.uint32)

    # ----- prefill -----

    def _start_prefill(self) -> None:
        """Take waiting requests into a prefill job while rows are free.

        A request taken off the queue is in no list until its job exists: should anything fail
        before, the requests taken end with the error here (the loop's handler only reaches those
        in its lists), and an image prompt the vision tower fails on ends alone.
        """
        if self._prefill is not None or not self._waiting:
            return
        free = self.max_running - self.running
        if self.running and len(self._waiting[0]) > free:
            return
        taken: list[list[Sequence]] = []
        try:
            self._take_into_prefill(free, taken)
        except Exception as e:  # the job is assigned last: none exists here
            self.running -= sum(len(g) for g in taken)
            failed: FinishReason = {"type": "abort", "message": f"generation failed: {e}"}
            if isinstance(e, ImagesRefused):  # the request's own images: a 400 with the message
                failed = {"type": "abort", "message": str(e), "status_code": 400}
            for seq in (s for g in taken for s in g):
                self._finish(seq, failed, "")
            if len(taken) == 1 and taken[0][0].vision is not None:
                if isinstance(e, ImagesRefused):
                    log.warning("a request's images were refused: %s", e)
                else:
                    log.exception("the vision tower failed on a request's images")
                return
            raise

    def _take_into_prefill(self, free: int, taken: list[list[Sequence]]) -> None:
        """:meth:`_start_prefill`'s work: each group taken off the queue goes into ``taken`` first."""
        group = self._waiting.popleft()
        taken.append(group)
        with self._lock:
            self.pending -= 1
        self.running += len(group)
        tokens = group[0].tokens
        hit = self._fetch(group)
        cache, cached = hit.cache, hit.cached
        group[0].prefetched = None  # the copy now belongs to the job
        vision = None
        if group[0].vision is not None:
            # The vision tower runs lazily, with the first chunk (not at all on a full hit).
            assert isinstance(self.model, VisionModel)
            vision = self.model.embed(group[0].vision)
            for seq in group:
                seq.rope_delta = vision.delta
            if cached < vision.through:  # its images attend both ways: prefilled from 0 (VisionInputs)
                self._cache.unused(hit)
                cache, cached = None, 0
        for seq in group:
            seq.cached_tokens = cached
        if cache is not None or self.mode != "slots" or vision is not None:
            cache = cache or mlx_lm_api.make_prompt_cache(self.model)
            run = tokens[cached:-1]
            checkpoints: list[int] = []
            if self.mode != "slots" and self._cache.enabled:
                block = self._cache.checkpoint_block
                marks = set(hit.checkpoints) | set(range(block, len(tokens) - 1, block)) | set(group[0].breakpoints)
                first = max(cached, vision.through if vision is not None else 0)
                checkpoints = sorted(p for p in marks if first < p < len(tokens) - 1)
            self._prefill = _Prefill(
                [group], [run], cache, False, len(run), start=cached, checkpoints=checkpoints, vision=vision
            )
            return
        groups, runs = [group], [tokens[:-1]]
        free -= len(group)
        while self._waiting and len(groups) < _PREFILL_ROWS:
            nxt = self._waiting[0]
            width = max(max(len(r) for r in runs), len(nxt[0].tokens) - 1)
            if len(nxt) > free or (len(groups) + 1) * width > max(self._prefill_step, 2 * width):
                break
            if nxt[0].vision is not None:
                break  # a prompt with images is prefilled on its own, from its embeddings
            if self._fetch(nxt).cache is not None:
                break  # a hit is prefilled on its own, from its cached prefix
            self._waiting.popleft()
            taken.append(nxt)
            with self._lock:
                self.pending -= 1
            self.running += len(nxt)
            free -= len(nxt)
            groups.append(nxt)
            runs.append(nxt[0].tokens[:-1])
        width = max(len(r) for r in runs)
        if len(groups) == 1:
            self._prefill = _Prefill(groups, runs, mlx_lm_api.make_prompt_cache(self.model), False, width)
            return
        pads = [width - len(r) for r in runs]
        assert isinstance(self.batch, SlotBatch)
        caches = prefill_caches(pads, len(self.batch.caches), self._grouped)
        self._prefill = _Prefill(groups, runs, caches, shared=True, width=width)

    def _fetch(self, group: list[Sequence]) -> Hit:
        """The prefix cache's copy for the group's prompt and its length, asked once per request."""
        seq = group[0]
        if seq.prefetched is None:
            seq.prefetched = self._cache.fetch(seq.tokens)
        return seq.prefetched

    def _prefill_chunk(self, idle: bool) -> bool:
        """Queue the next chunk of the prefill job (whether there was one); hand finished prompts
        to ``_join``."""
        job = self._prefill
        if job is None:
            return False
        chunks = _IDLE_CHUNKS if idle else 1
        while chunks and not job.finished:
            chunks -= 1
            rows = len(job.groups)
            size = max(1, self._prefill_step // rows) if job.shared else self._prefill_step
            if not idle:  # running rows wait for this chunk: it costs no more than the first
                busy = 0.0
                if job.width > size:
                    # A prompt longer than one chunk: each of its chunks and the rows' step beside
                    # it cost no more than one first chunk. (A shorter prompt is one chunk at
                    # most whatever the batch, and is not cut further.)
                    span = self.batch.write_column if isinstance(self.batch, SlotBatch) else 0
                    busy = decode_cost(len(self._rows), span, self._hidden, self._head)
                size = chunk_tokens(job.start + job.pos, size, self._hidden, busy)
            end = min(job.width, job.pos + size)
            if job.shared:
                pads = [job.width - len(r) for r in job.runs]
                chunk = [
                    [0] * max(0, min(pad, end) - job.pos) + run[max(0, job.pos - pad) : max(0, end - pad)]
                    for run, pad in zip(job.runs, pads, strict=True)
                ]
            else:
                if job.checkpoints:  # stop at the next snapshot point
                    end = min(end, job.checkpoints[0] - job.start)
                if job.vision is not None and job.vision.through > job.start + job.pos:
                    end = min(job.width, max(end, job.vision.through - job.start))
                chunk = [job.runs[0][job.pos : end]]
            if job.vision is not None:
                a, b = job.start + job.pos, job.start + end
                ids = job.groups[0][0].ids[a:b]
                pos = None if job.vision.positions is None else job.vision.positions[..., a:b]
                self.model(
                    mx.array([ids], dtype=mx.uint32),
                    cache=job.caches,
                    inputs_embeds=job.vision.embeds[:, a:b],
                    positions=pos,
                    features=job.vision.layer_features(a, b),
                )
            else:
                self.model(mx.array(chunk, dtype=mx.uint32), cache=job.caches)
            mx.async_eval([_cache_arrays(c) for c in job.caches])  # type: ignore[no-untyped-call]
            self.prefilled_tokens += sum(min(end, len(r)) - min(job.pos, len(r)) for r in job.runs)
            job.pos = end
            if job.checkpoints and job.start + end >= job.checkpoints[0]:
                at = job.checkpoints.pop(0)
                lead = job.groups[0][0]
                if at in lead.breakpoints:
                    tier = TIER_PINNED
                elif at % self._cache.checkpoint_block == 0:
                    tier = TIER_BLOCK
                else:
                    tier = TIER_PLAIN
                self._cache.checkpoint(job.groups[0][0].tokens[:at], job.caches, tier=tier)
        if not job.finished:
            return True
        self._prefill = None
        if not job.shared:
            group = job.groups[0]
            tokens = group[0].tokens
            if self.mode != "slots" and job.width > 0:
                # The end of the prompt: the next turn of an agent diverges inside this turn's
                # answer, and an untrimmable state can only be reused from a snapshot before it.
                self._cache.checkpoint(tokens[:-1], job.caches, tier=TIER_PINNED if group[0].pin else TIER_PLAIN)
            self._joining.append((group, job.caches, len(tokens) - 1))
            return True
        for i, group in enumerate(job.groups):
            length = len(job.runs[i])
            pad = job.width - length
            self._joining.append((group, prefilled_row(job.caches, i, pad), length))
        return True

    # ----- speculation (prompt lookup or a draft model) -----

    def _speculating(self) -> list[Sequence]:
        """The running sequences that may draft this turn (see :meth:`_may_draft`): in every row
        of the batch, a step verifies each drafting row's drafts (from prompt lookup, or the draft
        model's batch), rows that drafted nothing (or may not) take their one token from its first
        column, and rows that keep fewer drafts than others are left with holes
        (:meth:`SlotBatch.settle`)."""
        if not self._speculation_tokens or self.mode != "slots" or self._joining:
            return []
        return [s for s in self._rows if s is not None and not s.done and self._may_draft(s)]

    def _may_draft(self, seq: Sequence) -> bool:
        """Any request (greedy, sampled, seeded, with logits processors: see
        :func:`_draft_processors`) not opted out (``num_draft_tokens: 0``), with room for a draft
        after the token in flight, and not resting after misses."""
        if seq.processors and _draft_processors(seq) is None:
            return False
        if seq.max_tokens - seq.generated < 3 or seq.params.num_draft_tokens == 0:
            return False
        if seq.sampler is not mlx_lm_api.greedy_sampler and not isinstance(seq.sampler, TokenSampler):
            return False
        if seq.drafter is None:
            if self.draft is None:
                context = seq.ids + seq.out_ids
                if seq.vision is not None:  # image tokens are not text to draft (nor always in the vocabulary)
                    assert isinstance(self.model, VisionModel)
                    context = [-1 if t == self.model.image_token_id else t for t in context]
                seq.drafter = Lookup(context, k=self.lookup_tokens)
            elif seq.vision is None:  # a draft model reads text only
                seq.drafter = self.draft.state(seq.ids + seq.out_ids)
            else:
                return False
        return not seq.drafter.resting

    @staticmethod
    def _processed(seq: Sequence, processors: list[Any], scores: mx.array, fed: list[int]) -> mx.array:
        """A drafting row's ``scores`` (one position per fed token) through its pure logits
        processors, each position over the context up to the token fed there, as a decode step
        feeding them one by one would see it."""
        context = mx.concatenate([seq.context, mx.array(fed, dtype=mx.uint32)])
        base = seq.context.shape[0]
        rows = []
        for i in range(scores.shape[0]):
            row = scores[i : i + 1]
            for processor in processors:
                row = processor(context[: base + i + 1], row)
            rows.append(row)
        return mx.concatenate(rows, axis=0)

    def _draft_limit(self, seq: Sequence) -> int:
        k = self._speculation_tokens
        cap = k if seq.params.num_draft_tokens is None else seq.params.num_draft_tokens
        room = seq.max_tokens - seq.generated - 1  # the last token is the model's own, never a draft
        return max(0, min(k, cap, room))

    def _worth_drafting(self, seqs: list[Sequence]) -> bool:
        """Whether a speculative step could beat a plain one if every candidate drafted as much
        as its pace allows: asked before the running step's tokens are read (which drafting
        needs, and which costs the pipeline)."""
        assert self.batch is not None
        bound = []
        for seq in seqs:
            assert seq.drafter is not None
            bound.append((seq.drafter.pace, seq.drafter.pace.size(self._draft_limit(seq))))
        return self.cost.best_width(self.batch.rows, bound) > 1

    @property
    def _speculation_tokens(self) -> int:
        """The most tokens drafted per step: the draft model's, else prompt lookup's (0: off)."""
        return self.draft_tokens if self.draft is not None else self.lookup_tokens

    def _mark_unfed(self, seq: Sequence) -> None:
        """``seq``'s last emitted token is not in its cache until the next step feeds it, so a
        row that ends (or is aborted) meanwhile leaves the prefix cache one token less."""
        seq.uncached = 1
        self._unfed.append(seq)

    def _fed(self) -> None:
        """A step feeds every row its pending input."""
        for seq in self._unfed:
            seq.uncached = 0
        self._unfed = []

    def _speculate(self, seqs: list[Sequence]) -> tuple[int, int] | None:
        """One forward pass of every row, ``width`` columns wide: a drafting row's pending token and
        drafts, whose kept ones it emits (:mod:`smgpy.mlx.verify`: the model's argmax for greedy
        rows, speculative sampling's rule for sampled ones) plus one token of the model's own;
        every other row's pending token, sampled from its first column as a decode step would.
        Returns the step's rows and width, None when nothing was drafted or drafting does not
        pay (:meth:`StepCost.best_width`)."""
        assert self.batch is not None and isinstance(self.batch, SlotBatch) and self._inputs is not None
        batch = self.batch
        inputs: list[int] = self._inputs.tolist()  # type: ignore[assignment]
        plans: dict[int, tuple[Sequence, list[int], GrammarMask | None, list[bytes] | None]] = {}
        pure: dict[int, list[Any]] = {}  # per drafting row: its processors other than the grammar
        proposed: dict[int, list[int]] = {}
        if self.draft_batch is not None:  # the draft model drafts for every row in each pass
            wants = {
                s.row: (s.drafter, s.drafter.pace.size(self._draft_limit(s)))
                for s in seqs
                if isinstance(s.drafter, DraftState) and not s.done and not s.drafter.resting
            }
            proposed = self.draft_batch.propose(wants)
        for seq in seqs:
            drafter = seq.drafter
            if seq.done or drafter is None:
                continue
            if isinstance(drafter, DraftState):
                drafts = proposed.get(seq.row, [])
            else:
                drafts = drafter.propose(self._draft_limit(seq))
            if not drafts:
                continue
            processing = _draft_processors(seq) if seq.processors else ([], None)
            if processing is None:
                continue
            others, grammar = processing
            masks = None
            if grammar is not None:
                # Only drafts the constraint allows are verified, each position under its own mask.
                drafts, masks = grammar.draft_masks(inputs[seq.row], drafts)
                if not drafts or masks is None:
                    drafter.verified(0)
                    continue
            plans[seq.row] = (seq, drafts, grammar, masks)
            if others:
                pure[seq.row] = others
        if not plans:
            if self.draft_batch is not None:
                self.draft_batch.verified({})
            return None
        rows = batch.rows
        if self.draft is not None:
            width = 1 + max(len(p[1]) for p in plans.values())
        else:
            width = self.cost.best_width(rows, [(p[0].drafter.pace, len(p[1])) for p in plans.values()])  # type: ignore[union-attr]
        if width == 1:
            return None
        for r, (seq, drafts, grammar, masks) in list(plans.items()):
            if len(drafts) >= width:
                plans[r] = (seq, drafts[: width - 1], grammar, None if masks is None else masks[:width])
        grid = [[0] * width for _ in range(rows)]
        for r in range(rows):
            grid[r][0] = inputs[r]
        for r, (_, drafts, _, _) in plans.items():
            grid[r][1 : 1 + len(drafts)] = drafts
        x = mx.array(grid, dtype=mx.uint32)
        if isinstance(self.model, VisionModel) and self.model.mrope:
            deltas = mx.array([0 if s is None else s.rope_delta for s in self._rows][:rows], dtype=mx.int32)
            logits = self.model(x, cache=batch.caches, deltas=deltas)
        else:
            logits = self.model(x, cache=batch.caches)
        batch.advance(width)
        self._fed()
        # Rows without drafts: their first column is a decode step's.
        plain = [r for r, s in enumerate(self._rows[:rows]) if s is not None and not s.done and r not in plans]
        lazy: list[Any] = []
        picked = None
        if plain:
            index = mx.array(plain, dtype=mx.int32)
            plain_seqs: list[Sequence | None] = [self._rows[r] for r in plain]
            picked = self._pick(plain_seqs, logits[index, 0, :], self._inputs[index])
            lazy += [picked[0], *picked[1].values(), *picked[2]]
        choices: dict[int, mx.array] = {}
        scored: dict[int, mx.array] = {}
        for r, (seq, drafts, grammar, masks) in plans.items():
            scores = logits[r, : len(drafts) + 1]
            if r in pure:
                scores = self._processed(seq, pure[r], scores, [inputs[r], *drafts])
            if grammar is not None and masks is not None:
                scores = mx.where(grammar.allowed(masks, scores.shape[-1]), scores, -float("inf"))
            if isinstance(seq.sampler, TokenSampler) and seq.sampler.seeded:
                # Each position drawn with its own key, as decoding would: kept while it is the draft.
                choices[r] = seq.sampler.draw(seq.sampler.distribution(scores))
            elif isinstance(seq.sampler, TokenSampler):
                choices[r] = sampled_choice(seq.sampler.distribution(scores), drafts)
            else:
                choices[r] = greedy_choice(scores)
            if seq.top_logprobs is not None:  # each emitted token's, from its own position
                scored[r] = scores - mx.logsumexp(scores, axis=-1, keepdims=True)
        mx.eval(lazy, list(choices.values()), list(scored.values()))
        emitted: dict[int, list[int]] = {}
        for r, (seq, drafts, _, _) in plans.items():
            got: list[int] = choices[r].tolist()  # type: ignore[assignment]
            by_rule = isinstance(seq.sampler, TokenSampler) and not seq.sampler.seeded
            emitted[r] = kept_sampled(got, drafts) if by_rule else kept_greedy(got, drafts)
        plain_tokens: list[int] = [] if picked is None else picked[0].tolist()  # type: ignore[assignment]
        # Each row's cache keeps its input and the drafts it accepted; the rejected columns go.
        kept = [1] * rows
        for r, out in emitted.items():
            kept[r] = len(out)
        batch.settle(width, kept)
        if self.draft_batch is not None:
            self.draft_batch.verified({r: len(out) - 1 for r, out in emitted.items()})
        next_inputs = list(inputs[:rows])
        for r, (seq, drafts, grammar, _) in plans.items():
            out = emitted[r]
            accepted = len(out) - 1
            last = inputs[r]
            if grammar is not None:
                grammar.kept([last, *drafts[:accepted]])
            if seq.processors:  # the tokens fed and kept, as a decode step would have added them
                seq.context = mx.concatenate([seq.context, mx.array([last, *drafts[:accepted]], dtype=mx.uint32)])
            if isinstance(seq.sampler, TokenSampler):
                seq.sampler.advance(len(out))
            assert seq.drafter is not None
            seq.drafter.verified(accepted, len(drafts))
            self.drafts_proposed += len(drafts)
            self.drafts_accepted += accepted
            next_inputs[r] = out[-1]
            for i, token in enumerate(out):
                if i == accepted:  # the model's own next token: the next step feeds it
                    self._mark_unfed(seq)
                self._on_token(seq, token, scored[r][i] if r in scored else None)
                if seq.done:
                    break
        if picked is not None:
            for i, r in enumerate(plain):
                row_seq = self._rows[r]
                assert row_seq is not None
                next_inputs[r] = plain_tokens[i]
                self._mark_unfed(row_seq)
                self._on_token(row_seq, plain_tokens[i], picked[1].get(i))
        self.speculative_steps += 1
        self.batched_speculative_steps += len(plans) > 1
        self._inputs = mx.array(next_inputs, dtype=mx.uint32)
        self._flush()
        return rows, width

    # ----- decode -----

    def _decode(self) -> _Step:
        """Build and queue one decode step of every row."""
        assert self.batch is not None and self._inputs is not None
        self._fed()
        seqs = list(self._rows)
        inputs = self._inputs
        logits = None
        deltas = None
        if isinstance(self.model, VisionModel) and self.model.mrope:
            deltas = mx.array([0 if s is None else s.rope_delta for s in seqs], dtype=mx.int32)
        if self.compiled is not None:
            assert isinstance(self.batch, SlotBatch)
            logits = self.compiled(self.batch, inputs, deltas)
        if logits is None:
            if deltas is not None:
                logits = self.model(inputs[:, None], cache=self.batch.caches, deltas=deltas)[:, -1, :]
            else:
                logits = self.model(inputs[:, None], cache=self.batch.caches)[:, -1, :]
        self.batch.advance(1)
        sampled, logprobs, contexts = self._pick(seqs, logits, inputs)
        mx.async_eval(sampled, list(logprobs.values()), contexts)  # type: ignore[no-untyped-call]
        self._inputs = sampled
        first = all(s is None or s.generated == 0 for s in seqs)
        return _Step(seqs, sampled, logprobs, first)

    def _pick(
        self, seqs: list[Sequence | None], logits: mx.array, inputs: mx.array
    ) -> tuple[mx.array, dict[int, mx.array], list[mx.array]]:
        """Each row's next token from its logits (``inputs``: what was fed), lazily: logits
        processors over each row's context, its sampler, and its logprobs when asked."""
        contexts: list[mx.array] = []
        with_processors = [r for r, s in enumerate(seqs) if s is not None and s.processors and not s.done]
        if with_processors:
            rows = [logits[r : r + 1] for r in range(len(seqs))]
            for r in with_processors:
                seq = seqs[r]
                assert seq is not None
                seq.context = mx.concatenate([seq.context, inputs[r : r + 1]])
                contexts.append(seq.context)
                row = rows[r]
                for processor in seq.processors:
                    row = processor(seq.context, row)
                rows[r] = row
            logits = mx.concatenate(rows, axis=0)
        sampled = self._sample(seqs, logits)
        logprobs: dict[int, mx.array] = {}
        for r, seq in enumerate(seqs):
            if seq is not None and seq.top_logprobs is not None and not seq.done:
                row = logits[r]
                logprobs[r] = row - mx.logsumexp(row, keepdims=True)
        return sampled, logprobs, contexts

    def _sample(self, seqs: list[Sequence | None], logits: mx.array) -> mx.array:
        samplers = [s.sampler for s in seqs if s is not None]
        greedy = mlx_lm_api.greedy_sampler
        if all(s is greedy for s in samplers):
            out: mx.array = mx.argmax(logits, axis=-1).astype(mx.uint32)
            return out
        first = samplers[0]
        if all(s is first for s in samplers) and len(samplers) == len(seqs):
            out = first(logits).astype(mx.uint32)
            return out
        parts = []
        for r, seq in enumerate(seqs):
            sampler = greedy if seq is None or seq.sampler is None else seq.sampler
            parts.append(sampler(logits[r : r + 1]).reshape(1).astype(mx.uint32))
        return mx.concatenate(parts)

    def _collect(self, step: _Step) -> float:
        """Read a step's tokens (waiting for the device) and turn them into outputs; returns
        the time spent waiting."""
        t0 = time.perf_counter()
        tokens: list[int] = step.sampled.tolist()  # type: ignore[assignment]
        if step.logprobs:
            mx.eval(list(step.logprobs.values()))
        waited = time.perf_counter() - t0
        for r, seq in enumerate(step.seqs):
            if seq is None or seq.done:
                continue
            self._on_token(seq, tokens[r], step.logprobs.get(r))
        return waited

    def _collect_unpipelined(self, step: _Step) -> float:
        """:meth:`_collect` and send the outputs before the next step is queued (its rows' last
        tokens are then in no queued step: see :meth:`_mark_unfed`); returns the time waited."""
        for seq in step.seqs:
            if seq is not None and not seq.done:
                self._mark_unfed(seq)
        waited = self._collect(step)
        self._flush()
        return waited

    def _on_token(self, seq: Sequence, token: int, row: mx.array | None) -> None:
        seq.generated += 1
        seq.out_ids.append(token)
        if seq.drafter is not None and len(seq.drafter.context) < len(seq.ids) + len(seq.out_ids):
            seq.drafter.extend([token])
        finish: FinishReason | None = None
        if token in seq.stop_ids:
            matched = token if token in seq.params.stop_token_ids else None
            finish = {"type": "stop", "matched": matched}
        elif seq.generated >= seq.max_tokens:
            finish = {"type": "length"}
        # A matched stop token id is reported, not shown; EOS and padding are dropped by the decoder.
        delta = "" if finish and finish.get("matched") is not None else seq.decoder.push(token)
        logprobs = self._logprobs(seq, token, row) if row is not None and seq.top_logprobs is not None else None
        if finish is None:
            self._emit(seq, self._output(seq, delta, [token], None, logprobs))
            return
        delta += seq.decoder.flush()
        seq.done = True
        self._end_row(seq)
        self._emit(seq, self._output(seq, delta, [token], finish, logprobs))

    def _logprobs(self, seq: Sequence, token: int, row: Any) -> _Logprobs:
        decode = self.tokenizer.decode
        out: _Logprobs = {"output_token_logprobs": [(float(row[token].item()), token, decode([token]))]}
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

    # ----- outputs -----

    def _output(
        self,
        seq: Sequence,
        delta: str,
        ids: list[int],
        finish: FinishReason | None,
        logprobs: _Logprobs | None,
    ) -> GenerateOutput:
        meta: MetaInfo = {
            "prompt_tokens": len(seq.tokens),
            "completion_tokens": seq.generated,
            "cached_tokens": seq.cached_tokens,
            "finish_reason": finish,
        }
        if logprobs:
            meta["output_token_logprobs"] = logprobs["output_token_logprobs"]
            if "output_top_logprobs" in logprobs:
                meta["output_top_logprobs"] = logprobs["output_top_logprobs"]
        out: GenerateOutput = {"delta": delta, "output_ids": ids, "meta_info": meta}
        if seq.with_index:
            out["index"] = seq.index
        return out

    def _finish(self, seq: Sequence, finish: FinishReason, delta: str) -> None:
        if not seq.done:
            seq.done = True
            self._emit(seq, self._output(seq, delta, [], finish, None))

    def _emit(self, seq: Sequence, item: GenerateOutput) -> None:
        self._outbox.append((seq.outlet, item))

    def _flush(self) -> None:
        """Hand the outputs gathered since the last flush to their loops, one wake-up per loop."""
        if not self._outbox:
            return
        by_loop: dict[Mailbox, list[tuple[asyncio.Queue[GenerateOutput], GenerateOutput]]] = {}
        for outlet, item in self._outbox:
            by_loop.setdefault(outlet.mailbox, []).append((outlet.queue, item))
        self._outbox.clear()
        for mailbox, items in by_loop.items():
            mailbox.post(items)


def _kinds(caches: list[Any]) -> str:
    """The cache classes of a model's layers, for a log line or an error."""
    return ", ".join(sorted({type(c).__name__ for c in caches}))


def _cache_arrays(cache: Any) -> list[mx.array]:
    """The arrays a per-layer cache holds (for ``mx.eval``)."""
    state = getattr(cache, "state", None)
    if state is None:
        return []
    out: list[mx.array] = []
    stack = [state]
    while stack:
        item = stack.pop()
        if isinstance(item, mx.array):
            out.append(item)
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return out
