"""The running batch's caches: sequences join and leave without copying the other rows.

mlx-lm's batch caches change membership by rebuilding: ``BatchKVCache.extend`` pads and
concatenates the whole batch's keys and values when a sequence joins, ``filter`` gathers them when
one finishes. On a GPU, where a small model's step costs little, those copies were ~10 % of the
MLX thread at 32 clients (py-spy, 135M shape, H200). :class:`SlotBatch` instead keeps every
attention layer's keys and values in preallocated rows (slots):

- a joining sequence's prefilled keys and values are written into a free row, right-aligned to
  the batch's write column; the copy is proportional to that sequence alone;
- a finishing sequence leaves a hole that the next joiner fills; the batch computes rows
  ``0..rows`` (the highest live row bounds it), so holes cost compute only until refilled;
- the buffers grow in whole steps (256 columns, rows to the next power of two), as mlx-lm's own
  ``KVCache`` grows, and the dead columns left of every live row are cut once there are 64 of
  them (a step attends to them too): copies of the whole batch's live columns, once per 64
  columns of progress at most.

Rows are right-aligned (all rows write the same column each step), so attention needs only each
row's first live column (``left_padding``) and its position (``offset``): the same contract as
mlx-lm's ``BatchKVCache``, whose mask and rope arguments the model classes already accept (the
batch answers ``make_mask`` itself, so holes, below, are masked too).

A speculative step writes several columns in every row, and rows keep different numbers of them
(each keeps the drafts it accepted): :meth:`SlotBatch.settle` takes back the columns no row
kept and leaves the others as holes inside the rows that rejected them. A host-side mask of those
holes goes into attention's mask, each row's position counts its tokens only, and the holes are
squeezed out (one gather of the batch) when that frees a whole step of columns in every row.

With ``kv_bits`` (``smgpy serve --kv-bits``) the rows hold keys and values quantized
(:class:`SlotQuantizedKVCache`): the same slots, with fewer bytes per token.

Models whose caches are not all plain ``KVCache`` layers (sliding windows, recurrent state,
hybrids) go through :class:`MergeBatch`, built on the caches' own public ``merge`` / ``extend``
/ ``filter`` / ``extract``: correct for every cache type mlx-lm batches, at the cost of copies
on each join and leave.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import mlx.core as mx
import numpy as np

from smgpy.mlx.mlx_lm_api import BatchKVCache, KVCache, QuantizedKVCache, create_causal_mask

__all__ = [
    "QUANTIZED_PARTS",
    "MergeBatch",
    "SingleBatch",
    "SlotBatch",
    "SlotKVCache",
    "SlotQuantizedKVCache",
    "can_merge",
    "grouped_mask",
    "is_plain_kv",
    "prefill_caches",
    "prefilled_row",
]

_STEP = 256
# Arrays that hold a quantized layer's keys (and its values): MLX's affine ``mx.quantize`` gives the
# packed data, a scale and a bias per group.
QUANTIZED_PARTS = 3
# Dead columns left of every live row are cut once there are this many: every step attends over
# them (rows are right-aligned, so the span starts at column 0), and a cut copies the live columns
# once. At 256, with short requests coming and going, steps attended over ~2x the columns rows
# held (tiny model, 32 rows: 3,360 against 4,070 tok/s for the step alone at 364 against 104
# columns); at 64 a cut's copy, once per 64 columns of progress, costs about what one step's
# attention reads.
_CUT = 64


def grouped_mask(mask: mx.array) -> mx.array:
    """A ``(rows, 1, queries, columns)`` mask with a query-group axis, ``(rows, 1, 1, queries,
    columns)``: what attention layers that score ``(rows, kv heads, repeats, queries, columns)``
    broadcast against (gemma2; :mod:`smgpy.mlx.batch_probe` finds them)."""
    return mask[:, :, None]


class _GroupedBatchKVCache(BatchKVCache):  # type: ignore[misc]  # mlx-lm's class, untyped
    """mlx-lm's ``BatchKVCache`` (a padded prefill of prompts together) with a grouped mask."""

    def make_mask(self, N: int, return_array: bool = False, **kwargs: Any) -> mx.array:  # noqa: N803 (mlx-lm's name)
        return grouped_mask(super().make_mask(N, return_array=return_array, **kwargs))


def prefill_caches(pads: list[int], num_layers: int, grouped: bool = False) -> list[Any]:
    """Per layer, mlx-lm's ``BatchKVCache`` for prompts prefilled together, left-padded by
    ``pads``; ``grouped``: its mask takes a query-group axis (:func:`grouped_mask`)."""
    cls = _GroupedBatchKVCache if grouped else BatchKVCache
    return [cls(pads) for _ in range(num_layers)]


def prefilled_row(caches: list[Any], row: int, pad: int) -> list[Any]:
    """Row ``row`` of prompts prefilled together (:func:`prefill_caches`), without its ``pad``
    columns of padding: per-layer caches as :meth:`SlotBatch.join` takes them. A layer that stored
    nothing (an attention block replaced by a linear map, as in nemotron-nas) stays empty."""
    return [
        SimpleNamespace(keys=None, values=None)
        if c.keys is None
        else SimpleNamespace(keys=c.keys[row : row + 1, :, pad:], values=c.values[row : row + 1, :, pad:])
        for c in caches
    ]


def is_plain_kv(caches: list[Any]) -> bool:
    """True when every layer's cache is mlx-lm's plain, unbounded ``KVCache``."""
    return bool(caches) and all(type(c) is KVCache for c in caches)


def can_merge(caches: list[Any]) -> bool:
    """True when every layer's cache type can be merged into a batch that extends and filters."""
    for c in caches:
        merge = getattr(type(c), "merge", None)
        if merge is None:
            return False
    return True


def _round_up(n: int, step: int) -> int:
    return (n + step - 1) // step * step


def _relaid(a: mx.array, rows: int, src: int, dst: int, width: int) -> mx.array:
    """A buffer like ``a`` (capacity rows, heads, columns, ...), ``width`` columns wide, holding
    rows ``0..rows`` of ``a``'s columns from ``src`` on, written from column ``dst``; zeros
    elsewhere. The rows past ``rows`` hold no sequence and are not copied: after a busy spell the
    capacity stays at the largest batch seen (32 rows for 8 live ones made a long joiner's shift
    copy four times the keys and values it had to)."""
    n = min(a.shape[2] - src, width - dst)
    out = mx.zeros((a.shape[0], a.shape[1], width, *a.shape[3:]), a.dtype)
    if rows > 0 and n > 0:
        out[:rows, :, dst : dst + n] = a[:rows, :, src : src + n]
    return out


class _SlotState:
    """What every layer of a :class:`SlotBatch` shares: the write column, each row's start, and
    the columns inside rows that hold no token (drafts a speculative step rejected in one row
    while another row kept more)."""

    def __init__(self) -> None:
        self.idx = 0  # the next column every row writes
        self.starts: list[int] = []  # per row: its first live column
        self.holes: list[int] = []  # per row: dead columns between its start and ``idx``
        # Per row and column, whether it holds a token (None while no row has holes): the mask
        # attention ANDs with the causal one. Host-side, so marking a hole builds no graph.
        self.keep: np.ndarray | None = None
        self._keep_mx: tuple[int, int, mx.array] | None = None  # the last mask handed out, by shape
        self.offset = mx.array([], dtype=mx.int32)  # per row: its position (idx - start - holes)
        self.left_padding = mx.array([], dtype=mx.int32)
        self.grouped = False  # masks take a query-group axis (:func:`grouped_mask`)

    def refresh(self) -> None:
        self.left_padding = mx.array(self.starts, dtype=mx.int32)
        self.offset = mx.array([self.idx - s - h for s, h in zip(self.starts, self.holes, strict=True)], dtype=mx.int32)

    def keep_mask(self, rows: int, width: int) -> mx.array | None:
        """Which of the first ``width`` columns of rows ``0..rows`` hold tokens, (rows, width);
        None while no row has holes."""
        keep = self.keep
        if keep is None:
            return None
        cached = self._keep_mx
        if cached is not None and cached[:2] == (rows, width):
            return cached[2]
        part = np.ones((rows, width), dtype=bool)
        r, w = min(rows, keep.shape[0]), min(width, keep.shape[1])
        part[:r, :w] = keep[:r, :w]
        out = mx.array(part)
        self._keep_mx = (rows, width, out)
        return out

    def mark_dead(self, row: int, begin: int, end: int) -> None:
        """Columns ``begin..end`` of ``row`` hold no token."""
        rows, width = len(self.starts), max(end, self.idx)
        keep = self.keep
        if keep is None:
            keep = np.ones((rows, width), dtype=bool)
        elif keep.shape[0] < rows or keep.shape[1] < width:
            grown = np.ones((max(rows, keep.shape[0]), max(width, keep.shape[1])), dtype=bool)
            grown[: keep.shape[0], : keep.shape[1]] = keep
            keep = grown
        keep[row, begin:end] = False
        self.keep = keep
        self._keep_mx = None

    def clear_row(self, row: int) -> None:
        """``row`` holds a new sequence: no holes."""
        self.holes[row] = 0
        if self.keep is not None and row < self.keep.shape[0]:
            self.keep[row] = True
            self._keep_mx = None

    def drop_holes_if_none(self, live: list[bool]) -> None:
        if self.keep is not None and not any(h for h, alive in zip(self.holes, live, strict=True) if alive):
            self.keep = None
            self._keep_mx = None
            self.holes = [0] * len(self.holes)

    def shift_columns(self, columns: int) -> None:
        if self.keep is not None:
            self.keep = np.pad(self.keep, ((0, 0), (columns, 0)), constant_values=True)
            self._keep_mx = None

    def cut_columns(self, columns: int) -> None:
        if self.keep is not None:
            self.keep = np.ascontiguousarray(self.keep[:, columns:])
            self._keep_mx = None

    def live_columns(self, row: int) -> np.ndarray:
        """The columns of ``row`` that hold its tokens, in order."""
        start = self.starts[row]
        if self.keep is None or not self.holes[row]:
            return np.arange(start, self.idx)
        cols = np.arange(start, self.idx)
        keep = self.keep[row, start : self.idx]
        if keep.shape[0] < cols.shape[0]:
            keep = np.concatenate([keep, np.ones(cols.shape[0] - keep.shape[0], dtype=bool)])
        live: np.ndarray = cols[keep]
        return live


class SlotKVCache:
    """One attention layer's keys and values for the running batch (see the module doc).

    It answers the calls mlx-lm's attention layers make on a batch cache: ``offset`` (each
    row's position, for rope), ``make_mask`` and ``update_and_fetch``. Keys and values are each
    held as a tuple of arrays laid out ``(capacity rows, heads, width, ...)``: one array here,
    three in :class:`SlotQuantizedKVCache`; every structural operation maps over the tuple.
    """

    def __init__(self, state: _SlotState) -> None:
        self._s = state
        self._k: tuple[mx.array, ...] | None = None
        self._v: tuple[mx.array, ...] | None = None

    # ----- what a subclass changes: how a token's keys or values are stored -----

    def _encode(self, x: mx.array) -> tuple[mx.array, ...]:
        return (x,)

    def _view(self, parts: tuple[mx.array, ...]) -> Any:
        """What attention reads (``update_and_fetch``'s result)."""
        return parts[0]

    # ----- mlx-lm's batch-cache interface -----

    @property
    def keys(self) -> Any:
        return None if self._k is None else self._view(self._k)

    @property
    def values(self) -> Any:
        return None if self._v is None else self._view(self._v)

    @property
    def offset(self) -> mx.array:
        return self._s.offset

    @property
    def left_padding(self) -> mx.array:
        return self._s.left_padding

    @property
    def nbytes(self) -> int:
        if self._k is None or self._v is None:
            return 0
        return int(sum(a.nbytes for a in self._k + self._v))

    @property
    def state(self) -> tuple[Any, ...]:
        return self.keys, self.values, self._s.offset, self._s.left_padding, self._s.idx

    def make_mask(self, N: int, return_array: bool = False, **kwargs: Any) -> mx.array:  # noqa: N803 (mlx-lm's name)
        s = self._s
        mask: mx.array = create_causal_mask(N, offset=s.idx, left_padding=s.left_padding, **kwargs)
        keep = s.keep_mask(len(s.starts), s.idx + N)
        if keep is not None:
            mask = mask & keep[:, None, None, :]
        return grouped_mask(mask) if s.grouped else mask

    def update_and_fetch(self, keys: mx.array, values: mx.array) -> tuple[Any, Any]:
        rows, n = keys.shape[0], keys.shape[2]
        prev = self._s.idx
        k, v = self._encode(keys), self._encode(values)
        self._ensure(rows, prev + n, k, v)
        assert self._k is not None and self._v is not None
        whole = rows == self._k[0].shape[0]
        for buf, new in zip(self._k + self._v, k + v, strict=True):
            if whole:
                buf[..., prev : prev + n, :] = new
            else:
                buf[:rows, :, prev : prev + n, :] = new
        if whole:
            return self._view(tuple(a[..., : prev + n, :] for a in self._k)), self._view(
                tuple(a[..., : prev + n, :] for a in self._v)
            )
        return self._view(tuple(a[:rows, :, : prev + n, :] for a in self._k)), self._view(
            tuple(a[:rows, :, : prev + n, :] for a in self._v)
        )

    # ----- structure (between steps, from SlotBatch) -----

    def _ensure(self, rows: int, width: int, like_k: tuple[mx.array, ...], like_v: tuple[mx.array, ...]) -> None:
        """Grow the buffers to hold ``rows`` rows and ``width`` columns (whole steps)."""
        if self._k is None or self._v is None:
            cap = 1 << max(0, rows - 1).bit_length()
            w = _round_up(max(width, 1), _STEP)
            self._k = tuple(mx.zeros((cap, a.shape[1], w, a.shape[3]), a.dtype) for a in like_k)
            self._v = tuple(mx.zeros((cap, a.shape[1], w, a.shape[3]), a.dtype) for a in like_v)
            return
        cap, _, w, _ = self._k[0].shape
        if rows > cap:
            more = (1 << (rows - 1).bit_length()) - cap
            self._k, self._v = (
                tuple(mx.concatenate([a, mx.zeros((more, *a.shape[1:]), a.dtype)]) for a in parts)
                for parts in (self._k, self._v)
            )
            cap += more
        if width > w:
            more = _round_up(width - w, _STEP)
            self._k, self._v = (
                tuple(
                    mx.concatenate([a, mx.zeros((cap, a.shape[1], more, a.shape[3]), a.dtype)], axis=2) for a in parts
                )
                for parts in (self._k, self._v)
            )

    def shift(self, columns: int, width: int, rows: int) -> None:
        """Move rows ``0..rows`` ``columns`` to the right (room for a joiner longer than the
        batch), in buffers ``width`` columns wide: one copy, of the columns that stay (the room a
        buffer had right of its write column is not copied, nor grown again by the joiner's
        write)."""
        if self._k is None or self._v is None:
            return
        self._k, self._v = (tuple(_relaid(a, rows, 0, columns, width) for a in parts) for parts in (self._k, self._v))

    def cut(self, columns: int, width: int, rows: int) -> None:
        """Drop the first ``columns`` columns, dead in every live row, into buffers ``width``
        columns wide (whole steps, at least the live columns; what lies beyond is empty room, not
        worth a copy). Buffers stay whole steps wide even where the old one ends first, so a
        compiled step meets few shapes (a cut to 192 columns made the next growth 448, each a
        shape to trace)."""
        if self._k is None or self._v is None:
            return
        self._k, self._v = (tuple(_relaid(a, rows, columns, 0, width) for a in parts) for parts in (self._k, self._v))

    def place(self, row: int, rows: int, keys: Any, values: Any) -> None:
        """Write one sequence's keys and values (1, heads, L, dim) into ``row``, ending at the
        write column. Tuples are already stored form (a quantized prefix-cache entry)."""
        if keys is None or values is None:
            return
        k = keys if isinstance(keys, tuple) else self._encode(keys)
        v = values if isinstance(values, tuple) else self._encode(values)
        n = k[0].shape[2]
        if n == 0:
            return
        idx = self._s.idx
        self._ensure(rows, idx, k, v)
        assert self._k is not None and self._v is not None
        for buf, new in zip(self._k + self._v, k + v, strict=True):
            buf[row : row + 1, :, idx - n : idx, :] = new

    def take(self, row: int, cols: np.ndarray) -> tuple[Any, Any] | None:
        """A copy of one row's keys and values at ``cols`` (ascending), as stored (arrays, or
        quantized triples)."""
        if self._k is None or self._v is None or cols.shape[0] == 0:
            return None
        start, n = int(cols[0]), cols.shape[0]
        if int(cols[-1]) - start + 1 == n:  # contiguous: a slice
            k, v = (
                self._view(tuple(mx.contiguous(a[row : row + 1, :, start : start + n, :]) for a in parts))
                for parts in (self._k, self._v)
            )
            return k, v
        index = mx.array(cols, dtype=mx.int32)
        k, v = (
            self._view(tuple(mx.take(a[row : row + 1], index, axis=2) for a in parts)) for parts in (self._k, self._v)
        )
        return k, v

    def compact(self, index: mx.array, width: int) -> None:
        """Gather every row's columns by ``index`` (rows, width): each row's tokens moved right,
        over its holes (see :meth:`SlotBatch._trim`)."""
        if self._k is None or self._v is None:
            return
        rows = index.shape[0]
        at = index[:, None, :, None]

        def gather(a: mx.array) -> mx.array:
            moved = mx.take_along_axis(a[:rows, :, :width, :], at, axis=2)
            a[:rows, :, :width, :] = moved
            return a

        self._k, self._v = (tuple(gather(a) for a in parts) for parts in (self._k, self._v))

    def new_sequence_cache(self) -> Any:
        """An empty per-sequence cache of the kind :meth:`take` fills (the prefix cache's entries)."""
        return KVCache()


class SlotQuantizedKVCache(SlotKVCache):
    """A :class:`SlotKVCache` whose keys and values are stored quantized (``--kv-bits``).

    Each token's keys and values are quantized per group of ``group_size`` channels (MLX's
    affine ``mx.quantize``: packed integers plus a scale and a bias per group) when written, and
    attention reads them through ``mx.quantized_matmul``: mlx-lm's attention layers take that
    path for any cache with a ``bits`` attribute, as they do for mlx-lm's ``QuantizedKVCache``.
    Prompts are prefilled at full precision in their own caches and quantized when they join.
    The prefix cache keeps rows as mlx-lm ``QuantizedKVCache`` entries (the same bytes per token
    as here); a hit prefills the rest of its prompt on them, and joins without re-quantizing.
    """

    def __init__(self, state: _SlotState, bits: int, group_size: int) -> None:
        super().__init__(state)
        self.bits = bits
        self.group_size = group_size

    def _encode(self, x: mx.array) -> tuple[mx.array, ...]:
        return tuple(mx.quantize(x, group_size=self.group_size, bits=self.bits))

    def _view(self, parts: tuple[mx.array, ...]) -> Any:
        return parts

    def new_sequence_cache(self) -> Any:
        return QuantizedKVCache(group_size=self.group_size, bits=self.bits)


class SlotBatch:
    """The running batch of a model whose layers all use plain KV caches (see the module doc)."""

    copies_on_join = False

    def __init__(
        self, num_layers: int, kv_bits: int | None = None, kv_group_size: int = 64, *, grouped: bool = False
    ) -> None:
        self._s = _SlotState()
        self._s.grouped = grouped
        self.kv_bits = kv_bits
        self.kv_group_size = kv_group_size
        self.caches: list[SlotKVCache] = [
            SlotKVCache(self._s) if kv_bits is None else SlotQuantizedKVCache(self._s, kv_bits, kv_group_size)
            for _ in range(num_layers)
        ]
        self.live: list[bool] = []

    @property
    def rows(self) -> int:
        """Rows the next step computes (the highest live row + 1)."""
        return len(self.live)

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.caches)

    def join(self, seq_caches: list[Any], length: int, row: int | None = None) -> int:
        """Place a prefilled sequence (per-layer ``KVCache`` holding ``length`` tokens) in a free
        row: ``row`` when given (a batch that mirrors another's rows), else the first free one."""
        s = self._s
        if row is not None:
            if row < len(self.live) and self.live[row]:
                raise ValueError(f"row {row} is taken")
            while len(self.live) <= row:
                self.live.append(False)
                s.starts.append(s.idx)
                s.holes.append(0)
        else:
            try:
                row = self.live.index(False)
            except ValueError:
                row = len(self.live)
                self.live.append(False)
                s.starts.append(s.idx)
                s.holes.append(0)
        if length > s.idx and not any(self.live):
            # Nothing live to keep: start writing right after the joiner, no copy.
            s.idx = length
            s.starts = [s.idx] * len(s.starts)
        elif length > s.idx:
            # A joiner longer than the batch: shift every row right, so that the write column
            # lands on the joiner's length rounded up to a cut step. The joiner starts within 64
            # columns of column 0, and the batch's new width depends on its length alone (a
            # compiled step meets one shape per length step, whatever the batch's column was).
            delta = _round_up(length, _CUT) - s.idx
            width = _round_up(s.idx + delta + 1, _STEP)  # the joiner's write and the next step's
            for c in self.caches:
                c.shift(delta, width, len(self.live))
            s.shift_columns(delta)
            s.idx += delta
            s.starts = [x + delta for x in s.starts]
        for c, sc in zip(self.caches, seq_caches, strict=True):
            k, v = _kv_of(sc, length, self.kv_bits, self.kv_group_size)
            c.place(row, len(self.live), k, v)
        self.live[row] = True
        s.starts[row] = s.idx - length
        s.clear_row(row)
        s.refresh()
        return row

    def leave(self, rows: list[int]) -> list[int] | None:
        """Free ``rows``; rows keep their numbers (holes are refilled), so this returns None."""
        for r in rows:
            self.live[r] = False
        while self.live and not self.live[-1]:
            self.live.pop()
            self._s.starts.pop()
            self._s.holes.pop()
        self._s.drop_holes_if_none(self.live)
        self._trim()
        self._s.refresh()
        return None

    def _trim(self) -> None:
        s = self._s
        if not self.live:
            # Nothing live: start over at column 0 (the buffers are kept for the next joiners).
            s.idx = 0
            s.starts = []
            s.holes = []
            s.keep = None
            return
        if s.keep is not None:
            # Holes left by speculation are squeezed out when that frees a whole step of
            # columns in every row (one copy of the batch, as rarely as a cut).
            freed = min(x + h for x, h, live in zip(s.starts, s.holes, self.live, strict=True) if live)
            if freed >= _STEP:
                self._compact()
        dead = min(start for start, live in zip(s.starts, self.live, strict=True) if live)
        if dead >= _CUT:
            cut = dead // _CUT * _CUT
            width = _round_up(s.idx - cut + 1, _STEP)
            for c in self.caches:
                c.cut(cut, width, len(self.live))
            s.cut_columns(cut)
            s.idx -= cut
            s.starts = [max(0, x - cut) for x in s.starts]

    def _compact(self) -> None:
        """Move every row's tokens right, over its holes: the row then ends at the write column
        with no holes, and starts ``holes`` columns later."""
        s = self._s
        rows, width = len(self.live), s.idx
        index = np.tile(np.arange(width, dtype=np.int32), (rows, 1))
        for r in range(rows):
            if self.live[r] and s.holes[r]:
                cols = s.live_columns(r)
                index[r, width - cols.shape[0] :] = cols
                s.starts[r] = width - cols.shape[0]
        gather = mx.array(index)
        for c in self.caches:
            c.compact(gather, width)
        s.holes = [0] * rows
        s.keep = None
        s._keep_mx = None

    @property
    def write_column(self) -> int:
        """The column every row writes next."""
        return self._s.idx

    @property
    def parts(self) -> int:
        """Arrays per layer's keys (and per its values): 1, or quantized ``QUANTIZED_PARTS``."""
        return 1 if self.kv_bits is None else QUANTIZED_PARTS

    def take_buffers(self, n: int) -> list[mx.array] | None:
        """Every layer's key and value buffers (each layer's key parts, then its value parts: see
        :attr:`parts`), grown to hold the next ``n`` columns, handed to a compiled step
        (:mod:`smgpy.mlx.compiled_step`) that gives them back with :meth:`give_buffers`. The caches
        let go of them meanwhile, so the step can write them in place. None (nothing taken) before
        the first buffers exist."""
        if any(c._k is None or c._v is None for c in self.caches):
            return None
        rows, width = len(self.live), self._s.idx + n
        out: list[mx.array] = []
        for c in self.caches:
            assert c._k is not None and c._v is not None
            c._ensure(rows, width, c._k, c._v)
            out += [*c._k, *c._v]
            c._k = c._v = None
        return out

    def give_buffers(self, bufs: list[mx.array]) -> None:
        """The buffers back from a compiled step (see :meth:`take_buffers`)."""
        p = self.parts
        for i, c in enumerate(self.caches):
            at = 2 * p * i
            c._k, c._v = tuple(bufs[at : at + p]), tuple(bufs[at + p : at + 2 * p])

    def step_positions(self, capacity: int, span: int) -> tuple[mx.array, mx.array, mx.array, mx.array | None]:
        """A compiled step's inputs for ``capacity`` rows attending to ``span`` columns: the write
        column, each row's first live column, its position, and which columns hold tokens (None
        while no row has holes). Rows past the live ones attend to the write column only."""
        s = self._s
        pad = capacity - len(s.starts)
        starts = s.starts + [s.idx] * pad
        holes = s.holes + [0] * pad
        return (
            mx.array(s.idx, dtype=mx.int32),
            mx.array(starts, dtype=mx.int32),
            mx.array([s.idx - x - h for x, h in zip(starts, holes, strict=True)], dtype=mx.int32),
            s.keep_mask(capacity, span),
        )

    def advance(self, n: int) -> None:
        """After a forward pass of ``n`` tokens per row."""
        s = self._s
        s.idx += n
        s.offset = s.offset + n

    def settle(self, width: int, kept: list[int]) -> None:
        """After a speculative step that wrote ``width`` columns in every row: row ``r`` keeps the
        first ``kept[r]`` of them (its input and the drafts accepted), and the rest are dropped.
        The columns no live row keeps are taken back (the next step writes over them); in a row
        that kept fewer than another, the dropped columns become holes, masked from then on."""
        s = self._s
        most = max((k for k, live in zip(kept, self.live, strict=False) if live), default=width)
        s.idx -= width - most
        for r, k in enumerate(kept):
            if r < len(self.live) and self.live[r] and k < most:
                s.holes[r] += most - k
                s.mark_dead(r, s.idx - (most - k), s.idx)
        s.refresh()

    def drop(self, row: int, begin: int, end: int) -> None:
        """Columns ``begin..end`` of ``row`` no longer hold its tokens (drafts that a verification
        rejected, in a draft model's batch); the columns no live row holds at the end are taken
        back."""
        s = self._s
        if end <= begin:
            return
        s.holes[row] += end - begin
        s.mark_dead(row, begin, end)
        keep = s.keep
        assert keep is not None
        live = [r for r, alive in enumerate(self.live) if alive]
        floor = max((s.starts[r] for r in live), default=s.idx)
        while s.idx > floor and all(not keep[r, s.idx - 1] for r in live):
            s.idx -= 1
            keep[:, s.idx] = True
            for r in live:
                s.holes[r] -= 1
        s._keep_mx = None
        s.drop_holes_if_none(self.live)
        s.refresh()

    def extract(self, row: int, length: int) -> list[Any]:
        """Per-layer ``KVCache`` copies of the first ``length`` tokens of ``row`` (prefix cache)."""
        cols = self._s.live_columns(row)[:length]
        out = []
        for c in self.caches:
            kv = c.take(row, cols)
            cache = c.new_sequence_cache()
            if kv is not None:
                cache.keys, cache.values = kv
                cache.offset = length
            out.append(cache)
        return out

    def reset(self) -> None:
        """Drop every row and the buffers."""
        self.__init__(len(self.caches), self.kv_bits, self.kv_group_size, grouped=self._s.grouped)  # type: ignore[misc]


def _nbytes(caches: list[Any] | None) -> int:
    return 0 if caches is None else sum(int(getattr(c, "nbytes", 0)) for c in caches)


def _kv_of(cache: Any, length: int, bits: int | None, group_size: int) -> tuple[Any, Any]:
    """The first ``length`` tokens' keys and values of a per-sequence cache (1 row): arrays, or
    quantized triples when the cache holds them quantized as the batch stores them."""
    if length == 0 or cache.keys is None:
        return None, None
    if not isinstance(cache.keys, tuple | list):  # (a list when read back from disk)
        return cache.keys[..., :length, :], cache.values[..., :length, :]
    # A QuantizedKVCache: a prefix-cache hit under --kv-bits. One written under other settings
    # (a disk entry from an earlier run) is dequantized and stored the batch's way.
    k, v = (tuple(a[..., :length, :] for a in parts) for parts in (cache.keys, cache.values))
    if (cache.bits, cache.group_size) == (bits, group_size):
        return k, v
    g, b = cache.group_size, cache.bits
    return (
        mx.dequantize(k[0], k[1], k[2], group_size=g, bits=b),
        mx.dequantize(v[0], v[1], v[2], group_size=g, bits=b),
    )


class MergeBatch:
    """The running batch of any other model, on its cache classes' own batch operations.

    Joins merge the sequence's caches and extend the batch; leaves filter it (rows renumber).
    """

    copies_on_join = True

    def __init__(self) -> None:
        self.caches: list[Any] | None = None
        self._rows = 0

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def nbytes(self) -> int:
        return _nbytes(self.caches)

    def join(self, seq_caches: list[Any], length: int) -> int:
        merged = [type(c).merge([c]) for c in seq_caches]
        if self.caches is None:
            self.caches = merged
        else:
            for c, m in zip(self.caches, merged, strict=True):
                _same_widths(c, m)
                c.extend(m)
        self._rows += 1
        return self._rows - 1

    def leave(self, rows: list[int]) -> list[int] | None:
        gone = set(rows)
        keep = [r for r in range(self._rows) if r not in gone]
        if not keep:
            self.caches = None
            self._rows = 0
            return keep
        if self.caches is not None:
            index = mx.array(keep)
            for c in self.caches:
                c.filter(index)
        self._rows = len(keep)
        return keep

    def advance(self, n: int) -> None:
        """The caches advance themselves."""

    def extract(self, row: int, length: int) -> list[Any]:
        assert self.caches is not None
        return [c.extract(row) for c in self.caches]

    def reset(self) -> None:
        self.caches = None
        self._rows = 0


def _same_widths(batch: Any, joiner: Any) -> None:
    """Left-pad with zeros the arrays of ``batch``'s and ``joiner``'s array caches (and of the array
    caches in their cache lists) to the same width on the token axis (1), so that they concatenate.

    An array cache's state has one shape for every row, except a state that keeps a row's last
    tokens: LongCat-Flash's n-gram context keeps the last ``n - 1`` token ids, fewer after a shorter
    prompt, and the batch's rows came from prompts of other lengths. Zeros before them are what the
    model reads where no token came before (its own shift fills zeros), so the row's next
    embeddings are the same as alone.
    """
    parts = getattr(batch, "caches", None)
    if isinstance(parts, (list, tuple)):
        for b, j in zip(parts, getattr(joiner, "caches", ()), strict=False):
            _same_widths(b, j)
        return
    mine, theirs = getattr(batch, "cache", None), getattr(joiner, "cache", None)
    if not isinstance(mine, list) or not isinstance(theirs, list):
        return
    for i, (a, b) in enumerate(zip(mine, theirs, strict=False)):
        if not isinstance(a, mx.array) or not isinstance(b, mx.array) or a.ndim < 2 or a.ndim != b.ndim:
            continue
        # Only the token axis (1) may differ; any other difference is left for ``extend`` to refuse.
        if a.shape[1] == b.shape[1] or a.shape[2:] != b.shape[2:]:
            continue
        width = max(a.shape[1], b.shape[1])
        mine[i], theirs[i] = _left_padded(a, width), _left_padded(b, width)


def _left_padded(a: mx.array, width: int) -> mx.array:
    """``a`` with zeros before its entries on axis 1, to ``width``."""
    more = width - a.shape[1]
    return mx.pad(a, [(0, 0), (more, 0)] + [(0, 0)] * (a.ndim - 2)) if more else a


class SingleBatch:
    """One sequence at a time, in its own caches: models whose caches cannot be batched at all
    (e.g. llama4's chunked attention), served as ``mlx_lm.server`` serves them."""

    copies_on_join = False

    def __init__(self) -> None:
        self.caches: list[Any] | None = None

    @property
    def rows(self) -> int:
        return 0 if self.caches is None else 1

    @property
    def nbytes(self) -> int:
        return _nbytes(self.caches)

    def join(self, seq_caches: list[Any], length: int) -> int:
        if self.caches is not None:
            raise RuntimeError("one sequence at a time: the row is taken")
        self.caches = seq_caches
        return 0

    def leave(self, rows: list[int]) -> list[int] | None:
        if rows:
            self.caches = None
            return []
        return None

    def advance(self, n: int) -> None:
        """The caches advance themselves."""

    def extract(self, row: int, length: int) -> list[Any]:
        """The sequence's own caches (it has ended; nothing writes to them after this step)."""
        assert self.caches is not None
        return self.caches

    def reset(self) -> None:
        self.caches = None
