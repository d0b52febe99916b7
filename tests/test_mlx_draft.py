"""Draft-model speculation (smgpy.mlx.draft): a draft model proposes tokens, the engine verifies
them, and greedy output is token-identical to decoding without a draft, whether the draft agrees
always (the model itself), often (a perturbed copy) or never (another random model); with rows that
draft together in one batch of the draft model (catching up after resting, leaving one by one), and
at every length limit.

Tiny random-weight llama models built with mlx-lm's own classes (tests/tiny_models.py)."""

from __future__ import annotations

import asyncio
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiny_models
from conftest import collect, demo_gguf
from smgpy.engine import GenerateReqInput

PROMPT_LENGTHS = (5, 13, 29, 47)
MAX_NEW = 24


def _prompts(seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(1000, 40000) for _ in range(n)] for n in PROMPT_LENGTHS]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The model, a copy whose output head is perturbed (agrees on some tokens), another model."""
    demo_gguf()  # skips (or fails under CI) when the demo tokenizer is unavailable
    import mlx.core as mx

    target = tiny_models.build("llama", tmp_path_factory.mktemp("target"), seed=0)
    other = tiny_models.build("llama", tmp_path_factory.mktemp("other"), seed=1)
    noisy = tmp_path_factory.mktemp("noisy")
    for f in target.iterdir():
        shutil.copy(f, noisy / f.name)
    weights = mx.load(str(target / "model.safetensors"))
    head = weights["lm_head.weight"]
    mx.random.seed(7)
    weights["lm_head.weight"] = head + 0.15 * mx.std(head) * mx.random.normal(head.shape)
    mx.save_safetensors(str(noisy / "model.safetensors"), weights, metadata={"format": "mlx"})
    return {"target": target, "noisy": noisy, "other": other}


def _engine(path: Path, **kwargs: Any) -> Any:
    """The target model (with a draft, when given one), verifying whenever a row drafts: on this
    CPU a wider pass costs about as much per token as a narrow one, so the engine's own cost
    model (``StepCost``) would mostly not draft."""
    from smgpy.mlx import MLXEngine
    from smgpy.mlx.pacing import StepCost

    kwargs.setdefault("prefix_cache_bytes", 0)
    engine = MLXEngine(str(path), max_running=4, **kwargs)
    engine._sched.cost = StepCost(learn=False)
    return engine


@pytest.fixture(scope="module")
def reference(dirs: dict[str, Path]) -> Iterator[Any]:
    engine = _engine(dirs["target"], prompt_lookup_tokens=0)
    yield engine
    engine.shutdown()


def _greedy(engine: Any, prompts: list[list[int]], together: bool, **params: Any) -> list[list[int]]:
    sampling = {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True, **params}

    async def main() -> list[list[int]]:
        # Together, each request asks for more tokens than the one before: the rows leave the
        # batch one by one, and the last one decodes alone for a while.
        reqs = [
            GenerateReqInput(
                input_ids=p,
                sampling_params={**sampling, "max_new_tokens": sampling["max_new_tokens"] + (8 * i if together else 0)},
            )
            for i, p in enumerate(prompts)
        ]
        if together:
            outs = await asyncio.gather(*(collect(engine, r) for r in reqs))
        else:
            outs = [await collect(engine, r) for r in reqs]
        return [ids for ids, _ in outs]

    return asyncio.run(asyncio.wait_for(main(), 120))


@pytest.mark.parametrize("draft", ["target", "noisy", "other"])
def test_greedy_output_is_unchanged_whatever_the_draft(dirs: dict[str, Path], reference: Any, draft: str) -> None:
    prompts = _prompts()
    want_alone = _greedy(reference, prompts, together=False)
    want_batched = _greedy(reference, prompts, together=True)
    engine = _engine(dirs["target"], draft_model=str(dirs[draft]), num_draft_tokens=4)
    try:
        sched = engine._sched
        assert _greedy(engine, prompts, together=False) == want_alone
        # Rows draft and verify together (the draft model's batch mirrors the rows), rows that
        # rest catch up later, and rows leave one by one.
        steps, batched = sched.speculative_steps, sched.batched_speculative_steps
        assert _greedy(engine, prompts, together=True) == want_batched
        assert sched.speculative_steps > steps
        assert sched.batched_speculative_steps > batched
        proposed, accepted = sched.drafts_proposed, sched.drafts_accepted
        assert sched.speculative_steps > 0 and proposed > 0
        if draft == "target":
            assert accepted == proposed  # the model drafting for itself is always right
        elif draft == "noisy":
            assert 0 < accepted < proposed, (accepted, proposed)
        else:
            assert accepted < proposed / 4, (accepted, proposed)
    finally:
        engine.shutdown()


def test_length_limits_and_sampled_requests_with_a_draft(dirs: dict[str, Path], reference: Any) -> None:
    prompt = _prompts(3)[1:2]
    engine = _engine(dirs["target"], draft_model=str(dirs["noisy"]), num_draft_tokens=3)
    try:
        for n in (1, 2, 3, 4, 7):
            got = _greedy(engine, prompt, together=False, max_new_tokens=n)
            assert got == _greedy(reference, prompt, together=False, max_new_tokens=n)
            assert len(got[0]) == n
        sched = engine._sched
        steps = sched.speculative_steps
        sampled = _greedy(engine, prompt, together=False, temperature=0.8)
        assert len(sampled[0]) == MAX_NEW and sched.speculative_steps > steps
        steps = sched.speculative_steps
        _greedy(engine, prompt, together=False, num_draft_tokens=0)
        assert sched.speculative_steps == steps  # the request opted out
    finally:
        engine.shutdown()


def _until(done: Any, timeout: float = 10.0) -> None:
    import time

    end = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_the_draft_cache_of_a_turn_serves_the_next_turn(dirs: dict[str, Path], reference: Any) -> None:
    """A row that leaves keeps its draft cache in the draft's prefix cache, so the next turn of
    the conversation (its prompt: the first prompt, the answer, a new message) prefills only what
    that cache lacks in the draft model, and its output is unchanged."""
    engine = _engine(dirs["target"], draft_model=str(dirs["target"]), num_draft_tokens=3, prefix_cache_bytes=64 << 20)
    try:
        first = _prompts(5)[3]
        answer = _greedy(engine, [first], together=False)[0]
        draft = engine._sched.draft_batch
        _until(lambda: len(draft.cache) == 1)  # the row is freed on the MLX thread's next turn
        assert draft.cache.hits == 0
        before = draft.prefilled
        second = first + answer + [1234, 2345, 3456]
        assert _greedy(engine, [second], together=False) == _greedy(reference, [second], together=False)
        assert draft.cache.hits == 1
        assert draft.prefilled - before < len(answer) + 3 < len(second), (draft.prefilled, before)
        # Flushing the engine's cache flushes the draft's too.
        engine.flush_cache()
        _greedy(engine, [first], together=False)
        assert draft.cache.hits == 1
    finally:
        engine.shutdown()


def test_a_draft_model_with_another_vocabulary_is_refused() -> None:
    from smgpy.mlx.draft import DraftModel

    class Tok:
        def __init__(self, n: int) -> None:
            self.n = n

        def get_vocab(self) -> dict[str, int]:
            return {str(i): i for i in range(self.n)}

    with pytest.raises(ValueError, match="vocabulary of 100 tokens and the model 120: a draft model must share"):
        DraftModel(object(), Tok(100), Tok(120), path="the draft model x")
