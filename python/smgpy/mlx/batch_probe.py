"""How a model's own attention code takes the running batch, found at load by running it.

The running batch hands mlx-lm's attention layers what mlx-lm's ``BatchKVCache`` does: each row's
position as an array (``offset``) and a mask of shape ``(rows, 1, queries, columns)``, with the
shorter prompts left-padded. Most of mlx-lm's model classes take that. Some do not, and before this
check they failed every request or gave other tokens batched:

- gemma2 computes grouped-query scores as ``(rows, kv heads, repeats, queries, columns)``, so the
  mask needs one more axis, ``(rows, 1, 1, queries, columns)``; given it, it batches like any other
  model;
- gpt_bigcode (learned absolute positions) reads the cache's offset as one Python number, afm7's
  layers that reuse another layer's keys and values take their positions from the column count,
  and phi3small's block-sparse mask ignores the padding: they run one sequence at a time;
- MiniMax-M3's indexer keeps its top blocks of cache columns, cut from column 0 (in mlx-lm's class
  and in mlx-vlm's, which also always keeps the first blocks): a padded row's blocks are cut
  elsewhere than alone, so it attends to other keys. Only prompts longer than the blocks it keeps
  (16 of 128 columns by default) reach that selection, too long for a probe at load, so such
  attention is recognised by its block settings (:func:`_key_blocks`) and runs one sequence at a
  time without a probe.

A list of model types would go stale with every mlx-lm release, so :func:`probe_batching` runs
two short prompts of different lengths at load, batched as the engine batches them (a padded
prefill together, then a decode step of the running batch), and compares the shorter one, the
padded row, with that prompt run alone; it takes the first layout whose logits agree: the plain
mask, the grouped one, else one sequence at a time (the engine logs which). That is ten tokens'
worth of forward passes (~0.9 s for SmolLM2-135M on this project's 2-core CPU, milliseconds on
an accelerator), once per model class and configuration in a process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from smgpy.mlx import mlx_lm_api
from smgpy.mlx.slots import MergeBatch, SlotBatch, prefill_caches, prefilled_row

__all__ = ["BatchFit", "probe_batching"]

# Batched and alone logits agree within this fraction of the logits' scale (at least 1). A
# position or mask the model misreads moves logits by about their scale; float32 agrees to ~1e-6
# and bfloat16 to ~1e-2 of it.
_TOLERANCE = 5e-2
_LENGTHS = (4, 2)
# probe_batching's answers, by model class, configuration and batch settings: a process that loads
# the same model again (tests, a restarted engine) asks once. Bounded by the models loaded.
_KNOWN: dict[tuple[Any, ...], BatchFit] = {}


@dataclass(frozen=True)
class BatchFit:
    """How the engine batches a model: ``mode`` ("slots", "merge" or "single"), whether the
    attention mask takes a query-group axis (``grouped``), and why batching was given up
    (``reason``, empty when it was not)."""

    mode: str
    grouped: bool = False
    reason: str = ""


# The block settings of attention that picks key blocks by cache column: mlx-lm's MiniMax-M3
# class, and mlx-vlm's.
_BLOCK_SETTINGS = (("index_block_size", "index_topk_blocks"), ("sparse_block_size", "sparse_topk_blocks"))


def _key_blocks(model: Any) -> str:
    """Why ``model``'s attention cannot take a padded row (empty when it can, as far as its block
    settings tell): a layer that keeps the top blocks of cache columns, cut from column 0."""
    inner = model
    while not hasattr(inner, "named_modules") and hasattr(inner, "model"):
        inner = inner.model  # a vision-language model's wrapper: mlx-vlm's model is inside
    named = getattr(inner, "named_modules", None)
    for _, module in named() if named is not None else ():
        for size_name, keep_name in _BLOCK_SETTINGS:
            size, keep = getattr(module, size_name, None), getattr(module, keep_name, None)
            if isinstance(size, int) and isinstance(keep, int):
                return (
                    f"its attention keeps the top {keep} blocks of {size} cache columns, cut from column 0, "
                    "so a padded row's blocks differ from its own"
                )
    return ""


def _prompts(vocab: int | None) -> list[list[int]]:
    """Fixed ids above the usual special tokens, inside the vocabulary however small."""
    return [[(100 + (7 * i + 3 * j) % 97) % (vocab or 200) for j in range(n)] for i, n in enumerate(_LENGTHS)]


def _alone(model: Any, prompt: list[int]) -> mx.array:
    caches = mlx_lm_api.make_prompt_cache(model)
    logits: mx.array = model(mx.array([prompt], dtype=mx.uint32), cache=caches)[0, -1, :]
    return logits


def _slots(model: Any, prompts: list[list[int]], grouped: bool, kv_bits: int | None, group_size: int) -> mx.array:
    """The engine's path for plain attention: the prompts but their last tokens prefilled together
    (left-padded), joined into a slot batch, and one decode step of their last tokens."""
    layers = len(mlx_lm_api.make_prompt_cache(model))
    runs = [p[:-1] for p in prompts]
    width = max(len(r) for r in runs)
    pads = [width - len(r) for r in runs]
    caches = prefill_caches(pads, layers, grouped)
    model(mx.array([[0] * pad + r for pad, r in zip(pads, runs, strict=True)], dtype=mx.uint32), cache=caches)
    batch = SlotBatch(layers, kv_bits, group_size, grouped=grouped)
    for i, (pad, r) in enumerate(zip(pads, runs, strict=True)):
        batch.join(prefilled_row(caches, i, pad), len(r))
    last = mx.array([p[-1] for p in prompts], dtype=mx.uint32)
    logits: mx.array = model(last[:, None], cache=batch.caches)[:, -1, :]
    return logits


def _merged(model: Any, prompts: list[list[int]]) -> mx.array:
    """The engine's path for other caches: each prompt prefilled alone, merged, one decode step."""
    batch = MergeBatch()
    for p in prompts:
        caches = mlx_lm_api.make_prompt_cache(model)
        model(mx.array([p[:-1]], dtype=mx.uint32), cache=caches)
        batch.join(caches, len(p) - 1)
    last = mx.array([p[-1] for p in prompts], dtype=mx.uint32)
    logits: mx.array = model(last[:, None], cache=batch.caches)[:, -1, :]
    return logits


def _disagreement(alone: mx.array, batched: mx.array) -> float:
    """The largest difference of the padded row's batched logits from its logits alone, relative
    to their scale."""
    ref, got = alone.astype(mx.float32), batched.astype(mx.float32)
    scale = max(1.0, mx.abs(ref).max().item().real)
    return mx.abs(ref - got).max().item().real / scale


def probe_batching(model: Any, mode: str, kv_bits: int | None = None, kv_group_size: int = 64) -> BatchFit:
    """The batching ``model`` takes, ``mode`` being what its cache types allow ("slots" for plain
    attention, "merge" for caches with their own batch operations; "single" is returned as is).
    ``kv_bits``: the slot batch stores keys and values quantized (``--kv-bits``); the logits then
    differ from the prompt's alone by the quantization's error, so only whether the model's code
    runs is checked."""
    if mode == "single":
        return BatchFit("single")
    args = getattr(model, "args", None)
    key = (type(model), repr(args), mode, kv_bits, kv_group_size)
    if args is not None and key in _KNOWN:
        return _KNOWN[key]
    fit = _probe(model, mode, kv_bits, kv_group_size)
    if args is not None:
        _KNOWN[key] = fit
    return fit


def _probe(model: Any, mode: str, kv_bits: int | None, kv_group_size: int) -> BatchFit:
    blocks = _key_blocks(model)
    if blocks:
        return BatchFit("single", reason=blocks)
    prompts = _prompts(mlx_lm_api.vocab_size(model))
    short = len(prompts) - 1
    alone = _alone(model, prompts[short])
    layouts = (False, True) if mode == "slots" else (False,)
    failures = []
    for grouped in layouts:
        try:
            if mode == "slots":
                batched = _slots(model, prompts, grouped, kv_bits, kv_group_size)
            else:
                batched = _merged(model, prompts)
            mx.eval(batched, alone)
        except Exception as e:  # the model's code cannot take this layout: try the next
            failures.append(f"{type(e).__name__}: {e}")
            continue
        # Quantized keys and values move the logits by design: there only an error counts.
        off = 0.0 if kv_bits is not None else _disagreement(alone, batched[short])
        if off <= _TOLERANCE:
            return BatchFit(mode, grouped)
        failures.append(f"batched logits differ from the prompt's alone by {off:.2g} of their scale")
    if len(failures) > 1:
        failures[1] = f"with a query-group axis in the mask, {failures[1]}"
    return BatchFit("single", reason="; ".join(failures))
