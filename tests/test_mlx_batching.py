"""The MLX engine's own batching loop (smgpy.mlx.batching, smgpy.mlx.slots) on a tiny llama.

The loop's promises, each checked against mlx-lm's own ``generate_step`` on one prompt alone:
- greedy tokens are the same whatever else runs beside a request: prompts of many lengths at once
  (chunked, shared left-padded prefills, a joiner longer than the batch), requests arriving and
  leaving at random while others decode (rows reused as holes), prefix-cache hits and misses, n>1;
- seeded sampling gives the same tokens alone and in a batch;
- a long prompt is prefilled in chunks between decode steps: running rows keep getting tokens;
- the slot batch holds exactly each sequence's own keys and values through joins and leaves.
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

demo_gguf()

import mlx.core as mx  # noqa: E402
from smgpy.mlx import MLXEngine  # noqa: E402
from smgpy.mlx.slots import SlotBatch  # noqa: E402

CHUNK = 64  # prefill_step_size: small, so that prompts here are cut into several chunks


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_models.build("llama", tmp_path_factory.mktemp("llama"))


@pytest.fixture(scope="module")
def reference(model_dir: Path) -> Any:
    from mlx_lm import load

    model, _ = load(str(model_dir))
    memo: dict[tuple[tuple[int, ...], int], list[int]] = {}

    def greedy(ids: list[int], n: int) -> list[int]:
        key = (tuple(ids), n)
        if key not in memo:
            from mlx_lm.generate import generate_step

            memo[key] = [int(t) for t, _ in generate_step(mx.array(ids), model, max_tokens=n)]
        return memo[key]

    return greedy


@pytest.fixture(scope="module")
def engine(model_dir: Path) -> Any:
    eng = MLXEngine(str(model_dir), max_running=8, max_waiting=64, prefill_step_size=CHUNK)
    assert eng._sched.mode == "slots"
    yield eng
    eng.shutdown()


def ids(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(1000, 40000) for _ in range(n)]


async def generate(engine: Any, prompt: list[int], max_new: int, stamps: list[int] | None = None, **params: Any) -> Any:
    params = {"temperature": 0, "max_new_tokens": max_new, "ignore_eos": True, **params}
    by_index: dict[int, list[int]] = {}
    meta: dict[str, Any] = {}
    async for out in engine.generate_request(GenerateReqInput(input_ids=prompt, sampling_params=params)):
        by_index.setdefault(out.get("index", 0), []).extend(out["output_ids"])
        if stamps is not None and out["output_ids"]:
            stamps.append(len(stamps))
        meta = out["meta_info"]
    return (by_index[0] if len(by_index) == 1 else by_index), meta


def arriving(engine: Any, plan: list[tuple[float, list[int], int]]) -> list[list[int]]:
    """The greedy tokens of each ``(delay, prompt, max_new)`` of ``plan``, every request sent
    ``delay`` seconds after the start, all of them running together."""

    async def one(delay: float, prompt: list[int], n: int) -> list[int]:
        await asyncio.sleep(delay)
        return list((await generate(engine, prompt, n))[0])

    async def main() -> list[list[int]]:
        return await asyncio.gather(*(one(*p) for p in plan))

    return asyncio.run(main())


def test_prompts_of_every_length_at_once_equal_mlx_lm_alone(engine: Any, reference: Any) -> None:
    """1 to 700 tokens together: chunked prefills (64), a shared padded prefill of the short ones,
    and joiners longer than the batch (every row is shifted right)."""
    rng = random.Random(1)
    prompts = [ids(rng, n) for n in (1, 2, 5, 17, 40, 130, 300, 700)]

    async def main() -> list[Any]:
        return await asyncio.gather(*(generate(engine, p, 10) for p in prompts))

    for p, (got, meta) in zip(prompts, asyncio.run(main()), strict=True):
        assert got == reference(p, 10), len(p)
        assert meta["prompt_tokens"] == len(p) and meta["completion_tokens"] == 10


def test_random_arrivals_and_departures_equal_mlx_lm_alone(engine: Any, reference: Any) -> None:
    """24 requests of random lengths and budgets arrive at random moments: rows are freed and
    refilled while others decode, and more requests wait than rows exist."""
    rng = random.Random(2)
    plan = [(rng.uniform(0, 0.3), ids(rng, rng.randrange(1, 90)), rng.randrange(1, 24)) for _ in range(24)]
    for (_, prompt, n), got in zip(plan, arriving(engine, plan), strict=True):
        assert got == reference(prompt, n)
    assert engine.get_load()["num_running_reqs"] == 0


def test_prefix_cache_hits_and_misses_give_the_same_tokens(engine: Any, reference: Any) -> None:
    rng = random.Random(3)
    first = ids(rng, 50)
    got, meta = asyncio.run(generate(engine, first, 8))
    assert got == reference(first, 8)
    # The next turn extends the previous prompt and answer: served from the cache.
    follow = first + got + ids(rng, 7)
    got2, meta2 = asyncio.run(generate(engine, follow, 8))
    assert got2 == reference(follow, 8) and meta2["cached_tokens"] >= len(first)
    # The same prompt again: everything but the last token comes from the cache.
    again, meta3 = asyncio.run(generate(engine, follow, 8))
    assert again == got2 and meta3["cached_tokens"] == len(follow) - 1
    # A prompt diverging inside the stored one reuses the common part.
    diverged = follow[:30] + ids(rng, 10)
    got4, meta4 = asyncio.run(generate(engine, diverged, 8))
    assert got4 == reference(diverged, 8) and 0 < meta4["cached_tokens"] <= 30


def test_n_samples_share_one_prefill_and_each_equals_mlx_lm(engine: Any, reference: Any) -> None:
    prompt = ids(random.Random(4), 70)
    before = engine.get_load()["prefilled_tokens"]
    got, _ = asyncio.run(generate(engine, prompt, 6, n=3))
    assert sorted(got) == [0, 1, 2] and all(v == reference(prompt, 6) for v in got.values())
    # The prompt up to its last token once, then that token as each sample's first input.
    assert engine.get_load()["prefilled_tokens"] - before == len(prompt) - 1 + 3


def test_seeded_sampling_is_the_same_alone_and_in_a_batch(engine: Any) -> None:
    rng = random.Random(5)
    prompt, others = ids(rng, 20), [ids(rng, n) for n in (3, 33, 90)]
    params = {"temperature": 0.9, "top_p": 0.95, "seed": 1234}
    alone, _ = asyncio.run(generate(engine, prompt, 12, **params))

    async def batched() -> list[Any]:
        return await asyncio.gather(
            generate(engine, others[0], 12, temperature=0.7),
            generate(engine, prompt, 12, **params),
            *(generate(engine, p, 12) for p in others[1:]),
        )

    assert asyncio.run(batched())[1][0] == alone
    assert len(set(alone)) > 1


def test_a_long_prompt_is_prefilled_between_decode_steps(engine: Any) -> None:
    """While a 700-token prompt is prefilled in 64-token chunks, a running request keeps getting
    tokens: at least one between most of its chunks, not all of them after it. (The chunks are
    sized by the model's hidden size, read from mlx-lm's model arguments.)"""
    from smgpy.mlx import mlx_lm_api

    assert mlx_lm_api.hidden_size(engine._sched.model) == 64
    rng = random.Random(6)
    stamps: list[int] = []
    order: list[str] = []

    async def main() -> None:
        running = asyncio.ensure_future(generate(engine, ids(rng, 10), 200, stamps))
        while len(stamps) < 5:
            await asyncio.sleep(0.001)
        at_arrival = len(stamps)
        first: list[int] = []
        await generate(engine, ids(rng, 700), 1, first)
        order.append(f"{len(stamps) - at_arrival}")
        await running

    asyncio.run(main())
    chunks = 700 // CHUNK
    assert int(order[0]) >= chunks - 2, order


def test_prefill_chunks_deep_in_a_prompt_cost_no_more_than_the_first() -> None:
    """While rows decode, a chunk from context position ``at`` is sized so that its cost (its
    tokens' projections plus their attention over the context) is at most the first chunk's."""
    from smgpy.mlx.batching import chunk_tokens

    def cost(at: int, n: int, hidden: int) -> float:
        return sum(1 + (at + i) / (6 * hidden) for i in range(n))

    for hidden in (64, 576, 2048):
        for budget in (1, 64, 512, 2048):
            assert chunk_tokens(0, budget, hidden) == budget
            last = budget
            for at in (1, 100, 511, 1000, 5000, 30000):
                n = chunk_tokens(at, budget, hidden)
                assert 1 <= n <= last, (hidden, budget, at, n)
                # (one token at least, whatever it costs)
                assert n == 1 or cost(at, n, hidden) <= cost(0, budget, hidden) * 1.001, (hidden, budget, at, n)
                last = n
    # Deep in a prompt attention dominates for a narrow model, hardly for a wide one.
    assert chunk_tokens(512, 512, 64) < 0.65 * 512
    assert chunk_tokens(512, 512, 2048) > 0.95 * 512
    assert chunk_tokens(5000, 512, None) == 512


def test_a_chunk_and_the_decode_step_beside_it_cost_no_more_than_a_first_chunk() -> None:
    """The turn's budget covers the rows' decode step (its rows through the layers, their
    attention and the logits head a prefill token skips); the chunk keeps a quarter at least."""
    from smgpy.mlx.batching import chunk_tokens, decode_cost, head_share

    def cost(at: int, n: int, hidden: int) -> float:
        return sum(1 + (at + i) / (6 * hidden) for i in range(n))

    # The tiny test model's head costs 32 tokens through its layers; SmolLM2-135M's a quarter.
    assert head_share(49152, 64, 2) == 32
    assert 0.2 < head_share(49152, 576, 30) < 0.3
    assert head_share(None, 64, 2) == 0 and decode_cost(8, 128, None, 32) == 0
    assert decode_cost(8, 384, 64, 32) == 8 * (1 + 1 + 32)
    for hidden, head in ((64, 32.0), (576, 0.24), (2048, 0.08)):
        full = cost(0, 512, hidden)
        last = 512
        for rows in (1, 8, 32, 64):
            busy = decode_cost(rows, 256, hidden, head)
            for at in (0, 300, 2000):
                n = chunk_tokens(at, 512, hidden, busy)
                assert n <= chunk_tokens(at, 512, hidden), (hidden, rows, at)
                assert cost(at, n, hidden) <= max(full - busy, full / 4) * 1.001, (hidden, rows, at)
                # a quarter of the budget at least (one token more would pass it)
                assert cost(at, n + 1, hidden) > full / 4, (hidden, rows, at)
            n0 = chunk_tokens(0, 512, hidden, busy)
            assert n0 <= last
            last = n0
    # A wide model's chunk hardly shrinks beside 8 rows; the tiny model's gives a third up.
    assert chunk_tokens(0, 512, 2048, decode_cost(8, 256, 2048, 0.08)) >= 500
    assert chunk_tokens(0, 512, 64, decode_cost(8, 256, 64, 32.0)) < 400


def test_the_compiled_step_pads_rows_by_less_than_a_third() -> None:
    """Rows are bucketed (one compiled shape per bucket) with padding under a third of the rows
    computed from 9 rows on, and buckets never shrink as rows grow."""
    from smgpy.mlx.compiled_step import _bucket

    last = 0
    for rows in range(1, 300):
        b = _bucket(rows)
        assert b >= rows and b >= last, rows
        if rows > 8:
            assert (b - rows) * 3 < b, (rows, b)
        last = b
    assert [_bucket(r) for r in (1, 3, 8, 9, 13, 17, 25, 33)] == [1, 4, 8, 12, 16, 24, 32, 48]


@pytest.mark.parametrize("kv_bits", [None, 4])
def test_the_slot_batch_holds_each_sequences_own_keys_and_values(kv_bits: int | None) -> None:
    """Joins (shorter and longer than the batch), leaves (holes, the top rows), speculative steps
    whose rows keep different numbers of columns (holes inside rows, squeezed out later) and the
    cut of dead columns (before 64 of them lie left of every row, into buffers of whole steps):
    each row's keys and values stay those of its sequence alone, at its own position, attended to
    under its own mask (quantized: exactly what quantizing that sequence alone gives, since groups
    never span tokens; the prefix cache's copy keeps that form)."""
    from mlx_lm.models.cache import KVCache

    rng = random.Random(7)
    heads, dim = 2, 32

    def same(got: Any, x: mx.array) -> bool:
        if kv_bits is None:
            return bool(mx.array_equal(got, x).item())
        want = mx.quantize(x, group_size=32, bits=kv_bits)
        return all(mx.array_equal(a, b).item() for a, b in zip(got, want, strict=True))

    def seq_cache(n: int) -> list[Any]:
        c = KVCache()
        if n:
            c.update_and_fetch(mx.random.normal((1, heads, n, dim)), mx.random.normal((1, heads, n, dim)))
        return [c]

    batch = SlotBatch(1, kv_bits, 32)
    own: dict[int, mx.array] = {}  # row -> expected keys (1, heads, L, dim)
    for step in range(300):
        if own and rng.random() < 0.3:
            row = rng.choice(sorted(own))
            del own[row]
            batch.leave([row])
        if len(own) < 6 and rng.random() < 0.4:
            n = rng.choice([0, 1, 3, 40, 300])
            c = seq_cache(n)
            row = batch.join(c, n)
            assert row not in own
            own[row] = c[0].keys[..., :n, :] if n else mx.zeros((1, heads, 0, dim))
        if batch.rows and rng.random() < 0.3:
            # A speculative step: every row writes ``width`` columns and keeps a prefix of them;
            # a row that keeps fewer than another is left with holes.
            width = rng.choice([2, 3, 4])
            k = mx.random.normal((batch.rows, heads, width, dim))
            batch.caches[0].update_and_fetch(k, k)
            batch.advance(width)
            kept = [rng.randint(1, width) for _ in range(batch.rows)]
            batch.settle(width, kept)
            for row in own:
                own[row] = mx.concatenate([own[row], k[row : row + 1, :, : kept[row]]], axis=2)
        elif batch.rows:
            k = mx.random.normal((batch.rows, heads, 1, dim))
            batch.caches[0].update_and_fetch(k, k)
            batch.advance(1)
            for row in own:
                own[row] = mx.concatenate([own[row], k[row : row + 1]], axis=2)
        if own:
            # Each row attends to its own tokens and the next one, nothing else; at its position.
            mask = batch.caches[0].make_mask(1)
            positions = batch.caches[0].offset.tolist()
            idx = batch.write_column
        for row, keys in own.items():
            got = batch.extract(row, keys.shape[2])[0]
            if keys.shape[2]:
                assert same(got.keys, keys), (step, row)
            assert positions[row] == keys.shape[2], (step, row)
            seen = [c for c in range(idx + 1) if bool(mask[row, 0, 0, c].item())]
            assert seen == [*batch._s.live_columns(row).tolist(), idx], (step, row)
        assert batch.rows == (max(own) + 1 if own else 0)
        if own:
            # Every step attends from column 0: dead columns left of every live row are cut
            # before they make a whole span step (64) of wasted attention.
            assert min(batch._s.starts[r] for r in own) < 64, step
        held = batch.caches[0].keys
        if held is not None:  # the buffers stay whole steps wide: a compiled step meets few shapes
            assert (held[0] if kv_bits else held).shape[2] % 256 == 0, step
    # The batch's width stays bounded by the longest live sequence plus the growth steps.
    held = batch.caches[0].keys
    width = 0 if held is None else (held[0] if kv_bits else held).shape[2]
    assert width <= max((k.shape[2] for k in own.values()), default=0) + 3 * 256


def quantized_greedy(model: Any, ids: list[int], n: int, bits: int, prompt_cache: Any = None) -> list[int]:
    """mlx-lm's own generation with a quantized KV cache from the first token on: a prompt is
    prefilled at full precision in one chunk (on ``prompt_cache``'s quantized entries when given),
    then every step attends to quantized keys and values, as the engine's batch does."""
    from mlx_lm.generate import generate_step

    steps = generate_step(
        mx.array(ids),
        model,
        max_tokens=n,
        prompt_cache=prompt_cache,
        kv_bits=bits,
        kv_group_size=32,
        quantized_kv_start=0,
    )
    return [int(t) for t, _ in steps]


@pytest.mark.parametrize("bits", [4, 8])
def test_a_quantized_kv_cache_gives_mlx_lm_quantized_tokens_in_a_batch(
    model_dir: Path, tmp_path: Path, bits: int
) -> None:
    """``kv_bits``: prompts of many lengths at once (a shared padded prefill, joiners longer than
    the batch), each equal to mlx-lm's quantized-cache generation of it alone, decoded by the
    compiled step; the batch and the prefix cache hold the quantized bytes per token; a hit resumes
    from the quantized entry exactly as mlx-lm does from that entry; the disk tier keeps entries
    across a restart, also into a server without ``kv_bits``."""
    from mlx_lm import load

    model, _ = load(str(model_dir))
    store = tmp_path / "prefix"
    eng = MLXEngine(str(model_dir), max_running=8, kv_bits=bits, kv_group_size=32, prefix_cache_dir=str(store))
    try:
        assert eng._sched.mode == "slots"
        rng = random.Random(11)
        prompts = [ids(rng, n) for n in (2, 5, 17, 40, 130, 300)]

        async def main() -> list[Any]:
            return await asyncio.gather(*(generate(eng, p, 12) for p in prompts))

        for p, (got, _) in zip(prompts, asyncio.run(main()), strict=True):
            assert got == quantized_greedy(model, p, 12, bits), len(p)
        compiled = eng._sched.compiled
        assert compiled is not None and compiled.steps > 0, "the quantized decode steps ran eagerly"
        # Bytes per cached token, in the running batch and in a prefix-cache entry, against 32 bits.
        layers, kv_heads, head_dim = 2, 1, 32
        quantized = layers * 2 * kv_heads * (head_dim * bits / 8 + 2 * (head_dim // 32) * 4)
        batch = eng._sched.batch
        assert batch is not None
        held = batch.caches[0]._k[0]
        assert batch.nbytes / (held.shape[0] * held.shape[2]) == quantized
        assert quantized < layers * 2 * kv_heads * head_dim * 4 / (3 if bits == 8 else 5)

        first = prompts[3]
        follow = first + quantized_greedy(model, first, 12, bits) + ids(rng, 5)
        hit = eng._sched._cache.fetch(follow)
        assert hit.cache is not None and hit.cached >= len(first)
        assert all(type(c).__name__ == "QuantizedKVCache" and c.bits == bits for c in hit.cache)
        assert sum(c.nbytes for c in hit.cache) / hit.cache[0].keys[0].shape[2] == quantized
        want = quantized_greedy(model, follow[hit.cached :], 6, bits, prompt_cache=hit.cache)
        got, meta = asyncio.run(generate(eng, follow, 6))
        assert meta["cached_tokens"] == hit.cached and got == want
    finally:
        eng.shutdown()  # pending prefix-cache entries are written first
    assert list(store.rglob("*.safetensors"))
    for kv_bits in (bits, None):  # the same settings after a restart, and a server without them
        eng = MLXEngine(str(model_dir), max_running=8, kv_bits=kv_bits, kv_group_size=32, prefix_cache_dir=str(store))
        try:
            got, meta = asyncio.run(generate(eng, follow, 6))
            assert meta["cached_tokens"] >= len(first) and len(got) == 6
            if kv_bits == bits:
                assert got == want
        finally:
            eng.shutdown()


def test_kv_bits_is_refused_at_load_where_it_cannot_apply(model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--kv-group-size 64 does not divide layer 0's keys width \\(32\\)"):
        MLXEngine(str(model_dir), kv_bits=4, kv_group_size=64)
    with pytest.raises(ValueError, match="kv_bits must be one of 2, 3, 4, 5, 6, 8"):
        MLXEngine(str(model_dir), kv_bits=7)
    sliding = tiny_models.build("gemma3_text", tmp_path / "gemma3_text")
    with pytest.raises(ValueError, match="--kv-bits needs a model whose layers all use plain attention caches"):
        MLXEngine(str(sliding), kv_bits=8, kv_group_size=32)


def test_the_decode_step_runs_compiled_and_gives_mlx_lm_tokens(engine: Any, reference: Any) -> None:
    """The engine above compiles its decode step (so every test here checks the compiled step
    against mlx-lm); a prompt past one width step (256 columns) makes a second shape."""
    compiled = engine._sched.compiled
    assert compiled is not None, "the load check refused the tiny llama's compiled step"
    before = compiled.steps
    rng = random.Random(9)
    prompts = [ids(rng, n) for n in (3, 250, 300)]

    async def main() -> list[Any]:
        return await asyncio.gather(*(generate(engine, p, 12) for p in prompts))

    for p, (got, _) in zip(prompts, asyncio.run(main()), strict=True):
        assert got == reference(p, 12), len(p)
    assert compiled.steps > before, "the decode steps ran eagerly"


def test_a_lone_requests_first_token_is_read_before_another_step_is_queued(engine: Any, reference: Any) -> None:
    """A batch's first tokens go out before the next decode step is queued: a lone request waits one
    step for its first token, not two, and one that wants one token runs one step, none wasted."""
    prompt = ids(random.Random(11), 21)
    before = engine._sched.times.steps
    got, meta = asyncio.run(generate(engine, prompt, 1))
    assert got == reference(prompt, 1) and meta["finish_reason"]["type"] == "length"
    assert engine._sched.times.steps - before == 1
    before = engine._sched.times.steps
    got, _ = asyncio.run(generate(engine, prompt, 5, num_draft_tokens=0))  # plain decode steps only
    assert got == reference(prompt, 5)
    # Pipelined after the first: the step queued before the fifth token is read is the sixth.
    assert engine._sched.times.steps - before == 6


def test_a_step_that_cannot_be_traced_or_drifts_is_not_compiled(model_dir: Path) -> None:
    from mlx_lm import load
    from smgpy.mlx.compiled_step import CompiledDecode, _TracedCache, check_batch

    model, _ = load(str(model_dir))
    layers = len(model.layers)

    def traced(cache: list[Any]) -> bool:
        return isinstance(cache[0], _TracedCache)

    class Untraceable:
        """Asks its cache for what only an eager cache has."""

        def __call__(self, x: mx.array, cache: list[Any]) -> mx.array:
            if traced(cache):
                raise AttributeError("state")
            out: mx.array = model(x, cache=cache)
            return out

    class Drifting:
        """Gives other logits when traced."""

        def __call__(self, x: mx.array, cache: list[Any]) -> mx.array:
            out: mx.array = model(x, cache=cache)
            return out + 0.5 if traced(cache) else out

    def batch() -> Any:
        return check_batch(model, layers)

    assert CompiledDecode(model, layers).check(batch)
    assert not CompiledDecode(Untraceable(), layers).check(batch)
    assert not CompiledDecode(Drifting(), layers).check(batch)
    eager = MLXEngine(str(model_dir), compile_step=False)
    try:
        assert eager._sched.compiled is None
    finally:
        eager.shutdown()


def test_a_bfloat16_step_that_differs_by_rounding_alone_is_compiled(model_dir: Path) -> None:
    """In bfloat16 a GPU's fused kernels round otherwise than the eager step: logits a unit or two
    in their last place apart are the same step; a quarter of the scale apart they are not."""
    from mlx_lm import load
    from smgpy.mlx.compiled_step import CompiledDecode, _TracedCache, agreement, check_batch

    model, _ = load(str(model_dir))
    model.set_dtype(mx.bfloat16)
    layers = len(model.layers)

    class Scaled:
        """Scales its logits by ``factor`` when traced."""

        def __init__(self, factor: float) -> None:
            self.factor = factor

        def __call__(self, x: mx.array, cache: list[Any]) -> mx.array:
            out: mx.array = model(x, cache=cache)
            return out * self.factor if isinstance(cache[0], _TracedCache) else out

    def batch() -> Any:
        return check_batch(model, layers)

    assert agreement(mx.float32) == 1e-3 and agreement(mx.bfloat16) > 2**-7
    assert CompiledDecode(model, layers).check(batch)
    # 1 + 2^-7 is one unit in the last place of bfloat16: beyond float32's bound, within bfloat16's.
    assert CompiledDecode(Scaled(1 + 2**-7), layers).check(batch)
    assert not CompiledDecode(Scaled(1.25), layers).check(batch)


def test_the_compiled_step_keeps_a_plain_cached_layers_sliding_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sliding-window layer over plain caches (smollm3's class makes no rotating cache) asks the
    batch for a windowed mask: rows longer than the window attend to its last columns only, in the
    compiled step as in the eager one."""
    from smgpy.mlx import mlx_lm_api
    from smgpy.mlx.compiled_step import CompiledDecode, check_batch

    window = {"sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"], "no_rope_layers": [1, 1]}
    monkeypatch.setitem(tiny_models.CONFIGS, "smollm3", {**tiny_models.CONFIGS["llama"], **window})
    model = mlx_lm_api.load(str(tiny_models.build("smollm3", tmp_path / "smollm3")))[0]
    layers = len(mlx_lm_api.make_prompt_cache(model))
    assert CompiledDecode(model, layers).check(lambda: check_batch(model, layers, (20, 5, 30)))


def test_speculating_rows_of_a_batch_give_mlx_lm_tokens(model_dir: Path, reference: Any, engine: Any) -> None:
    """Prompt lookup in every row of a batch (each row drafts from its own repetitive prompt,
    the random model keeps some drafts and not others: rows keep different numbers of columns,
    leaving holes): every request's greedy tokens equal mlx-lm's alone, through arrivals,
    departures, prefix-cache hits and the compiled decode step between speculative ones."""
    from smgpy.mlx.pacing import StepCost

    eng = MLXEngine(str(model_dir), max_running=8, max_waiting=64, prefill_step_size=CHUNK, prompt_lookup_tokens=4)
    eng._sched.cost = StepCost(learn=False)  # verify whenever a row drafts (see StepCost)
    try:
        rng = random.Random(5)
        phrases = [ids(rng, rng.randrange(3, 9)) for _ in range(6)]
        plan = [
            (rng.uniform(0, 0.4), phrases[i % 6] * rng.randrange(2, 7) + ids(rng, rng.randrange(0, 5)), 40)
            for i in range(16)
        ]
        for (_, prompt, n), got in zip(plan, arriving(eng, plan), strict=True):
            assert got == reference(prompt, n)
        # Rows that may not draft (penalties, a seed) take their token from a speculative step's
        # first column: the same tokens as in the engine without speculation.
        others = [
            (phrases[0] * 3, {"repetition_penalty": 1.3}),
            (phrases[1] * 3, {"temperature": 0.9, "seed": 7}),
            (phrases[2] * 3, {"frequency_penalty": 0.5}),
        ]

        async def mixed(engine: Any, drafting: bool) -> list[Any]:
            extra = [generate(engine, phrases[3] * 5, 30), generate(engine, phrases[4] * 5, 30)] if drafting else []
            got = await asyncio.gather(*(generate(engine, p, 30, **kw) for p, kw in others), *extra)
            return [g[0] for g in got[: len(others)]]

        alone = [asyncio.run(generate(engine, p, 30, **kw))[0] for p, kw in others]
        steps = eng._sched.speculative_steps
        assert asyncio.run(mixed(eng, True)) == alone
        assert eng._sched.speculative_steps > steps
        sched = eng._sched
        assert sched.speculative_steps > 0 and sched.drafts_accepted > 0
        assert sched.batched_speculative_steps > 0, "no step verified the drafts of several rows"
        assert sched.drafts_accepted < sched.drafts_proposed, "no row rejected a draft: no holes were made"
        assert sched.compiled is not None and sched.compiled.steps > 0
    finally:
        eng.shutdown()
