"""smgpy.mlx.mlx_lm_api: everything the MLX engine takes from mlx-lm is found, and a change
upstream fails here, by name, before users see it (run against several mlx-lm versions by
``scripts/mlx_lm_compat.sh``)."""

from __future__ import annotations

import importlib
import types
from typing import Any

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
    generate = importlib.import_module("mlx_lm.generate")
    cls, kwarg = mlx_lm_api.stop_api(generate)
    assert kwarg in ("stop_matchers", "stop_sequences") and isinstance(cls, type)
    assert callable(mlx_lm_api.make_prompt_cache)
    assert mlx_lm_api.BatchGenerator is generate.BatchGenerator
    from mlx_lm.models.cache import LRUPromptCache, can_trim_prompt_cache, trim_prompt_cache  # noqa: F401

    assert all(callable(f) for f in (mlx_lm_api.apply_top_k, mlx_lm_api.apply_top_p, mlx_lm_api.apply_min_p))
    assert callable(mlx_lm_api.make_repetition_penalty) and callable(mlx_lm_api.greedy_sampler)

    assert {c.__name__ for c in mlx_lm_api.rope_classes()} == {"Llama3RoPE", "ProportionalRoPE"}


def test_the_tokenizer_wrapper_still_holds_the_hf_tokenizer() -> None:
    from smgpy.mlx import resolve_model

    _, wrapper, config = mlx_lm_api.load(resolve_model(str(demo_gguf()))[0])
    hf = mlx_lm_api.hf_tokenizer(wrapper)
    assert hf is not wrapper and len(hf) == 49152 and config["model_type"] == "llama"
    assert list(wrapper.eos_token_ids) == [2]


def test_scaled_ropes_still_keep_their_frequency_table() -> None:
    from mlx_lm.models.rope_utils import Llama3RoPE

    scaling = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    rope = Llama3RoPE(16, max_position_embeddings=4096, base=500000.0, scaling_config=scaling)
    freqs = mlx_lm_api.rope_frequencies(rope)
    assert freqs is not None and freqs.shape == (8,)


def test_a_batch_generator_runs_with_per_sequence_stops() -> None:
    from mlx_lm import load
    from smgpy.mlx import resolve_model

    model, tok = load(resolve_model(str(demo_gguf()))[0])
    gen = mlx_lm_api.new_batch_generator(
        model, completion_batch_size=2, prefill_batch_size=2, prefill_step_size=64, stream=mx.default_stream(mx.cpu)
    )
    prompt = tok.encode("Hello")
    uids = mlx_lm_api.insert(
        gen,
        [prompt, prompt],
        max_tokens=[3, 3],
        caches=[None, None],
        all_tokens=[[], []],
        samplers=[lambda x: mx.argmax(x, axis=-1)] * 2,
        logits_processors=[[], []],
        stop_token_ids=[[2], []],
    )
    seen: dict[int, list[Any]] = {u: [] for u in uids}
    while any(len(v) < 3 and (not v or v[-1].finish_reason is None) for v in seen.values()):
        for r in gen.next()[1]:
            seen[r.uid].append(r)
    assert all(v[-1].finish_reason in ("stop", "length") for v in seen.values())
    gen.close()


def test_a_moved_api_is_named_in_the_error() -> None:
    class Insert:
        def insert(self, prompts: Any, max_tokens: Any, caches: Any, all_tokens: Any, samplers: Any) -> None:
            pass

    fake = types.SimpleNamespace(BatchGenerator=Insert)
    with pytest.raises(mlx_lm_api.MLXLMUnsupported, match="logits_processors"):
        mlx_lm_api.stop_api(fake)

    fake2 = types.SimpleNamespace(BatchGenerator=type("B", (), {"insert": _insert_with_all_but_stops}))
    with pytest.raises(mlx_lm_api.MLXLMUnsupported, match="stop_matchers"):
        mlx_lm_api.stop_api(fake2)


def _insert_with_all_but_stops(
    self: Any, prompts: Any, max_tokens: Any, caches: Any, all_tokens: Any, samplers: Any, logits_processors: Any
) -> None:
    pass


def test_the_wired_limit_is_set_on_metal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Metal device reports its recommended working set; the CPU reports none (both faked here)."""
    wired: list[int] = []
    monkeypatch.setattr(mx, "set_wired_limit", lambda n: wired.append(n) or 0)
    monkeypatch.setattr(mx, "device_info", lambda: {"max_recommended_working_set_size": 12 << 30})
    assert mlx_lm_api.set_recommended_wired_limit() == 12 << 30 and wired == [12 << 30]
    monkeypatch.setattr(mx, "device_info", lambda: {"memory_size": 1 << 30})
    assert mlx_lm_api.set_recommended_wired_limit() is None and wired == [12 << 30]
