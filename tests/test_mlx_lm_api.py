"""smgpy.mlx.mlx_lm_api: everything the MLX engine takes from mlx-lm is found, and a change
upstream fails here, by name, before users see it (run against several mlx-lm versions by
``scripts/mlx_lm_compat.sh``)."""

from __future__ import annotations

import types

import pytest
from conftest import demo_gguf

demo_gguf()

import mlx.core as mx  # noqa: E402
from smgpy.mlx import mlx_lm_api  # noqa: E402


def test_the_installed_mlx_lm_is_within_the_supported_range() -> None:
    from importlib.metadata import requires

    spec = next(r for r in requires("smgpy") or [] if r.startswith("mlx-lm"))
    from packaging.specifiers import SpecifierSet

    bounds = SpecifierSet(spec.split(";")[0].removeprefix("mlx-lm"))
    assert mlx_lm_api.version() in bounds, (mlx_lm_api.version(), str(bounds))


def test_every_upstream_name_the_engine_uses_resolves() -> None:
    from mlx_lm.models import base, cache

    assert mlx_lm_api.KVCache is cache.KVCache and mlx_lm_api.BatchKVCache is cache.BatchKVCache
    # --kv-bits: quantized prefix-cache entries, and the attribute that selects quantized attention.
    assert mlx_lm_api.QuantizedKVCache is cache.QuantizedKVCache
    q = cache.QuantizedKVCache(group_size=32, bits=4)
    assert (q.bits, q.group_size, q.offset, q.keys) == (4, 32, 0, None)
    assert callable(getattr(base, "quantized_scaled_dot_product_attention", None))
    assert mlx_lm_api.create_causal_mask is base.create_causal_mask
    assert callable(mlx_lm_api.make_prompt_cache)
    from mlx_lm.models.cache import (  # noqa: F401
        can_trim_prompt_cache,
        load_prompt_cache,
        save_prompt_cache,
        trim_prompt_cache,
    )

    # What the engine's batches call on mlx-lm's cache classes (smgpy.mlx.slots).
    for cls in (cache.KVCache, cache.RotatingKVCache, cache.ArraysCache, cache.CacheList):
        assert callable(getattr(cls, "merge", None)), cls
    for cls in (cache.BatchKVCache, cache.BatchRotatingKVCache, cache.ArraysCache, cache.CacheList):
        assert all(callable(getattr(cls, m, None)) for m in ("extend", "filter", "extract")), cls
    assert all(callable(f) for f in (mlx_lm_api.apply_top_k, mlx_lm_api.apply_top_p, mlx_lm_api.apply_min_p))
    assert callable(mlx_lm_api.make_repetition_penalty) and callable(mlx_lm_api.greedy_sampler)


def test_the_tokenizer_wrapper_still_holds_the_hf_tokenizer() -> None:
    from smgpy.mlx import resolve_model

    _, wrapper, config = mlx_lm_api.load(resolve_model(str(demo_gguf()))[0])
    hf = mlx_lm_api.hf_tokenizer(wrapper)
    assert hf is not wrapper and len(hf) == 49152 and config["model_type"] == "llama"
    assert list(wrapper.eos_token_ids) == [2]


def test_a_moved_api_is_named_in_the_error() -> None:
    with pytest.raises(mlx_lm_api.MLXLMUnsupported, match=r"mlx_lm\.models\.cache\.Gone"):
        mlx_lm_api._require(types.SimpleNamespace(), "Gone", "mlx_lm.models.cache")


def test_the_wired_limit_is_set_on_metal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Metal device reports its recommended working set; the CPU reports none (both faked here)."""
    wired: list[int] = []
    monkeypatch.setattr(mx, "set_wired_limit", lambda n: wired.append(n) or 0)
    monkeypatch.setattr(mx, "device_info", lambda: {"max_recommended_working_set_size": 12 << 30})
    assert mlx_lm_api.set_recommended_wired_limit() == 12 << 30 and wired == [12 << 30]
    monkeypatch.setattr(mx, "device_info", lambda: {"memory_size": 1 << 30})
    assert mlx_lm_api.set_recommended_wired_limit() is None and wired == [12 << 30]


@pytest.mark.parametrize(
    "params",
    [
        {"temperature": 0.8, "top_p": 0.9},
        {"temperature": 1.0, "top_k": 40, "min_p": 0.02},
        {"temperature": 0.7},
    ],
)
def test_samplers_pick_the_same_tokens_from_logits_as_from_logprobs(params: dict[str, float]) -> None:
    """The decode step hands samplers logits, far from log-probabilities (here +200: exp() of them
    overflows float32); seeded samplers draw the same tokens from both."""
    from smgpy.mlx.sampling import SamplingParams, make_sampler

    mx.random.seed(0)
    logits = mx.random.normal((1, 1000)) * 3 + 200
    logprobs = logits - mx.logsumexp(logits, axis=-1, keepdims=True)
    a = make_sampler(SamplingParams(seed=5, **params))  # type: ignore[arg-type]
    b = make_sampler(SamplingParams(seed=5, **params))  # type: ignore[arg-type]
    drawn = [int(a(logits).item()) for _ in range(32)]
    assert drawn == [int(b(logprobs).item()) for _ in range(32)]
    assert len(set(drawn)) > 1  # really sampled, not collapsed to one token


def test_a_small_temperature_on_fp16_logits_picks_the_largest() -> None:
    """fp16 logits of ~20 over a temperature of 1e-4 would overflow to +inf unless shifted first."""
    from smgpy.mlx.sampling import SamplingParams, make_sampler

    mx.random.seed(1)
    logits = (mx.random.uniform(15, 25, (1, 500))).astype(mx.float16)
    logits[0, 7] = 30.0
    sample = make_sampler(SamplingParams(temperature=1e-4, seed=3))
    assert [int(sample(logits).item()) for _ in range(16)] == [7] * 16
