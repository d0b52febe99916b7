"""The one module through which smgpy's MLX engine reaches into mlx-lm.

The engine runs its own batching loop (:mod:`smgpy.mlx.batching`) on mlx-lm's public parts:
model loading, the model classes, their cache classes (``make_prompt_cache``, ``KVCache``,
``QuantizedKVCache``, ``BatchKVCache`` and each cache's ``merge`` / ``extend`` / ``filter`` / ``extract``), the mask
helper the attention layers call (``create_causal_mask``), the prompt-cache helpers
(``can_trim_prompt_cache``, ``trim_prompt_cache``, and ``load_prompt_cache`` for the disk
tier) and the sampling functions. Everything it uses beyond
mlx-lm's documented top-level functions is resolved here, once, so a change upstream fails in
one place with a message naming what moved (:class:`MLXLMUnsupported`), and
``tests/test_mlx_lm_api.py`` fails when any of it disappears.

Supported: the mlx-lm versions in ``pyproject.toml`` (tested by ``scripts/mlx_lm_compat.sh``
against the oldest and newest release, and against mlx-lm's main branch when it can be fetched).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mlx.core as mx

from smgpy.mlx.environment import environment_kept

# mlx-lm sets TRANSFORMERS_NO_ADVISORY_WARNINGS in os.environ when imported.
with environment_kept():
    from mlx_lm import sample_utils as _sample_utils
    from mlx_lm.models import base as _base
    from mlx_lm.models import cache as _cache
    from mlx_lm.utils import load as _load
    from mlx_lm.utils import load_tokenizer as _load_tokenizer

__all__ = [
    "BatchKVCache",
    "KVCache",
    "MLXLMUnsupported",
    "QuantizedKVCache",
    "can_trim_prompt_cache",
    "create_causal_mask",
    "trim_prompt_cache",
    "load_prompt_cache",
    "apply_min_p",
    "apply_top_k",
    "apply_top_p",
    "greedy_sampler",
    "make_repetition_penalty",
    "hf_tokenizer",
    "load",
    "load_tokenizer",
    "make_prompt_cache",
    "set_recommended_wired_limit",
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


make_prompt_cache: Callable[..., list[Any]] = _require(_cache, "make_prompt_cache", "mlx_lm.models.cache")
KVCache: Any = _require(_cache, "KVCache", "mlx_lm.models.cache")
BatchKVCache: Any = _require(_cache, "BatchKVCache", "mlx_lm.models.cache")
# ``--kv-bits``: the prefix cache keeps quantized entries in it; its attention layers read any cache
# with a ``bits`` attribute through mlx-lm's quantized attention.
QuantizedKVCache: Any = _require(_cache, "QuantizedKVCache", "mlx_lm.models.cache")
create_causal_mask: Callable[..., Any] = _require(_base, "create_causal_mask", "mlx_lm.models.base")
can_trim_prompt_cache: Callable[[list[Any]], bool] = _require(_cache, "can_trim_prompt_cache", "mlx_lm.models.cache")
trim_prompt_cache: Callable[[list[Any], int], int] = _require(_cache, "trim_prompt_cache", "mlx_lm.models.cache")
load_prompt_cache: Callable[..., Any] = _require(_cache, "load_prompt_cache", "mlx_lm.models.cache")
apply_top_k: Callable[[mx.array, int], mx.array] = _require(_sample_utils, "apply_top_k", "mlx_lm.sample_utils")
apply_top_p: Callable[[mx.array, float], mx.array] = _require(_sample_utils, "apply_top_p", "mlx_lm.sample_utils")
apply_min_p: Callable[[mx.array, float], mx.array] = _require(_sample_utils, "apply_min_p", "mlx_lm.sample_utils")
make_repetition_penalty: Callable[..., Any] = _require(_sample_utils, "make_repetition_penalty", "mlx_lm.sample_utils")


def _argmax(logprobs: mx.array) -> mx.array:
    return mx.argmax(logprobs, axis=-1)


# One shared greedy sampler (mlx-lm's own where it has one; its main branch dropped it in 2026).
greedy_sampler: Callable[[mx.array], mx.array] = getattr(_sample_utils, "greedy_sampler", None) or _argmax


def _arg(model: Any, name: str) -> int | None:
    """A positive integer from the config arguments mlx-lm's model classes keep
    (``model.args``; a vision model's language model's), or None where it has none."""
    inner = getattr(model, "model", None)
    for obj in (model, getattr(model, "language_model", None), getattr(inner, "language_model", None)):
        value = getattr(getattr(obj, "args", None), name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def hidden_size(model: Any) -> int | None:
    """The model's hidden size (``args.hidden_size``), or None where it has none."""
    return _arg(model, "hidden_size")


def vocab_size(model: Any) -> int | None:
    """The model's vocabulary size (``args.vocab_size``), or None where it has none."""
    return _arg(model, "vocab_size")


def load(path: str) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer wrapper, config)`` as ``mlx_lm.utils.load`` gives them."""
    loaded: tuple[Any, ...] = _load(path, return_config=True)
    model, tokenizer, config = loaded
    return model, tokenizer, dict(config)


def load_tokenizer(path: str, eos_token_ids: Any = None) -> Any:
    """mlx-lm's ``TokenizerWrapper`` for a model directory whose weights another library loads
    (a vision-language model through mlx-vlm)."""
    return _load_tokenizer(path, eos_token_ids=eos_token_ids)  # type: ignore[no-untyped-call]


def hf_tokenizer(wrapper: Any) -> Any:
    """The Hugging Face tokenizer inside mlx-lm's ``TokenizerWrapper``.

    The wrapper forwards attribute reads to it, but not ``len()`` or identity, and smgpy needs
    the tokenizer itself (vocabulary size, ``convert_ids_to_tokens``, the backend's decoder).
    """
    inner = getattr(wrapper, "_tokenizer", None)
    return wrapper if inner is None else inner


def set_recommended_wired_limit() -> int | None:
    """On Metal, wire the GPU's recommended working set, as ``mlx_lm.server`` does at start-up.

    Returns the size set, or None where the device reports none (the CPU, CUDA).
    """
    size = mx.device_info().get("max_recommended_working_set_size")
    if not isinstance(size, int) or size <= 0:
        return None
    mx.set_wired_limit(size)
    return size
