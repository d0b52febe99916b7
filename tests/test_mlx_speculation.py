"""Prompt-lookup speculation (smgpy.mlx.lookup, the engine's verify step): drafts come from the
context, and greedy output with speculation is token-identical to output without it, across
lengths, stop ids, logprobs, concurrency and the prefix cache; on the real demo model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import demo_engine
from hypothesis import given, settings
from hypothesis import strategies as st
from smgpy.mlx.lookup import Lookup


def test_lookup_drafts_what_followed_the_tails_last_occurrence() -> None:
    ctx = [1, 2, 3, 4, 5, 9, 9, 2, 3]
    assert Lookup(ctx).propose(3) == [4, 5, 9]
    # The longest match wins over a more recent, shorter one.
    ctx = [7, 1, 2, 3, 4, 8, 0, 2, 3, 5, 7, 1, 2, 3]
    assert Lookup(ctx).propose(2) == [4, 8]


def test_lookup_rests_after_misses_and_wakes_after_a_hit() -> None:
    lk = Lookup([1, 2, 3, 1, 2])
    assert lk.propose(4) == [3, 1, 2]  # up to the end of the context
    lk.verified(3, 0)  # rejected: rest one token
    assert lk.resting and lk.propose(4) == []
    lk.extend([3])
    assert not lk.resting
    lk.verified(2, 0)  # two misses in a row: two tokens
    lk.extend([1])
    assert lk.resting
    lk.extend([2])
    assert not lk.resting
    assert Lookup([5, 6, 7]).propose(4) == []  # nothing repeats


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=3, max_size=60), st.integers(1, 8))
def test_lookup_drafts_continue_an_earlier_occurrence_of_the_tail(ctx: list[int], k: int) -> None:
    draft = Lookup(ctx).propose(k)
    assert len(draft) <= k
    if draft:
        n = len(ctx)
        starts = [e for e in range(2, n) if ctx[e - 2 : e] == ctx[-2:] and ctx[e : e + len(draft)] == draft]
        assert starts, (ctx, draft)


# ----- the engine -----

REPEAT = (
    "<|im_start|>user\nRepeat this line five times, one per line: The quick brown fox jumps over the lazy dog."
    "<|im_end|>\n<|im_start|>assistant\n"
)
LIST = (
    "<|im_start|>user\nCopy this list exactly:\n- apples 12\n- pears 7\n- plums 30\n- figs 4\n- limes 19"
    "<|im_end|>\n<|im_start|>assistant\n"
)
CHAT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def spec_engine() -> Iterator[Any]:
    engine = demo_engine(prompt_lookup_tokens=4)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def mlx_engine() -> Iterator[Any]:
    """The reference: the same model without speculation."""
    engine = demo_engine(prompt_lookup_tokens=0)
    yield engine
    engine.shutdown()


def _run(engine: Any, prompts: list[str], **params: Any) -> list[tuple[list[int], Any]]:
    logprobs = params.pop("logprobs", False)

    async def one(i: int, text: str) -> tuple[list[int], Any]:
        obj = SimpleNamespace(
            rid=None,
            text=text,
            input_ids=None,
            sampling_params={"temperature": 0, "max_new_tokens": 40, **params},
            return_logprob=logprobs,
        )
        ids: list[int] = []
        meta: Any = None
        async for out in engine.generate_request(obj):
            ids += out["output_ids"]
            meta = out["meta_info"]
        return ids, meta

    async def main() -> list[tuple[list[int], Any]]:
        return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts))))

    return asyncio.run(main())


def test_greedy_output_is_unchanged_and_drafts_are_accepted(mlx_engine: Any, spec_engine: Any) -> None:
    sched = spec_engine._sched
    before = sched.lookup_accepted
    for prompt in (REPEAT, LIST, CHAT):
        want = _run(mlx_engine, [prompt])[0][0]
        got = _run(spec_engine, [prompt])[0][0]
        assert got == want
    assert sched.speculative_steps > 0 and sched.lookup_accepted > before


@pytest.mark.parametrize("max_tokens", [1, 2, 3, 7, 23])
def test_length_limits_hold_exactly(mlx_engine: Any, spec_engine: Any, max_tokens: int) -> None:
    want, meta_want = _run(mlx_engine, [REPEAT], max_new_tokens=max_tokens)[0]
    got, meta = _run(spec_engine, [REPEAT], max_new_tokens=max_tokens)[0]
    assert got == want and len(got) == max_tokens
    assert meta["finish_reason"] == meta_want["finish_reason"] == {"type": "length"}


def test_stop_ids_end_at_the_same_token(mlx_engine: Any, spec_engine: Any) -> None:
    full = _run(mlx_engine, [REPEAT])[0][0]
    stop = full[12]  # a token inside what drafts cover
    want, meta_want = _run(mlx_engine, [REPEAT], stop_token_ids=[stop])[0]
    got, meta = _run(spec_engine, [REPEAT], stop_token_ids=[stop])[0]
    assert got == want
    assert meta["finish_reason"] == meta_want["finish_reason"]


def test_concurrent_and_logprob_requests_are_unchanged(mlx_engine: Any, spec_engine: Any) -> None:
    """Rows come and go (speculation only while one runs alone); a logprobs request is never
    speculated and reports the same values."""
    prompts = [REPEAT, LIST, CHAT]
    want = [ids for ids, _ in _run(mlx_engine, prompts, max_new_tokens=30)]
    got = [ids for ids, _ in _run(spec_engine, prompts, max_new_tokens=30)]
    assert got == want
    ids_a, meta_a = _run(mlx_engine, [LIST], logprobs=True)[0]
    ids_b, meta_b = _run(spec_engine, [LIST], logprobs=True)[0]
    assert ids_a == ids_b
    assert [round(x[0], 4) for x in meta_a["output_token_logprobs"]] == [
        round(x[0], 4) for x in meta_b["output_token_logprobs"]
    ]


def test_prefix_cache_after_speculation_serves_the_next_turn_right(mlx_engine: Any, spec_engine: Any) -> None:
    """A row that ran speculative steps leaves the prefix cache its real keys and values: the next
    turn, which extends the first turn's answer, reuses them and answers as without speculation."""
    first = _run(spec_engine, [LIST])[0][0]
    turn = LIST + spec_engine.tokenizer.decode(first) + "<|im_end|>\n<|im_start|>user\nAnd again?<|im_end|>\n"
    turn += "<|im_start|>assistant\n"
    got, meta = _run(spec_engine, [turn])[0]
    want = _run(mlx_engine, [turn])[0][0]
    assert got == want
    assert meta["cached_tokens"] > 20
