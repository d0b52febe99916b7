"""Every family of model mlx-lm ships, batched by MLXEngine, gives mlx-lm's own greedy tokens.

For each model type a tiny random-weight model is built with mlx-lm's classes (`tiny_models.py`):
dense, MoE, MLA, sparse attention (DeepSeek's indexer), sliding window, shared keys and values
across layers (Gemma 4), blocks without attention (nemotron-nas), chunked attention, the hybrids
(GatedDeltaNet, Mamba, SSM, short convolutions), RWKV, grouped-query scores of five axes (gemma2),
learned absolute positions (gpt_bigcode), key blocks picked by an indexer (MiniMax-M3), n-gram
embeddings (LongCat-Flash) and a 4-bit quantized llama. Four prompts of clearly different lengths go
through one engine concurrently; each one's greedy tokens must equal what mlx-lm's `generate_step`
gives for that prompt alone, and the engine batches every model but those that cannot be batched.
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
# What runs one sequence at a time: llama4's chunked-attention cache has no batch form,
# gpt_bigcode reads its cache's offset as one number (its learned positions), and MiniMax-M3's
# indexer cuts key blocks from a padded row's first column, not its first token.
ONE_AT_A_TIME = {"llama4", "gpt_bigcode", "minimax_m3_vl"}


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


def engine_greedy(path: Path, prompt_ids: list[list[int]]) -> tuple[list[tuple[list[int], Any]], int]:
    """The engine's greedy tokens (and finish reason) for each prompt, all submitted together, and
    how many sequences it runs at once."""
    from smgpy.mlx import MLXEngine

    engine = MLXEngine(str(path), max_running=8)
    try:

        async def together() -> list[tuple[list[int], Any]]:
            jobs = asyncio.gather(*(_collect(engine, ids) for ids in prompt_ids))
            return list(await asyncio.wait_for(jobs, REQUEST_TIMEOUT))

        return asyncio.run(together()), engine.get_load()["max_running_requests"]
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
    got, running = engine_greedy(path, ids)
    assert running == (1 if name in ONE_AT_A_TIME else 8), f"{name}: {running} sequences at once"
    wrong = {
        f"prompt of {len(p)} tokens": f"first differs at token {first_difference(g, w)}: engine {g} "
        f"(finish {finish}), mlx-lm {w}"
        for p, (g, finish), w in zip(ids, got, want, strict=True)
        if g != w
    }
    assert not wrong, f"{name}: batched output differs from mlx-lm's: {wrong}"


def _probe(path: Path, model: Any = None) -> Any:
    from mlx_lm import load
    from smgpy.mlx.batch_probe import probe_batching
    from smgpy.mlx.mlx_lm_api import make_prompt_cache
    from smgpy.mlx.slots import can_merge, is_plain_kv

    model = model or load(str(path))[0]
    caches = make_prompt_cache(model)
    by_caches = "slots" if is_plain_kv(caches) else "merge" if can_merge(caches) else "single"
    return probe_batching(model, by_caches)


def test_prompts_shorter_than_an_n_gram_context_batch_with_longer_ones(built: tiny_models.Built) -> None:
    """LongCat-Flash's n-gram context holds a row's last 3 ids; prompts of 1 and 2 tokens leave it
    shorter than the batch's, and still join it and give their tokens alone."""
    path = built("longcat_flash_ngram")
    rng = random.Random(1)
    ids = [[rng.randrange(1000, 40000) for _ in range(n)] for n in (1, 2, 3, 9, 17)]
    want = mlx_lm_greedy(path, ids)
    got, running = engine_greedy(path, ids)
    assert running == 8
    assert [g for g, _ in got] == want


@pytest.mark.parametrize(
    ("name", "mode", "grouped"),
    [
        ("llama", "slots", False),
        ("gemma2", "slots", True),
        ("mamba", "merge", False),
        ("gpt_bigcode", "single", False),
        ("minimax_m3_vl", "single", False),
    ],
)
def test_the_load_probe_finds_how_each_model_batches(
    name: str, mode: str, grouped: bool, built: tiny_models.Built
) -> None:
    fit = _probe(built(name))
    assert (fit.mode, fit.grouped) == (mode, grouped)
    if name == "gpt_bigcode":  # its position embedding reads the cache's offset as one number
        assert "ValueError" in fit.reason
    elif name == "minimax_m3_vl":  # a padded row's key blocks are cut at other columns: not probed
        assert "keeps the top 2 blocks of 4 cache columns, cut from column 0" in fit.reason
    else:
        assert fit.reason == ""


def test_attention_that_picks_key_blocks_is_known_by_its_settings_inside_a_wrapper() -> None:
    """mlx-vlm's MiniMax-M3 names its block settings ``sparse_*`` and sits inside the engine's
    vision-language wrapper (``.model``); mlx-lm's names them ``index_*``."""
    import mlx.nn as nn
    from smgpy.mlx.batch_probe import _key_blocks

    class Attention(nn.Module):
        def __init__(self, **settings: int) -> None:
            super().__init__()
            for k, v in settings.items():
                setattr(self, k, v)

    class Wrapper:  # no named_modules, as the engine's VisionModel
        def __init__(self, model: Any) -> None:
            self.model = model

    vlm = nn.Sequential(nn.Linear(2, 2), Attention(sparse_block_size=128, sparse_topk_blocks=16))
    assert "top 16 blocks of 128 cache columns" in _key_blocks(Wrapper(vlm))
    assert "top 2 blocks of 4" in _key_blocks(nn.Sequential(Attention(index_block_size=4, index_topk_blocks=2)))
    assert _key_blocks(Wrapper(nn.Sequential(nn.Linear(2, 2), Attention(block_size=4)))) == ""


class _RowShifted:
    """A model that runs, batched, without an error but computes other logits than alone (as a
    model that misreads a batch's positions would): each row of a batch moves by its index."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.layers = model.layers

    def __call__(self, inputs: Any, cache: Any = None) -> Any:
        import mlx.core as mx

        out = self.model(inputs, cache=cache)
        return out + 10.0 * mx.arange(out.shape[0])[:, None, None] if out.shape[0] > 1 else out


def test_a_model_that_computes_other_logits_batched_runs_one_sequence_at_a_time(built: tiny_models.Built) -> None:
    from mlx_lm import load

    fit = _probe(Path(), _RowShifted(load(str(built("llama")))[0]))
    assert fit.mode == "single"
    assert "batched logits differ from the prompt's alone" in fit.reason


def test_kv_bits_is_refused_where_the_attention_cannot_read_a_quantized_batch(built: tiny_models.Built) -> None:
    from smgpy.mlx import MLXEngine

    with pytest.raises(ValueError, match="--kv-bits: mlx_lm.models.gemma2's attention cannot read a quantized cache"):
        MLXEngine(str(built("gemma2")), kv_bits=8, kv_group_size=32)
    with pytest.raises(ValueError, match="plain attention caches; mlx_lm.models.gpt_bigcode: it cannot be batched"):
        MLXEngine(str(built("gpt_bigcode")), kv_bits=8, kv_group_size=32)
