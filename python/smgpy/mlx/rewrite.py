"""Exact rewrites of an mlx-lm model's forward pass, for MLX's CPU backend.

Why: on the CPU, MLX spends several microseconds of the Python thread per graph node (building
it, then scheduling it on the compute thread) and wakes the compute thread for each. A decode step
of SmolLM2-135M has ~4,200 nodes, ~23 ms of that thread's CPU per token on two cores, where the
model's arithmetic is ~50 ms: the bookkeeping competes with the matrix products for the cores.
Rotary embeddings are the largest share: MLX has no CPU kernel for ``mx.fast.rope``, so each call
expands into ~20 nodes that recompute the same angles, twice per layer.

Each rewrite here removes nodes and computes the same float32 values, bit for bit:

- ``RopeTable`` (``nn.RoPE`` and mlx-lm's ``Llama3RoPE`` / ``ProportionalRoPE``, whose calls are
  ``mx.fast.rope`` alone): the cosines and sines of every position are read once from the model's own rope
  (a probe input of ones and zeros makes it output them exactly), then each call is a table slice,
  one small product with a fixed rotation matrix (entries 0 and +-1, so exact) and one compiled
  element-wise node computing ``x*cos + rot(x)*sin`` (MLX's fallback order). CPU only: on a GPU
  ``mx.fast.rope`` is a kernel.
- ``CompiledRMSNorm``: ``mx.fast.rms_norm`` has no CPU kernel either (~9 nodes); the sum of squares
  stays two nodes, the rest (scale by 1/n, add eps, rsqrt, two products) is one compiled node.
  MLX compiles element-wise graphs to C++ without FMA contraction, so each op rounds as it does
  alone.
- ``PretransposedLinear``: keeps each linear layer's transposed weight view instead of making one
  per call (the same product, one ``Transpose`` node less per layer and step).

Not done, on purpose: fusing sibling projections (``q/k/v``, ``gate/up``) into one product. Its
parts are strided views of the wide result, and a consumer that reduces over such a view may sum
in another order than over the separate product's contiguous result (a ``v_proj(x).sum()`` differed
by 2e-6 under the reference BLAS), so it cannot be exact for every model.

Exactness or nothing. Each rewrite runs the same operations in the same order on the same layout
(element-wise arithmetic, and products whose other operand holds only 0 and +-1), so it is exact by
construction; each is also checked against the original module, on the model's own weights and
on the BLAS that is loaded, for a spread of shapes, batch sizes and offsets when it is installed,
and left out if anything differs.

CPU only, and opt-in (``MLXEngine(graph_rewrites=True)``, ``smgpy serve --graph-rewrites``): on
Metal and CUDA ``mx.fast.rope`` and ``mx.fast.rms_norm`` are kernels, graph building is cheap
next to the GPU's work, and the model must stay as mlx-lm loaded it (a changed parameter tree
breaks LoRA adapters, ``load_weights`` and quantization), so ``rewrite_model`` refuses to run on
any device but the CPU. ``rewrite_model`` reports what it did.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import mlx.core as mx
import numpy as np

# The layer classes from their own modules: mypy does not see through ``mlx.nn``'s star imports.
from mlx.nn.layers.base import Module
from mlx.nn.layers.linear import Linear
from mlx.nn.layers.normalization import RMSNorm
from mlx.nn.layers.positional_encoding import RoPE

from smgpy.mlx import mlx_lm_api

__all__ = ["Rewrites", "rewrite_model"]

log = logging.getLogger("smgpy.mlx")


@dataclass
class Rewrites:
    """What ``rewrite_model`` installed, and the hook the scheduler calls before each step."""

    rope_modules: int = 0
    norm_modules: int = 0
    linear_modules: int = 0
    skipped: list[str] = field(default_factory=list)
    tables: list[RopeTable] = field(default_factory=list)

    def reserve_positions(self, n: int) -> None:
        """Make every rope table cover positions ``0..n-1`` (batched caches give positions as arrays,
        whose values are not known without waiting for the step, so the caller states a bound)."""
        for t in self.tables:
            t.reserve(n)

    def summary(self) -> str:
        parts = [
            f"{self.rope_modules} table ropes",
            f"{self.norm_modules} compiled RMS norms",
            f"{self.linear_modules} pretransposed linears",
        ]
        if self.skipped:
            parts.append("skipped: " + "; ".join(self.skipped))
        return ", ".join(parts)


def _modules(model: Module) -> list[Module]:
    found: list[Module] = model.modules()  # type: ignore[no-untyped-call]
    return found


# ----- rotary embeddings -----


@mx.compile
def _rope_tail(x: mx.array, rotated: mx.array, cos: mx.array, sin: mx.array) -> mx.array:
    return (x * cos) + (rotated * sin)


class RopeTable:
    """Cosines and sines per position for one rope configuration, taken from the rope itself."""

    def __init__(self, rope: Module) -> None:
        self.rope: Any = rope
        self.dims: int = self.rope.dims
        self.traditional: bool = self.rope.traditional
        half = self.dims // 2
        rot = np.zeros((self.dims, self.dims), dtype=np.float32)
        for k in range(half):
            if self.traditional:  # pairs (2k, 2k+1) -> (-x[2k+1], x[2k])
                rot[2 * k + 1, 2 * k] = -1.0
                rot[2 * k, 2 * k + 1] = 1.0
            else:  # halves (a, b) -> (-b, a)
                rot[k + half, k] = -1.0
                rot[k, k + half] = 1.0
        self.rotation = mx.array(rot)
        self.size = 0
        self.cos = mx.zeros((0, self.dims))
        self.sin = mx.zeros((0, self.dims))
        # (offset, rows) or the offset array of the last lookup, and its result: the calls for
        # queries and keys of a layer, and every layer of a single-sequence step, share it.
        self._last_key: Any = None
        self._last: tuple[mx.array, mx.array] | None = None

    def reserve(self, n: int) -> None:
        if n <= self.size:
            return
        n = max(n, 2 * self.size, 256)
        probe = np.zeros((1, 1, n, self.dims), dtype=np.float32)
        half = self.dims // 2
        if self.traditional:
            probe[..., 0::2] = 1.0
        else:
            probe[..., :half] = 1.0
        # x1 = 1, x2 = 0: the rope outputs x1*cos - x2*sin = cos and x1*sin + x2*cos = sin.
        out = np.array(self.rope(mx.array(probe)))[0, 0]
        if self.traditional:
            cos, sin = np.repeat(out[:, 0::2], 2, axis=1), np.repeat(out[:, 1::2], 2, axis=1)
        else:
            cos, sin = np.concatenate([out[:, :half]] * 2, axis=1), np.concatenate([out[:, half:]] * 2, axis=1)
        self.cos, self.sin = mx.array(cos), mx.array(sin)
        mx.eval(self.cos, self.sin)
        self.size = n
        self._last_key = self._last = None

    def lookup(self, offset: int | mx.array, rows: int) -> tuple[mx.array, mx.array] | None:
        """(cos, sin) broadcastable to ``(batch, heads, rows, dims)``, or None when the positions
        may lie outside the table."""
        if isinstance(offset, int):
            key: Any = (offset, rows)
            if key == self._last_key and self._last is not None:
                return self._last
            self.reserve(offset + rows)
            found = (self.cos[offset : offset + rows], self.sin[offset : offset + rows])
        else:
            if offset is self._last_key and self._last is not None:
                return self._last
            if self.size == 0 or offset.ndim > 1:
                return None
            # Left-padded slots have negative positions; their keys are masked out, so any finite
            # value will do there. Positions past the reserved size cannot happen when the caller
            # reserved for the step; clipping keeps a wrong bound from reading out of bounds.
            pos = mx.clip(offset.reshape(-1, 1) + mx.arange(rows), 0, self.size - 1)
            found = (self.cos[pos][:, None], self.sin[pos][:, None])
            key = offset
        self._last_key, self._last = key, found
        return found


class TableRope(Module):
    """A drop-in for ``RoPE`` that reads a ``RopeTable``."""

    def __init__(self, original: Module, table: RopeTable) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.original = original
        self._table = table  # a plain attribute: not a parameter of the model

    def _fallback(self, x: mx.array, offset: int | mx.array) -> mx.array:
        rope: Any = self.original  # nn.RoPE accepts an array offset too; its annotation says int
        out: mx.array = rope(x, offset=offset)
        return out

    def __call__(self, x: mx.array, offset: int | mx.array = 0) -> mx.array:
        t = self._table
        if x.ndim != 4 or x.shape[-1] != t.dims:
            return self._fallback(x, offset)
        found = t.lookup(offset, x.shape[-2])
        if found is None:
            return self._fallback(x, offset)
        cos, sin = found
        # MLX's fallback computes x1*cos - x2*sin and x1*sin + x2*cos; (x @ rotation) holds -x2 and
        # x1 exactly, and a + (-b) == a - b, a + b == b + a in IEEE arithmetic.
        return _rope_tail(x, x @ t.rotation, cos, sin)


def _rope_matches(original: Module, replacement: TableRope) -> bool:
    try:
        return _rope_matches_inner(original, replacement)
    except Exception as e:  # e.g. MLX cannot compile (no C++ compiler): keep the original
        log.debug("rope rewrite check failed: %s", e)
        return False


def _rope_matches_inner(original: Module, replacement: TableRope) -> bool:
    replacement._table.reserve(64)
    rng = np.random.default_rng(0)
    cases: list[tuple[int, int, int | mx.array]] = [
        (1, 1, 0),
        (1, 1, 37),
        (1, 9, 5),
        (1, 33, 200),
        (2, 1, mx.array([3, 40])),
        (3, 4, mx.array([-2, 0, 7])),
        (8, 1, mx.array([0, 1, 2, 5, 8, 13, 21, 34])),
    ]
    for i, (batch, rows, offset) in enumerate(cases):
        # Models hand the rope (batch, heads, rows, dims) views of (batch, rows, heads, dims)
        # projections; every other case checks that layout.
        shape = (batch, rows, 3, replacement._table.dims) if i % 2 else (batch, 3, rows, replacement._table.dims)
        x = mx.array(rng.standard_normal(shape).astype(np.float32))
        if i % 2:
            x = x.transpose(0, 2, 1, 3)
        a = replacement._fallback(x, offset)
        b = replacement(x, offset=offset)
        if isinstance(offset, mx.array):  # left padding: only real (non-negative) positions count
            keep = (offset.reshape(-1, 1) + mx.arange(rows)) >= 0
            a, b = mx.where(keep[:, None, :, None], a, 0), mx.where(keep[:, None, :, None], b, 0)
        if not mx.array_equal(a, b).item():
            return False
    return True


def _rope_classes() -> tuple[type, ...]:
    """Rope modules whose call is ``mx.fast.rope`` alone: its output depends on the position only
    through cos/sin, so a table read from the module itself reproduces it. (mlx-lm's YaRN and
    SuScaled ropes also scale the input, and DynamicNTK changes its base with the length: not here.)"""
    return (RoPE, *mlx_lm_api.rope_classes())


def _rope_key(rope: Any) -> tuple[Any, ...]:
    freqs = mlx_lm_api.rope_frequencies(rope)
    return (
        type(rope).__name__,
        rope.dims,
        rope.traditional,
        getattr(rope, "base", None),
        getattr(rope, "scale", None),
        None if freqs is None else np.array(freqs).tobytes(),
    )


def _rewrite_ropes(model: Module, out: Rewrites) -> None:
    tables: dict[tuple[Any, ...], RopeTable] = {}
    checked: dict[tuple[Any, ...], bool] = {}
    classes = _rope_classes()
    for parent in _modules(model):
        for name, child in list(parent.items()):
            if type(child) not in classes:
                continue
            key = _rope_key(child)
            if key not in tables:
                tables[key] = RopeTable(child)
            replacement = TableRope(child, tables[key])
            if key not in checked:
                checked[key] = _rope_matches(child, replacement)
                if not checked[key]:
                    out.skipped.append(f"rope {key[:5]}: table differs from mx.fast.rope")
            if checked[key]:
                parent[name] = replacement
                out.rope_modules += 1
    out.tables = [t for k, t in tables.items() if checked.get(k)]


# ----- RMS normalisation -----


@mx.compile
def _rms_norm_tail(x: mx.array, sum_sq: mx.array, inv_n: mx.array, eps: mx.array, weight: mx.array) -> mx.array:
    # MLX's fallback: x * rsqrt(mean(x^2) + eps) * weight, where mean = sum * float32(1/n).
    return (x * mx.rsqrt(sum_sq * inv_n + eps)) * weight


class CompiledRMSNorm(Module):
    """A drop-in for ``RMSNorm`` (float32) with the element-wise tail as one compiled node."""

    def __init__(self, original: RMSNorm) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.weight = original.weight
        self.eps = original.eps
        self._eps = mx.array(original.eps, dtype=mx.float32)
        self._inv_n = mx.array(np.float32(1.0 / original.weight.shape[-1]))

    def __call__(self, x: mx.array) -> mx.array:
        if x.dtype != mx.float32 or self.weight.dtype != mx.float32 or x.shape[-1] != self.weight.shape[-1]:
            return mx.fast.rms_norm(x, self.weight, self.eps)
        sum_sq = mx.sum(mx.square(x), axis=-1, keepdims=True)
        return _rms_norm_tail(x, sum_sq, self._inv_n, self._eps, self.weight)


def _norm_matches(original: RMSNorm, replacement: CompiledRMSNorm) -> bool:
    rng = np.random.default_rng(2)
    dim = original.weight.shape[-1]
    try:
        for shape in ((1, 1, dim), (3, 1, dim), (1, 17, dim), (2, 64, dim)):
            x = mx.array((3 * rng.standard_normal(shape)).astype(np.float32))
            if not mx.array_equal(original(x), replacement(x)).item():
                return False
    except Exception as e:  # e.g. MLX cannot compile (no C++ compiler): keep the original
        log.debug("RMS norm rewrite check failed: %s", e)
        return False
    return True


def _rewrite_norms(model: Module, out: Rewrites) -> None:
    checked: dict[tuple[Any, ...], bool] = {}
    for parent in _modules(model):
        for name, child in list(parent.items()):
            if type(child) is not RMSNorm or child.weight.dtype != mx.float32:
                continue
            replacement = CompiledRMSNorm(child)
            key = (child.weight.shape[-1], child.eps)
            if key not in checked:
                checked[key] = _norm_matches(child, replacement)
                if not checked[key]:
                    out.skipped.append(f"RMS norm {key}: compiled tail differs or cannot compile")
            if checked[key]:
                parent[name] = replacement
                out.norm_modules += 1


# ----- linear layers -----


def _transposed(w: mx.array) -> mx.array:
    t = w.T
    mx.eval(t)
    return t


class PretransposedLinear(Module):
    """A drop-in for ``Linear`` that keeps its weight's transposed view instead of making one per call."""

    def __init__(self, original: Linear) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.weight = original.weight
        if "bias" in original:
            self.bias = original.bias
        self._weight_t = _transposed(original.weight)

    def __call__(self, x: mx.array) -> mx.array:
        if "bias" in self:
            return mx.addmm(self.bias, x, self._weight_t)
        return x @ self._weight_t


def _rewrite_linears(model: Module, out: Rewrites) -> None:
    for parent in _modules(model):
        for name, child in list(parent.items()):
            if type(child) is Linear and _linear_matches(child, PretransposedLinear(child)):
                parent[name] = PretransposedLinear(child)
                out.linear_modules += 1


def _linear_matches(original: Linear, replacement: PretransposedLinear) -> bool:
    rng = np.random.default_rng(3)
    for batch, rows in ((1, 1), (1, 9), (3, 1), (2, 70)):
        x = mx.array(rng.standard_normal((batch, rows, original.weight.shape[1])).astype(np.float32))
        x = x.astype(original.weight.dtype)
        if not mx.array_equal(original(x), replacement(x)).item():
            return False
    return True


def rewrite_model(
    model: Module,
    *,
    ropes: bool = True,
    norms: bool = True,
    linears: bool = True,
    device: Any = None,
) -> Rewrites:
    """Install the exact rewrites into ``model`` (in place) and report them.

    ``device`` (default: MLX's default device) must be the CPU; on any other device nothing is
    changed and the report says why. Call it on the thread that runs the model, before it runs.
    """
    out = Rewrites()
    device = mx.default_device() if device is None else device
    if device != mx.cpu:
        out.skipped.append(f"all: the model runs on {device}, and the rewrites are for MLX's CPU backend")
        return out
    if linears:
        _rewrite_linears(model, out)
    if ropes:
        _rewrite_ropes(model, out)
    if norms:
        _rewrite_norms(model, out)
    return out
