"""The decode step of the running batch, compiled once per shape (``mx.compile``).

Built eagerly, every decode step runs the model's Python code again: each layer's projections,
norms, rope, attention and the cache's writes become new graph nodes, about 0.8-0.9 ms per step
for the 2-layer model of ``benches/mlx_tiny.py`` and proportionally more per layer, on the host,
before the device starts. On an accelerator, where the step itself is cheap, that decides
throughput (~13 % of the MLX thread at 32 clients on an H200, py-spy). Compiled, the model's code
runs once per shape and each later step replays the recorded graph: 0.23-0.36 ms to build a step of
that model here (OpenBLAS, 1 / 8 / 32 rows), with MLX fusing elementwise chains besides.

What makes the shape stable: the step computes the live rows rounded up to a bucket (1, 2, 4, 8, 12,
16, 24, 32, 48, ...: :func:`_bucket`) and attends over the columns up to the write column rounded up
to :data:`SPAN_STEP`; the write column, each row's first live column and its position are inputs
(arrays), not Python numbers, so a step at column 40 and one at column 41 are the same graph.
Columns past the write column and rows past the live ones are masked out (such a row attends to its
own column only, so no row is empty), as are the holes speculation leaves inside rows (a per-column
mask, also an input). A new shape (another bucket of rows, a longer span, grown buffers) is traced
and compiled once, the first time it occurs (that step takes ~4 ms more for the 2-layer model and
~0.1 s more for SmolLM2-135M's 30 layers on this project's 2-core CPU); MLX keeps each. The buffers
go in and come back as arrays: nothing else holds them during the step, so MLX updates them in place
(one column written, no copy of the cache). With ``--kv-bits`` each layer's keys and values are three
buffers each (packed data, scales, biases) and the step quantizes the new column as the eager
step's cache does.

Attending over masked columns adds zeros to each softmax, which can change the last bits of a
logit. At load (:meth:`CompiledDecode.check`) one step of a small batch of rows of different
lengths runs both ways; the compiled step is used only when its logits agree with the eager
step's, and is turned off (logged) when they do not or the model cannot be traced.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from smgpy.mlx import mlx_lm_api
from smgpy.mlx.slots import QUANTIZED_PARTS, SlotBatch, grouped_mask

__all__ = ["SPAN_STEP", "CompiledDecode", "agreement", "check_batch"]

# Columns a step attends to, rounded up to this: a new span is a new shape (compiled once).
SPAN_STEP = 64


def _round_up(n: int, step: int) -> int:
    return (n + step - 1) // step * step


log = logging.getLogger("smgpy.mlx")


def _bucket(rows: int) -> int:
    """Rows computed for ``rows`` live ones: 1, 2, 4, 8, then 12, 16, 24, 32, 48, 64... Padding rows
    compute a whole row (its attention over the whole span too): with powers of two alone, a
    long prompt joining 8 rows made 16 rows of ~1,100 columns, and the next long prompt stalled
    the running rows 16.3-17.3 ms; in 12 rows, 11.8-14.9 ms (tiny model, this CPU). A half step
    from 12 on keeps padding under a third of the rows, for a few more shapes to trace."""
    p = 1 << max(0, rows - 1).bit_length()
    if p >= 16 and rows <= 3 * p // 4:
        return 3 * p // 4
    return p


@dataclass(frozen=True)
class _StepInputs:
    """What every layer's traced cache reads of the step: the rows computed, the attended columns'
    indices, the write column, each row's first live column and position, which columns hold
    tokens, and whether the mask takes a query-group axis."""

    rows: int
    cols: mx.array
    idx: mx.array
    starts: mx.array
    offset: mx.array
    keep: mx.array
    grouped: bool


class _TracedCache:
    """One layer's cache while the step is traced: the buffers in, the written buffers out.

    It answers what mlx-lm's attention layers ask of a batch cache (``offset``, ``make_mask``,
    ``update_and_fetch``), with the write column, the rows' first live columns and positions as
    arrays, so the traced graph does not depend on their values.
    """

    def __init__(self, keys: mx.array, values: mx.array, step: _StepInputs) -> None:
        self.keys = keys
        self.values = values
        self._step = step
        self.offset = step.offset

    def make_mask(self, N: int, return_array: bool = False, **kwargs: Any) -> mx.array:  # noqa: N803 (mlx-lm's name)
        step = self._step
        cols = step.cols
        queries = step.idx + mx.arange(N)
        causal = cols[None, :] <= queries[:, None]
        window = kwargs.get("window_size")
        if window is not None:  # a sliding-window layer over plain caches (as the eager step's mask)
            causal = causal & (queries[:, None] < cols[None, :] + window)
        live = cols[None, None, None, :] >= step.starts[:, None, None, None]
        mask: mx.array = causal[None, None] & live & step.keep[:, None, None, :]
        return grouped_mask(mask) if step.grouped else mask

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[mx.array, mx.array]:
        at = self._step.idx[None]
        self.keys = mx.slice_update(self.keys, keys, at, axes=(2,))
        self.values = mx.slice_update(self.values, values, at, axes=(2,))
        rows, span = self._step.rows, self._step.cols.shape[0]
        return self.keys[:rows, :, :span, :], self.values[:rows, :, :span, :]

    def buffers(self) -> tuple[mx.array, ...]:
        """The written buffers, in the order they came in."""
        return self.keys, self.values


class _TracedQuantizedCache(_TracedCache):
    """A layer's cache of quantized keys and values (``--kv-bits``) while the step is traced: each
    is a tuple (packed data, scales, biases), the token's columns quantized as
    :class:`~smgpy.mlx.slots.SlotQuantizedKVCache` writes them. mlx-lm's attention reads any cache
    with ``bits`` through its quantized path."""

    keys: Any
    values: Any

    def __init__(
        self, keys: tuple[mx.array, ...], values: tuple[mx.array, ...], step: _StepInputs, bits: int, group_size: int
    ) -> None:
        self.keys = keys
        self.values = values
        self._step = step
        self.offset = step.offset
        self.bits = bits
        self.group_size = group_size

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[Any, Any]:
        at = self._step.idx[None]
        rows, span = self._step.rows, self._step.cols.shape[0]
        out: list[tuple[mx.array, ...]] = []
        for bufs, new in ((self.keys, keys), (self.values, values)):
            parts = mx.quantize(new, group_size=self.group_size, bits=self.bits)
            out.append(tuple(mx.slice_update(b, x, at, axes=(2,)) for b, x in zip(bufs, parts, strict=True)))
        self.keys, self.values = out
        return tuple(a[:rows, :, :span, :] for a in self.keys), tuple(a[:rows, :, :span, :] for a in self.values)

    def buffers(self) -> tuple[mx.array, ...]:
        return (*self.keys, *self.values)


class CompiledDecode:
    """The compiled decode step of a :class:`~smgpy.mlx.slots.SlotBatch`, its keys and values
    quantized where ``kv_bits`` is given (as the batch's)."""

    def __init__(
        self,
        model: Any,
        num_layers: int,
        *,
        deltas: bool = False,
        grouped: bool = False,
        kv_bits: int | None = None,
        kv_group_size: int = 64,
    ) -> None:
        self._model = model
        self._layers = num_layers
        self._grouped = grouped  # the attention mask takes a query-group axis (``slots.grouped_mask``)
        self._bits = kv_bits
        self._group_size = kv_group_size
        # A vision-language model with M-RoPE takes each row's position delta (an input too).
        self._deltas = deltas
        self._zeros: dict[int, mx.array] = {}
        self._fn = mx.compile(self._step)
        self._cols: dict[int, mx.array] = {}  # column indices per attended span
        self._all: dict[tuple[int, int], mx.array] = {}  # an all-true column mask per shape
        self.steps = 0  # compiled steps run (for tests and benches)

    def _step(
        self,
        tokens: mx.array,
        deltas: mx.array,
        cols: mx.array,
        idx: mx.array,
        starts: mx.array,
        offset: mx.array,
        keep: mx.array,
        *bufs: mx.array,
    ) -> Any:
        rows = tokens.shape[0]
        step = _StepInputs(rows, cols, idx, starts, offset, keep, self._grouped)
        n = 2 * (1 if self._bits is None else QUANTIZED_PARTS)  # buffers per layer, as ``SlotBatch.parts``
        caches = [self._traced(bufs[n * i : n * (i + 1)], step) for i in range(self._layers)]
        extra = {"deltas": deltas} if self._deltas else {}
        logits = self._model(tokens[:, None], cache=caches, **extra)[:, -1, :]
        return (logits, *[a for c in caches for a in c.buffers()])

    def _traced(self, bufs: tuple[mx.array, ...], step: _StepInputs) -> _TracedCache:
        """One layer's traced cache over its buffers (keys' parts, then values')."""
        if self._bits is None:
            return _TracedCache(bufs[0], bufs[1], step)
        half = len(bufs) // 2
        return _TracedQuantizedCache(bufs[:half], bufs[half:], step, self._bits, self._group_size)

    def __call__(self, batch: SlotBatch, inputs: mx.array, deltas: mx.array | None = None) -> mx.array | None:
        """Queue-ready logits of one decode step of ``batch`` (rows ``0..batch.rows``), its
        buffers updated; None when the batch has no buffers yet (the eager step makes them).
        ``deltas``: each row's position delta, for a model built with ``deltas=True``."""
        bufs = batch.take_buffers(1)
        if bufs is None:
            return None
        # The live rows, rounded up to a bucket (at most the buffers' capacity, which stays at the
        # largest batch seen): one shape per bucket, and a lone request after a busy spell
        # computes one row, not the capacity.
        rows = inputs.shape[0]
        bucket = min(bufs[0].shape[0], _bucket(rows))
        span = _round_up(batch.write_column + 1, SPAN_STEP)
        idx, starts, offset, keep = batch.step_positions(bucket, span)
        if keep is None:  # no holes (speculation's rejected columns): every column may hold a token
            keep = self._all.get((bucket, span))
            if keep is None:
                keep = self._all[(bucket, span)] = mx.ones((bucket, span), dtype=mx.bool_)
        if bucket > rows:
            inputs = mx.concatenate([inputs, mx.zeros((bucket - rows,), dtype=inputs.dtype)])
        if deltas is None or not self._deltas:
            deltas = self._zeros.get(bucket)
            if deltas is None:
                deltas = self._zeros[bucket] = mx.zeros((bucket,), dtype=mx.int32)
        elif bucket > rows:
            deltas = mx.concatenate([deltas, mx.zeros((bucket - rows,), dtype=deltas.dtype)])
        cols = self._cols.get(span)
        if cols is None:
            cols = self._cols[span] = mx.arange(span, dtype=mx.int32)
        out = self._fn(inputs, deltas, cols, idx, starts, offset, keep, *bufs)
        del bufs  # the batch's only references: MLX writes the new column in place
        batch.give_buffers(list(out[1:]))
        self.steps += 1
        logits: mx.array = out[0]
        return logits[:rows] if bucket > rows else logits

    def check(self, make_batch: Any) -> bool:
        """Run one step of a small batch both ways and compare (see the module doc).

        ``make_batch()`` returns a fresh :class:`SlotBatch` holding rows of different lengths and
        their next inputs; it is called twice.
        """
        try:
            eager_batch, inputs = make_batch()
            eager = self._model(inputs[:, None], cache=eager_batch.caches)[:, -1, :]
            batch, inputs = make_batch()
            compiled = self(batch, inputs)
            if compiled is None:
                return False
            mx.eval(eager, compiled)
        except Exception as e:  # a model this step cannot trace: the eager step serves it
            log.info("decode step not compiled: tracing %s failed (%s)", type(self._model).__module__, e)
            return False
        scale = mx.abs(eager).max().item()
        diff = mx.abs(eager.astype(mx.float32) - compiled.astype(mx.float32)).max().item()
        assert isinstance(scale, float) and isinstance(diff, float)
        if diff > agreement(eager.dtype) * max(1.0, scale):
            log.info(
                "decode step not compiled: %s's compiled logits differ from the eager step's by %.3g",
                type(self._model).__module__,
                diff,
            )
            return False
        self.steps = 0
        return True


def agreement(dtype: mx.Dtype) -> float:
    """How far, relative to the logits' largest magnitude, a compiled step's logits of ``dtype`` may
    be from the eager step's and still be taken for the same computation.

    Float32 logits of the two agree far closer than 1e-3 of their scale, which leaves room for a
    backend's other summation orders and nothing more. In bfloat16 and float16 the dtype decides: where
    a backend fuses a chain of elementwise ops into one kernel, it can keep the intermediates in float32
    while the eager step rounds each of them, and a fused attention can sum the masked columns in
    another order, which moves logits by a few units in their last place (2^-7 of their size in
    bfloat16, 2^-10 in float16; on this project's CPU the two agree to the bit in bfloat16, on a GPU
    this is not measured). With the float32 bound, a bfloat16 model could lose its compiled step
    to rounding alone; the bound there is 8 such units (6 % of the scale in bfloat16). A step that is
    wrong, not rounded (a mask off by a column, a cache it cannot trace), misses by more.
    """
    return max(1e-3, 8 * mx.finfo(dtype).eps)


def check_batch(
    model: Any,
    num_layers: int,
    lengths: tuple[int, ...] = (5, 2, 9),
    *,
    grouped: bool = False,
    kv_bits: int | None = None,
    kv_group_size: int = 64,
) -> tuple[SlotBatch, mx.array]:
    """A batch of rows of ``lengths`` prompt tokens (fixed ids) prefilled alone and joined,
    and each row's next input: what :meth:`CompiledDecode.check` compares on."""
    batch = SlotBatch(num_layers, kv_bits, kv_group_size, grouped=grouped)
    for i, n in enumerate(lengths):
        caches = mlx_lm_api.make_prompt_cache(model)
        tokens = mx.array([[(7 * i + 3 * j + 1) % 97 for j in range(n)]], dtype=mx.uint32)
        model(tokens, cache=caches)
        batch.join(caches, n)
    inputs = mx.array([11 + i for i in range(len(lengths))], dtype=mx.uint32)
    return batch, inputs
