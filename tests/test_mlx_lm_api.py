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


def _run(
    lean: bool, wants: set[int], samplers: list[Any], processors: list[list[Any]], steps: int = 12
) -> dict[int, list[Any]]:
    """Decode three prompts together with mlx-lm's stock step or smgpy's lean one; the responses by row."""
    from mlx_lm import load
    from smgpy.mlx import resolve_model

    model, tok = load(resolve_model(str(demo_gguf()))[0])
    gen = mlx_lm_api.new_batch_generator(
        model, completion_batch_size=4, prefill_batch_size=4, prefill_step_size=64, stream=mx.default_stream(mx.cpu)
    )
    if lean:
        assert mlx_lm_api.install_lean_step(gen, wants)
    prompts = [tok.encode(t) for t in ("The capital of France is", "Write a haiku about rain.", "1, 2, 3,")]
    uids = mlx_lm_api.insert(
        gen,
        prompts,
        max_tokens=[steps] * 3,
        caches=[None] * 3,
        all_tokens=[[]] * 3,
        samplers=samplers,
        logits_processors=processors,
        stop_token_ids=[[]] * 3,
    )
    assert uids == [0, 1, 2]
    rows: dict[int, list[Any]] = {u: [] for u in uids}
    while sum(len(v) for v in rows.values()) < 3 * steps:
        for r in gen.next()[1]:
            rows[r.uid].append(r)
    gen.close()
    return rows


def test_the_lean_step_picks_the_stock_tokens_and_normalises_only_rows_that_ask() -> None:
    """Greedy rows in one batch: the same tokens as mlx-lm's step; the row asking for logprobs
    gets the same log-probabilities, the others none after their first token."""
    greedy = [mlx_lm_api.greedy_sampler] * 3
    stock = _run(False, set(), greedy, [[], [], []])
    lean = _run(True, {1}, greedy, [[], [], []])
    for uid in stock:
        assert [r.token for r in lean[uid]] == [r.token for r in stock[uid]]
    for a, b in zip(stock[1], lean[1], strict=True):
        assert mx.allclose(a.logprobs, b.logprobs, atol=1e-5).item()
    # The first token of every row comes from the prompt batch, which mlx-lm steps itself.
    assert all(r.logprobs is None for uid in (0, 2) for r in lean[uid][1:])
    from mlx_lm.generate import GenerationBatch

    assert GenerationBatch._step.__module__ == "mlx_lm.generate"  # mlx-lm's class is untouched


def test_the_lean_step_keeps_seeded_sampling_and_processors() -> None:
    """Per-row samplers (seeded temperature, top-p, top-k, min-p) and logits processors (a bias,
    penalties) draw the same tokens from logits as mlx-lm's step does from log-probabilities."""
    from smgpy.mlx.sampling import SamplingParams, make_logits_processors, make_sampler

    params = [
        SamplingParams(temperature=0.8, top_p=0.9, seed=7),
        SamplingParams(temperature=1.2, top_k=20, min_p=0.05, seed=11, logit_bias={13: 4.0}),
        SamplingParams(temperature=0.0, repetition_penalty=1.3, frequency_penalty=0.5),
    ]

    def build() -> tuple[list[Any], list[list[Any]]]:
        return [make_sampler(p) for p in params], [make_logits_processors(p, 4, [2]) for p in params]

    stock = _run(False, set(), *build())
    lean = _run(True, {0}, *build())
    for uid in stock:
        assert [r.token for r in lean[uid]] == [r.token for r in stock[uid]], uid


def test_the_lean_step_is_not_installed_on_an_unknown_batch() -> None:
    class Batch:
        def _step(self) -> None:
            pass

    assert not mlx_lm_api.install_lean_step(types.SimpleNamespace(_generation_batch=Batch()), set())
    assert not mlx_lm_api.install_lean_step(object(), set())


def test_the_lean_step_stands_in_only_for_a_step_it_was_checked_against() -> None:
    """A new mlx-lm whose decode step differs keeps its own step (the digest list names the checked ones)."""
    generate = importlib.import_module("mlx_lm.generate")
    assert mlx_lm_api._source_digest(generate.GenerationBatch._step) in mlx_lm_api._KNOWN_STEPS

    class Changed(generate.GenerationBatch):  # type: ignore[misc, name-defined]
        def _step(self) -> Any:
            return super()._step()

    batch = Changed.__new__(Changed)
    assert not mlx_lm_api.install_lean_step(types.SimpleNamespace(_generation_batch=batch), set())


def test_a_dropped_batch_is_freed_without_the_cycle_collector() -> None:
    import gc
    import weakref

    from mlx_lm import load
    from smgpy.mlx import resolve_model

    model, _ = load(resolve_model(str(demo_gguf()))[0])
    gen = mlx_lm_api.new_batch_generator(
        model, completion_batch_size=2, prefill_batch_size=2, prefill_step_size=64, stream=mx.default_stream(mx.cpu)
    )
    assert mlx_lm_api.install_lean_step(gen, set())
    batch = weakref.ref(gen._generation_batch)
    gc.disable()
    try:
        del gen
        assert batch() is None
    finally:
        gc.enable()


@pytest.mark.parametrize(
    "params",
    [
        {"temperature": 0.8, "top_p": 0.9},
        {"temperature": 1.0, "top_k": 40, "min_p": 0.02},
        {"temperature": 0.7},
    ],
)
def test_samplers_pick_the_same_tokens_from_logits_as_from_logprobs(params: dict[str, float]) -> None:
    """The lean step hands samplers logits, far from log-probabilities (here +200: exp() of them
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
