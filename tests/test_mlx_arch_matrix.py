"""Every family of model mlx-lm ships, batched by MLXEngine, gives mlx-lm's own greedy tokens.

For each model type a tiny random-weight model is built with mlx-lm's classes (`tiny_models.py`):
dense, MoE, MLA, sliding window, chunked attention, the hybrids (GatedDeltaNet, Mamba, SSM,
short convolutions), RWKV and a 4-bit quantized llama. Four prompts of clearly different lengths
go through one engine concurrently; each one's greedy tokens must equal what mlx-lm's
`generate_step` gives for that prompt alone.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest
import tiny_models
from conftest import collect
from smgpy.engine import GenerateReqInput

PROMPT_LENGTHS = (5, 13, 29, 47)
MAX_NEW_TOKENS = 8
REQUEST_TIMEOUT = 60.0


def prompts(seed: int = 0) -> list[list[int]]:
    """Random prompt ids, clear of the tokenizer's special tokens (the low ids) and of its end."""
    rng = random.Random(seed)
    return [[rng.randrange(1000, 40000) for _ in range(n)] for n in PROMPT_LENGTHS]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tiny_models.Built:
    return tiny_models.Built(tmp_path_factory)


def mlx_lm_greedy(path: Path, prompt_ids: list[list[int]]) -> list[list[int]]:
    """mlx-lm's greedy tokens for each prompt alone (``generate_step``, argmax, no stop tokens)."""
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.generate import generate_step

    model = load(str(path))[0]
    out = []
    for ids in prompt_ids:
        steps = generate_step(mx.array(ids, dtype=mx.uint32), model, max_tokens=MAX_NEW_TOKENS)
        out.append([int(tok) for tok, _ in steps])
    return out


async def _collect(engine: Any, ids: list[int]) -> tuple[list[int], Any]:
    obj = GenerateReqInput(
        input_ids=ids,
        sampling_params={"temperature": 0, "max_new_tokens": MAX_NEW_TOKENS, "ignore_eos": True},
    )
    got, meta = await collect(engine, obj)
    return got, meta["finish_reason"]


def engine_greedy(path: Path, prompt_ids: list[list[int]]) -> list[tuple[list[int], Any]]:
    """The engine's greedy tokens (and finish reason) for each prompt, all submitted together."""
    from smgpy.mlx import MLXEngine

    engine = MLXEngine(str(path), max_running=8)
    try:

        async def together() -> list[tuple[list[int], Any]]:
            jobs = asyncio.gather(*(_collect(engine, ids) for ids in prompt_ids))
            return list(await asyncio.wait_for(jobs, REQUEST_TIMEOUT))

        return asyncio.run(together())
    finally:
        engine.shutdown()


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first index where ``a`` and ``b`` differ (a length difference counts), or None."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@pytest.mark.parametrize("name", tiny_models.MODEL_TYPES)
def test_batched_greedy_equals_mlx_lm_alone(name: str, built: tiny_models.Built) -> None:
    path = built(name)
    ids = prompts()
    want = mlx_lm_greedy(path, ids)
    # A model whose greedy output ignores its prompt would make the comparison vacuous.
    assert len({tuple(w) for w in want}) > 1, f"{name}: every prompt gives the same tokens {want[0]}"
    assert all(len(w) == MAX_NEW_TOKENS for w in want)
    got = engine_greedy(path, ids)
    wrong = {
        f"prompt of {len(p)} tokens": f"first differs at token {first_difference(g, w)}: engine {g} "
        f"(finish {finish}), mlx-lm {w}"
        for p, (g, finish), w in zip(ids, got, want, strict=True)
        if g != w
    }
    assert not wrong, f"{name}: batched output differs from mlx-lm's: {wrong}"
