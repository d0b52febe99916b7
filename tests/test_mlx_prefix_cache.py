"""The prefix cache across agent turns, on dense, hybrid, recurrent and sliding-window models.

An agent's next turn resends the conversation; where it differs from the stored one is usually
inside the previous answer (a template drops the last turn's reasoning, a client edits it). A
dense model's keys and values are cut back to that point; a recurrent or rotated sliding-window
state cannot be, so the engine snapshots it at the end of each prompt, where a prompt diverged
from a stored one, and at block boundaries of long prefills. Each test checks both sides: the
follow-up reuses cached tokens, and its greedy tokens equal mlx-lm's for the whole prompt cold.
The disk tier (``prefix_cache_dir``) serves the next turn after a restart.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest
import tiny_models
from conftest import demo_gguf
from smgpy.engine import GenerateReqInput

# Llama 4's chunked attention layers drop the front of their cache: untrimmable past that point.
MODELS = ("llama", "qwen3_next", "mamba2", "gemma3_text", "nemotron_h", "llama4")
ANSWER = 24
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tiny_models.Built:
    return tiny_models.Built(tmp_path_factory)


def ids(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(1000, 40000) for _ in range(n)]


def mlx_lm_greedy(path: Path, prompt: list[int], n: int) -> list[int]:
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.generate import generate_step

    model = load(str(path))[0]
    return [int(t) for t, _ in generate_step(mx.array(prompt, dtype=mx.uint32), model, max_tokens=n)]


def engine(path: Path, **kwargs: Any) -> Any:
    from smgpy.mlx import MLXEngine

    return MLXEngine(str(path), max_running=4, **kwargs)


def run(eng: Any, prompt: list[int], n: int) -> tuple[list[int], int]:
    """Greedy tokens and ``cached_tokens`` of one request."""

    async def go() -> tuple[list[int], int]:
        obj = GenerateReqInput(
            input_ids=prompt, sampling_params={"temperature": 0, "max_new_tokens": n, "ignore_eos": True}
        )
        got: list[int] = []
        cached = 0
        async for out in eng.generate_request(obj):
            got += out["output_ids"]
            cached = out["meta_info"].get("cached_tokens", cached)
        return got, cached

    return asyncio.run(asyncio.wait_for(go(), TIMEOUT))


@pytest.mark.parametrize("name", MODELS)
def test_follow_up_diverging_inside_the_answer_reuses_the_prompt(name: str, built: tiny_models.Built) -> None:
    path = built(name)
    first = ids(50, seed=1)
    eng = engine(path)
    try:
        answer, cached = run(eng, first, ANSWER)
        assert cached == 0
        # The next turn keeps 8 tokens of the answer, then differs (a re-rendered last turn).
        follow = first + answer[:8] + ids(30, seed=2)
        got, cached = run(eng, follow, 8)
        stats = eng._sched.load_info()
    finally:
        eng.shutdown()
    assert cached >= len(first) - 1, f"{name}: a follow-up sharing {len(first) + 8} tokens reused {cached}"
    assert got == mlx_lm_greedy(path, follow, 8), f"{name}: the cached follow-up differs from a cold run"
    assert stats["prefix_cache_hits"] >= 1 and stats["prefix_cache_cached_tokens"] >= cached


@pytest.mark.parametrize("name", ("qwen3_next", "mamba2", "llama4"))
def test_untrimmable_state_is_snapshotted_where_prompts_diverge_and_at_blocks(
    name: str, built: tiny_models.Built
) -> None:
    path = built(name)
    shared = ids(30, seed=3)
    eng = engine(path)
    eng._sched._cache.checkpoint_block = 16
    try:
        run(eng, shared + ids(20, seed=4), 4)
        # Diverges at 30: blocks at 16 (and 32 of the first prompt, beyond) are stored; the
        # prompt snapshots itself at 30, where it left the stored one.
        second = shared + ids(20, seed=5)
        _, cached = run(eng, second, 4)
        assert cached == 16, f"{name}: expected the block checkpoint at 16, got {cached}"
        third = shared + ids(20, seed=6)
        got, cached = run(eng, third, 6)
        stats = eng._sched.load_info()
    finally:
        eng.shutdown()
    assert cached == 30, f"{name}: a third conversation sharing 30 tokens reused {cached}"
    assert stats["prefix_cache_prompt_divergences"] >= 2
    assert got == mlx_lm_greedy(path, third, 6)


@pytest.mark.parametrize("name", ("llama", "qwen3_next"))
def test_disk_tier_serves_the_next_turn_after_a_restart(name: str, built: tiny_models.Built, tmp_path: Path) -> None:
    path = built(name)
    store = tmp_path / "prefix"
    first = ids(40, seed=7)
    eng = engine(path, prefix_cache_dir=str(store))
    try:
        answer, _ = run(eng, first, ANSWER)
    finally:
        eng.shutdown()  # pending entries are written before the thread stops
    files = list(store.rglob("*.safetensors"))
    assert files, "nothing was written to the prefix-cache directory"

    follow = first + answer + ids(12, seed=8)
    eng = engine(path, prefix_cache_dir=str(store))
    try:
        got, cached = run(eng, follow, 8)
        stats = eng._sched.load_info()
    finally:
        eng.shutdown()
    assert cached >= len(first) - 1, f"{name}: after a restart the follow-up reused {cached} tokens"
    assert stats["prefix_cache_disk_hits"] == 1
    assert got == mlx_lm_greedy(path, follow, 8)


def test_disk_tier_skips_corrupt_and_foreign_files(
    built: tiny_models.Built, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from smgpy.mlx.prefix_disk import DiskStore, model_identity

    path = built("llama")
    store = tmp_path / "prefix"
    first = ids(40, seed=9)
    eng = engine(path, prefix_cache_dir=str(store))
    try:
        run(eng, first, 4)
    finally:
        eng.shutdown()
    (data,) = list(store.rglob("*.safetensors"))
    data.write_bytes(b"not a safetensors file")
    # Another model's identity never sees this model's files.
    assert DiskStore(store, model_identity(str(demo_gguf())), 1 << 30).entries() == []

    eng = engine(path, prefix_cache_dir=str(store))
    try:
        with caplog.at_level("WARNING", logger="smgpy.mlx"):
            got, cached = run(eng, first + ids(5, seed=10), 4)
    finally:
        eng.shutdown()
    assert cached == 0
    assert "unreadable" in caplog.text
    assert got == mlx_lm_greedy(path, first + ids(5, seed=10), 4)
    assert not data.exists()


def test_disk_tier_is_byte_bounded(built: tiny_models.Built, tmp_path: Path) -> None:
    path = built("llama")
    store = tmp_path / "prefix"
    eng = engine(path, prefix_cache_dir=str(store), prefix_cache_disk_bytes=200_000)
    try:
        for seed in range(6):
            run(eng, ids(60, seed=20 + seed), 4)
    finally:
        eng.shutdown()
    total = sum(f.stat().st_size for f in store.rglob("*.safetensors"))
    assert 0 < total <= 200_000


def test_disk_files_are_mlx_lm_prompt_cache_files(tmp_path: Path) -> None:
    """The writer thread's files load with mlx-lm's ``load_prompt_cache`` into the state mlx-lm's own
    ``save_prompt_cache`` round-trips: float32 and bfloat16 keys, a rotated window, recurrent state
    with ``None`` slots."""
    mx = pytest.importorskip("mlx.core")
    from mlx.utils import tree_flatten
    from mlx_lm.models.cache import ArraysCache, KVCache, RotatingKVCache, load_prompt_cache, save_prompt_cache
    from smgpy.mlx.prefix_disk import DiskStore

    kv = KVCache()
    kv.update_and_fetch(mx.random.normal((1, 2, 5, 4)), mx.random.normal((1, 2, 5, 4)))
    half = KVCache()
    half.update_and_fetch(*(mx.random.normal((1, 2, 3, 4)).astype(mx.bfloat16) for _ in range(2)))
    rot = RotatingKVCache(max_size=4)
    for _ in range(6):
        rot.update_and_fetch(mx.random.normal((1, 1, 1, 4)), mx.random.normal((1, 1, 1, 4)))
    arrays = ArraysCache(2)
    arrays[0] = mx.random.normal((1, 3))
    cache = [kv, half, rot, arrays]

    store = DiskStore(tmp_path / "ours", "0" * 64, 1 << 30)
    job = store.submit(list(range(5)), 5, False, cache)
    store.wait(30)
    assert job.entry is not None
    ours = load_prompt_cache(str(store.dir / f"{job.key}.safetensors"))
    save_prompt_cache(str(tmp_path / "ref.safetensors"), cache)
    ref = load_prompt_cache(str(tmp_path / "ref.safetensors"))

    assert [type(c) for c in ours] == [type(c) for c in ref]
    for a, b in zip(ours, ref, strict=True):
        fa, fb = tree_flatten(a.state), tree_flatten(b.state)
        assert [k for k, _ in fa] == [k for k, _ in fb]
        for (_, x), (_, y) in zip(fa, fb, strict=True):
            if isinstance(x, mx.array):
                assert x.dtype == y.dtype and x.shape == y.shape and mx.array_equal(x, y).item()
            else:
                assert x == y
    assert ours[2].offset == rot.offset and ours[2]._idx == rot._idx


@pytest.mark.parametrize("name", ("llama", "mamba2"))
def test_a_cache_key_keeps_its_prefix_ahead_of_plain_entries(name: str, built: tiny_models.Built) -> None:
    """Under a byte budget that holds two conversations, a keyed one outlives later plain ones."""
    path = built(name)
    keyed = ids(50, seed=30)

    def play(pin: bool) -> int:
        probe = engine(path)
        run(probe, ids(50, seed=31), 4)
        one = probe._sched._cache.nbytes  # what one finished conversation holds
        probe.shutdown()
        eng = engine(path, prefix_cache_bytes=int(2.5 * one))
        try:
            obj = GenerateReqInput(
                input_ids=keyed, sampling_params={"temperature": 0, "max_new_tokens": 4, "ignore_eos": True}
            )
            if pin:
                obj.prompt_cache_key = "session-1"  # type: ignore[attr-defined]
            asyncio.run(_drain(eng, obj))
            for seed in range(32, 36):
                run(eng, ids(50, seed=seed), 4)
            return run(eng, keyed + ids(10, seed=40), 4)[1]
        finally:
            eng.shutdown()

    assert play(pin=False) == 0, "the control: plain entries push the first conversation out"
    assert play(pin=True) >= len(keyed) - 1


async def _drain(eng: Any, obj: Any) -> None:
    async for _ in eng.generate_request(obj):
        pass
