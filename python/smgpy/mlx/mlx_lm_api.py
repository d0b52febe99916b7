"""The one module through which smgpy's MLX engine reaches into mlx-lm.

mlx-lm's batching API is young and changes between releases: the per-sequence stop matcher was
``StopSequences`` passed as ``stop_sequences=`` in the 0.32 releases and became
``StopSequenceMatcher`` / ``stop_matchers=`` on the main branch in August 2026. Everything the
engine uses beyond mlx-lm's documented top-level functions is resolved here, once, by feature
detection, so a change upstream fails in one place with a message naming what moved
(:class:`MLXLMUnsupported`), and ``tests/test_mlx_lm_api.py`` fails when any of it disappears.

Supported: the mlx-lm versions in ``pyproject.toml`` (tested by ``scripts/mlx_lm_compat.sh``
against the oldest and newest release, and against mlx-lm's main branch when it can be fetched).

One piece replaces mlx-lm code rather than calling it: :func:`install_lean_step`. mlx-lm's
decode step normalises every row's logits over the whole vocabulary (``logsumexp``) and splits
the result into one array per row, every step, although only a request that asks for logprobs
reads them and every sampler smgpy gives it picks the same token from logits as from logprobs.
On a 49,152-word vocabulary that was ~30 % of a step where the model costs little (the tiny
model of ``benches/mlx_tiny.py``, in-process: 580 -> 797 tokens/s at batch 8, 601 -> 842 at
batch 32), which is the case of small models on Apple GPUs. The lean step keeps the stock step's
contract (same pipelining, same processors, same sampler rule) and normalises only the rows that
report logprobs. It is installed only over a stock step whose source it was checked against
(``_KNOWN_STEPS``); any other mlx-lm keeps its own step, slower but never wrong.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import weakref
from collections.abc import Callable, Container, Sequence
from typing import Any

import mlx.core as mx
from mlx_lm import sample_utils as _sample_utils
from mlx_lm.models import cache as _cache
from mlx_lm.utils import load as _load

# `from mlx_lm import generate` would give the function that mlx_lm's package re-exports.
_generate = importlib.import_module("mlx_lm.generate")

__all__ = [
    "LRUPromptCache",
    "MLXLMUnsupported",
    "can_trim_prompt_cache",
    "trim_prompt_cache",
    "apply_min_p",
    "apply_top_k",
    "apply_top_p",
    "greedy_sampler",
    "make_repetition_penalty",
    "hf_tokenizer",
    "insert",
    "install_lean_step",
    "load",
    "make_prompt_cache",
    "new_batch_generator",
    "rope_classes",
    "rope_frequencies",
    "set_recommended_wired_limit",
    "stop_api",
    "version",
]


class MLXLMUnsupported(ImportError):
    """The installed mlx-lm lacks something the engine needs (its API moved)."""


def version() -> str:
    """The installed mlx-lm's version string."""
    from importlib.metadata import version as dist_version

    return dist_version("mlx-lm")


def _require(obj: Any, name: str, where: str) -> Any:
    value = getattr(obj, name, None)
    if value is None:
        raise MLXLMUnsupported(
            f"mlx-lm {version()} has no {where}.{name}, which smgpy's MLX engine uses; "
            "install a supported mlx-lm (see smgpy's pyproject.toml)"
        )
    return value


BatchGenerator: Any = _require(_generate, "BatchGenerator", "mlx_lm.generate")
make_prompt_cache: Callable[..., list[Any]] = _require(_cache, "make_prompt_cache", "mlx_lm.models.cache")
LRUPromptCache: Any = _require(_cache, "LRUPromptCache", "mlx_lm.models.cache")
can_trim_prompt_cache: Callable[[list[Any]], bool] = _require(_cache, "can_trim_prompt_cache", "mlx_lm.models.cache")
trim_prompt_cache: Callable[[list[Any], int], int] = _require(_cache, "trim_prompt_cache", "mlx_lm.models.cache")
apply_top_k: Callable[[mx.array, int], mx.array] = _require(_sample_utils, "apply_top_k", "mlx_lm.sample_utils")
apply_top_p: Callable[[mx.array, float], mx.array] = _require(_sample_utils, "apply_top_p", "mlx_lm.sample_utils")
apply_min_p: Callable[[mx.array, float], mx.array] = _require(_sample_utils, "apply_min_p", "mlx_lm.sample_utils")
make_repetition_penalty: Callable[..., Any] = _require(_sample_utils, "make_repetition_penalty", "mlx_lm.sample_utils")


def _argmax(logprobs: mx.array) -> mx.array:
    return mx.argmax(logprobs, axis=-1)


# One shared greedy sampler (mlx-lm's own where it has one; its main branch dropped it in 2026).
greedy_sampler: Callable[[mx.array], mx.array] = getattr(_sample_utils, "greedy_sampler", None) or _argmax


# The keywords of ``BatchGenerator.insert`` the engine passes, besides the stop matchers.
INSERT_KWARGS = ("max_tokens", "caches", "all_tokens", "samplers", "logits_processors")


def stop_api(module: Any) -> tuple[Any, str]:
    """The per-sequence stop matcher class of mlx-lm's ``generate`` module and the
    ``BatchGenerator.insert`` keyword taking it; checks the other keywords the engine passes."""
    params = inspect.signature(module.BatchGenerator.insert).parameters
    missing = [k for k in INSERT_KWARGS if k not in params]
    if missing:
        raise MLXLMUnsupported(f"mlx-lm {version()}: BatchGenerator.insert lacks {missing}; install a supported mlx-lm")
    for cls_name, kwarg in (("StopSequenceMatcher", "stop_matchers"), ("StopSequences", "stop_sequences")):
        cls = getattr(module, cls_name, None)
        if cls is not None and kwarg in params:
            return cls, kwarg
    raise MLXLMUnsupported(
        f"mlx-lm {version()}: BatchGenerator.insert takes neither stop_matchers= (StopSequenceMatcher) "
        "nor stop_sequences= (StopSequences); install a supported mlx-lm"
    )


_STOP_CLASS, _STOP_KWARG = stop_api(_generate)


def load(path: str) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer wrapper, config)`` as ``mlx_lm.utils.load`` gives them."""
    loaded: tuple[Any, ...] = _load(path, return_config=True)
    model, tokenizer, config = loaded
    return model, tokenizer, dict(config)


def hf_tokenizer(wrapper: Any) -> Any:
    """The Hugging Face tokenizer inside mlx-lm's ``TokenizerWrapper``.

    The wrapper forwards attribute reads to it, but not ``len()`` or identity, and smgpy needs
    the tokenizer itself (vocabulary size, ``convert_ids_to_tokens``, the backend's decoder).
    """
    inner = getattr(wrapper, "_tokenizer", None)
    return wrapper if inner is None else inner


def new_batch_generator(
    model: Any, *, completion_batch_size: int, prefill_batch_size: int, prefill_step_size: int, stream: Any
) -> Any:
    """A ``BatchGenerator`` for ``model`` (sizes as mlx-lm names them)."""
    return BatchGenerator(
        model,
        completion_batch_size=completion_batch_size,
        prefill_batch_size=prefill_batch_size,
        prefill_step_size=prefill_step_size,
        stream=stream,
    )


def insert(
    generator: Any,
    prompts: list[list[int]],
    *,
    max_tokens: list[int],
    caches: list[Any],
    all_tokens: list[list[int]],
    samplers: list[Callable[[mx.array], mx.array]],
    logits_processors: list[list[Callable[[mx.array, mx.array], mx.array]]],
    stop_token_ids: Sequence[Sequence[int]],
) -> list[int]:
    """``generator.insert(...)``, with one stop matcher per sequence built from its stop token ids."""
    stops = [_STOP_CLASS([[t] for t in ids] or None) for ids in stop_token_ids]
    uids: list[int] = generator.insert(
        prompts,
        max_tokens=max_tokens,
        caches=caches,
        all_tokens=all_tokens,
        samplers=samplers,
        logits_processors=logits_processors,
        **{_STOP_KWARG: stops},
    )
    return uids


# What the lean step reads and writes on mlx-lm's ``GenerationBatch`` (checked before installing).
_BATCH_FIELDS = (
    "model",
    "uids",
    "prompt_cache",
    "tokens",
    "samplers",
    "fallback_sampler",
    "logits_processors",
    "_token_context",
    "_current_tokens",
    "_current_logprobs",
    "_next_tokens",
    "_next_logprobs",
)


def install_lean_step(generator: Any, wants_logprobs: Container[int]) -> bool:
    """Make ``generator``'s decode step normalise only the rows whose uid is in ``wants_logprobs``.

    The other rows' ``Response.logprobs`` is None, and samplers receive the processed logits
    (log-probabilities up to a constant per row), so they must not depend on that constant:
    argmax, categorical sampling, top-k and min-p do not; top-p and a small temperature want
    the row shifted to a maximum of 0 first (``sampling.make_sampler`` does that).
    Returns False, leaving the stock step, when the installed mlx-lm's step is not one the lean
    step was checked against, or its batch lacks a field the lean step uses. The step is set on
    this generator's batch only, never on mlx-lm's class.
    """
    batch = getattr(generator, "_generation_batch", None)
    if batch is None or _source_digest(getattr(type(batch), "_step", None)) not in _KNOWN_STEPS:
        return False
    if any(not hasattr(batch, name) for name in _BATCH_FIELDS):
        return False
    # A weak reference: a closure holding the batch, stored on the batch, would be a cycle that
    # keeps a dropped batch's KV caches alive until the cycle collector runs.
    ref = weakref.ref(batch)

    def step() -> tuple[list[int], list[Any]]:
        live = ref()
        assert live is not None  # only the batch itself calls its step
        return _lean_step(live, wants_logprobs)

    batch._step = step
    return True


# The digests of the mlx-lm decode steps the lean step stands in for: 0.32.0 to 0.32.2. Another
# step (a new mlx-lm may do more in it) keeps mlx-lm's own, until checked and added here.
_KNOWN_STEPS = frozenset({"d7513c503102"})


def _source_digest(func: Any) -> str | None:
    """A short digest of ``func``'s source, or None when it has none to read."""
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return None
    return hashlib.sha256(source.encode()).hexdigest()[:12]


def _lean_step(batch: Any, wants_logprobs: Container[int]) -> tuple[list[int], list[Any]]:
    """One decode step of ``batch`` (see :func:`install_lean_step`).

    Like mlx-lm's: queue the next forward pass and its sampling (``mx.async_eval``), then wait
    for the tokens sampled at the step before, so Python's work overlaps the model's.
    """
    inputs = batch._next_tokens
    batch._current_tokens = inputs
    batch._current_logprobs = batch._next_logprobs
    logits = batch.model(inputs[:, None], cache=batch.prompt_cache)[:, -1, :]
    uids: list[int] = batch.uids
    contexts: list[mx.array] = []
    processors = batch.logits_processors
    if any(processors):
        rows = []
        for i, chain in enumerate(processors):
            row = logits[i : i + 1]
            if chain:
                # A row's context is its tokens so far; only rows with processors keep one.
                context = batch._token_context[i].update_and_fetch(inputs[i : i + 1])
                contexts.append(context)
                for processor in chain:
                    row = processor(context, row)
            rows.append(row)
        logits = mx.concatenate(rows, axis=0)
    samplers = [batch.fallback_sampler if s is None else s for s in (batch.samplers or [None] * len(uids))]
    if all(s is samplers[0] for s in samplers):
        sampled = samplers[0](logits)  # one call for the whole batch
    else:
        sampled = mx.concatenate([s(logits[i : i + 1]) for i, s in enumerate(samplers)], axis=0)
    logprobs: list[Any] = [None] * len(uids)
    for i, uid in enumerate(uids):
        if uid in wants_logprobs:
            row = logits[i]
            logprobs[i] = row - mx.logsumexp(row, keepdims=True)
    batch._next_tokens = sampled
    batch._next_logprobs = logprobs
    mx.async_eval(sampled, [lp for lp in logprobs if lp is not None], contexts)  # type: ignore[no-untyped-call]
    mx.eval(inputs, [lp for lp in batch._current_logprobs if lp is not None])
    tokens: list[int] = inputs.tolist()
    for seen, token in zip(batch.tokens, tokens, strict=True):
        seen.append(token)
    return tokens, batch._current_logprobs


def rope_frequencies(rope: Any) -> Any:
    """The frequency table of mlx-lm's scaled ropes (``Llama3RoPE``, ``ProportionalRoPE``), or None.

    Two ropes with equal ``dims``/``base``/``scale`` may still differ in these frequencies, so the
    graph rewrites key their position tables on them.
    """
    return getattr(rope, "_freqs", None)


def rope_classes() -> tuple[type, ...]:
    """mlx-lm's rope modules whose call is ``mx.fast.rope`` with fixed frequencies."""
    try:
        from mlx_lm.models import rope_utils
    except ImportError:
        return ()
    found = (getattr(rope_utils, name, None) for name in ("Llama3RoPE", "ProportionalRoPE"))
    return tuple(cls for cls in found if isinstance(cls, type))


def set_recommended_wired_limit() -> int | None:
    """On Metal, wire the GPU's recommended working set, as ``mlx_lm.server`` does at start-up.

    Returns the size set, or None where the device reports none (the CPU, CUDA).
    """
    size = mx.device_info().get("max_recommended_working_set_size")
    if not isinstance(size, int) or size <= 0:
        return None
    mx.set_wired_limit(size)
    return size
