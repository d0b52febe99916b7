"""smgpy.mlx.rewrite: the rewritten forward pass computes exactly what mlx-lm's computes.

On the real SmolLM2-135M-Instruct model (bit-identical logits for prefill and decode, single
sequence and a left-padded batch, and identical greedy tokens through the engine), and on small
synthetic modules for the cases the model does not have.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import demo_engine, demo_gguf  # noqa: E402

GGUF = demo_gguf()

import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402
import numpy as np  # noqa: E402
from mlx_lm.models.cache import BatchKVCache, make_prompt_cache  # noqa: E402
from smgpy.engine import GenerateReqInput  # noqa: E402
from smgpy.mlx.gguf import convert_gguf  # noqa: E402
from smgpy.mlx.rewrite import (  # noqa: E402
    CompiledRMSNorm,
    PretransposedLinear,
    TableRope,
    rewrite_model,
)


@pytest.fixture(scope="module")
def models() -> tuple[Any, Any, Any]:
    from mlx_lm import load

    path = str(convert_gguf(GGUF))
    original, tok = load(path)
    rewritten, _ = load(path)
    report = rewrite_model(rewritten)
    assert report.rope_modules == len(rewritten.model.layers)
    assert report.norm_modules == 2 * len(rewritten.model.layers) + 1
    assert report.linear_modules == 7 * len(rewritten.model.layers)  # q, k, v, o, gate, up, down
    assert not report.skipped
    return original, rewritten, tok


def test_model_modules_are_replaced(models: tuple[Any, Any, Any]) -> None:
    _, rewritten, _ = models
    layer = rewritten.model.layers[0]
    assert isinstance(layer.self_attn.q_proj, PretransposedLinear)
    assert isinstance(layer.mlp.gate_proj, PretransposedLinear)
    assert isinstance(layer.self_attn.rope, TableRope)
    assert isinstance(layer.input_layernorm, CompiledRMSNorm)
    assert isinstance(layer.self_attn.o_proj, PretransposedLinear)


def test_single_sequence_logits_are_bit_identical(models: tuple[Any, Any, Any]) -> None:
    original, rewritten, tok = models
    prompt = tok.encode("The history of the French capital, told briefly: " * 12)
    a_cache, b_cache = make_prompt_cache(original), make_prompt_cache(rewritten)
    x = mx.array(prompt)[None]
    assert mx.array_equal(original(x, cache=a_cache), rewritten(x, cache=b_cache)).item()
    for t in (100, 2000, 7, 31):
        y = mx.array([[t]])
        assert mx.array_equal(original(y, cache=a_cache), rewritten(y, cache=b_cache)).item()


def test_left_padded_batch_logits_are_bit_identical(models: tuple[Any, Any, Any]) -> None:
    """Batched caches pass positions as arrays (negative on padding): the real rows must match."""
    original, rewritten, tok = models
    prompts = [tok.encode("Name a color."), tok.encode("What is the capital of France? Answer in one word.")]
    width = max(len(p) for p in prompts)
    padding = [width - len(p) for p in prompts]
    x = mx.array([[0] * pad + p for pad, p in zip(padding, prompts, strict=True)])
    for tables in rewritten_tables(rewritten):
        tables.reserve(width + 8)
    a_cache = [BatchKVCache(padding) for _ in original.model.layers]
    b_cache = [BatchKVCache(padding) for _ in rewritten.model.layers]
    a, b = original(x, cache=a_cache), rewritten(x, cache=b_cache)
    assert mx.array_equal(a[:, -1], b[:, -1]).item()
    for step in range(4):
        y = mx.array([[11 + step], [400 + step]])
        assert mx.array_equal(original(y, cache=a_cache), rewritten(y, cache=b_cache)).item()


def rewritten_tables(model: Any) -> list[Any]:
    return list({id(m._table): m._table for m in model.modules() if isinstance(m, TableRope)}.values())


def test_engine_greedy_tokens_equal_mlx_lm_alone_and_batched(models: tuple[Any, Any, Any]) -> None:
    """With rewrites on: 40 greedy tokens per prompt, one at a time and four together."""
    from mlx_lm import stream_generate

    original, _, tok = models
    questions = ["What is the capital of France?", "Name three colors.", "Count to ten.", "Describe a cat."]
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
        for q in questions
    ]
    want = [[r.token for r in stream_generate(original, tok, p, max_tokens=40)] for p in prompts]
    engine = demo_engine(max_running=4, graph_rewrites=True)
    try:
        assert engine._sched.rewrites is not None and engine._sched.rewrites.rope_modules > 0

        async def one(p: str) -> list[int]:
            obj = GenerateReqInput(text=p, sampling_params={"temperature": 0, "max_new_tokens": 40})
            return [t async for out in engine.generate_request(obj) for t in out["output_ids"]]

        async def together() -> list[list[int]]:
            return list(await asyncio.gather(*(one(p) for p in prompts)))

        assert [asyncio.run(one(p)) for p in prompts] == want
        assert asyncio.run(together()) == want
    finally:
        engine.shutdown()


def test_engine_without_rewrites_keeps_mlx_lm_modules() -> None:
    engine = demo_engine(max_running=1, graph_rewrites=False)
    try:
        assert engine._sched.rewrites is None
        assert type(engine._sched.model.model.layers[0].self_attn.q_proj) is nn.Linear
    finally:
        engine.shutdown()


# ----- synthetic modules -----


class Block(nn.Module):
    def __init__(self, dims: int, heads: int, rope: nn.RoPE, bias: bool) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dims, dims, bias=bias)
        self.k_proj = nn.Linear(dims, dims // 2, bias=bias)
        self.v_proj = nn.Linear(dims, dims // 2, bias=bias)
        self.rope = rope

    def __call__(self, x: mx.array, offset: int | mx.array = 0) -> mx.array:
        b, length, _ = x.shape
        q = self.q_proj(x).reshape(b, length, self.heads, -1).transpose(0, 2, 1, 3)
        k = self.k_proj(x).reshape(b, length, self.heads // 2, -1).transpose(0, 2, 1, 3)
        return mx.concatenate([self.rope(q, offset=offset), self.rope(k, offset=offset)], axis=1) + self.v_proj(x).sum()


@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("base_scale", [(10000.0, 1.0), (500000.0, 0.25)])
def test_synthetic_block_is_bit_identical(traditional: bool, bias: bool, base_scale: tuple[float, float]) -> None:
    base, scale = base_scale
    mx.random.seed(3)
    block = Block(256, 16, nn.RoPE(16, traditional=traditional, base=base, scale=scale), bias)
    mx.eval(block.parameters())
    reference = Block(256, 16, nn.RoPE(16, traditional=traditional, base=base, scale=scale), bias)
    reference.update(block.parameters())
    report = rewrite_model(block)
    assert report.rope_modules == 1 and report.linear_modules == 3 and not report.skipped
    rng = np.random.default_rng(7)
    for rows, offset in ((1, 0), (1, 300), (6, 17), (3, mx.array([5, 0])), (1, mx.array([900, 2])), (80, 3)):
        x = mx.array(rng.standard_normal((2, rows, 256)).astype(np.float32))
        for t in rewritten_tables(block):
            t.reserve(1000)
        assert mx.array_equal(reference(x, offset=offset), block(x, offset=offset)).item()


@pytest.mark.parametrize("kind", ["llama3", "proportional"])
def test_mlx_lm_rope_variants_are_bit_identical(kind: str) -> None:
    """Llama 3.x's frequency-scaled rope and the proportional rope are tables too."""
    from mlx_lm.models.rope_utils import Llama3RoPE, ProportionalRoPE

    def make() -> Any:
        if kind == "llama3":
            scaling = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
            return Llama3RoPE(16, max_position_embeddings=4096, base=500000.0, scaling_config=scaling)
        return ProportionalRoPE(16, 8, base=10000.0)

    block = Block(256, 16, make(), False)
    mx.eval(block.parameters())
    reference = Block(256, 16, make(), False)
    reference.update(block.parameters())
    report = rewrite_model(block)
    assert report.rope_modules == 1 and not [s for s in report.skipped if "rope" in s]
    rng = np.random.default_rng(9)
    for rows, offset in ((1, 0), (1, 3000), (5, 9), (2, mx.array([7, 0]))):
        x = mx.array(rng.standard_normal((2, rows, 256)).astype(np.float32))
        for t in rewritten_tables(block):
            t.reserve(3100)
        assert mx.array_equal(reference(x, offset=offset), block(x, offset=offset)).item()


def test_partial_rotary_dims_use_the_original_rope() -> None:
    """A rope over part of the head (dims < head size) is left to mx.fast.rope at call time."""
    rope = nn.RoPE(8)
    block = Block(64, 4, rope, False)
    mx.eval(block.parameters())
    reference = Block(64, 4, nn.RoPE(8), False)
    reference.update(block.parameters())
    rewrite_model(block)
    x = mx.random.normal((1, 3, 64))
    assert mx.array_equal(reference(x, offset=4), block(x, offset=4)).item()


def test_nothing_is_rewritten_off_the_cpu() -> None:
    """On Metal or CUDA the model stays as mlx-lm loaded it (the device is faked here)."""
    block = Block(64, 4, nn.RoPE(16), False)
    before = {k: type(m) for k, m in block.named_modules()}
    report = rewrite_model(block, device=mx.gpu)
    assert (report.rope_modules, report.norm_modules, report.linear_modules) == (0, 0, 0)
    assert report.skipped and "CPU backend" in report.skipped[0]
    assert {k: type(m) for k, m in block.named_modules()} == before


def test_a_reduction_over_a_projection_stays_exact() -> None:
    """Why sibling projections are not fused: a consumer summing over one of them must see the
    same array layout as in the original model (the Block's `v_proj(x).sum()`)."""
    block = Block(256, 16, nn.RoPE(16), False)
    mx.eval(block.parameters())
    reference = Block(256, 16, nn.RoPE(16), False)
    reference.update(block.parameters())
    rewrite_model(block)
    for batch in (1, 2, 3, 8):
        x = mx.random.normal((batch, 1, 256))
        assert mx.array_equal(reference.v_proj(x).sum(), block.v_proj(x).sum()).item()
        assert mx.array_equal(reference(x, offset=5), block(x, offset=5)).item()


def test_rewrites_can_be_turned_off_one_by_one() -> None:
    block = Block(64, 4, nn.RoPE(16), False)
    report = rewrite_model(block, ropes=False, norms=False, linears=False)
    assert (report.rope_modules, report.linear_modules) == (0, 0)
    assert type(block.q_proj) is nn.Linear and type(block.rope) is nn.RoPE


class Normed(nn.Module):
    def __init__(self, dims: int, eps: float) -> None:
        super().__init__()
        self.norm = nn.RMSNorm(dims, eps=eps)
        self.out = nn.Linear(dims, dims, bias=True)

    def __call__(self, x: mx.array) -> mx.array:
        return self.out(self.norm(x))


@pytest.mark.parametrize("dims_eps", [(576, 1e-5), (96, 1e-6), (1000, 0.1)])
def test_rms_norm_and_linear_are_bit_identical(dims_eps: tuple[int, float]) -> None:
    dims, eps = dims_eps
    block = Normed(dims, eps)
    block.norm.weight = mx.random.normal((dims,))
    mx.eval(block.parameters())
    reference = Normed(dims, eps)
    reference.update(block.parameters())
    report = rewrite_model(block, norms=True)
    assert (report.norm_modules, report.linear_modules, report.skipped) == (1, 1, [])
    for shape in ((1, 1, dims), (4, 1, dims), (2, 33, dims)):
        x = 5 * mx.random.normal(shape)
        assert mx.array_equal(reference(x), block(x)).item()
    # Other dtypes go to mx.fast.rms_norm unchanged.
    x16 = mx.random.normal((1, 3, dims)).astype(mx.float16)
    assert mx.array_equal(reference.norm(x16), block.norm(x16)).item()
