"""Prompt-lookup speculation (smgpy.mlx.lookup, the engine's verify step): drafts come from the
context, and greedy output with speculation is token-identical to output without it, across
lengths, stop ids, logprobs, concurrency and the prefix cache; on the real demo model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import collect, demo_engine
from hypothesis import given, settings
from hypothesis import strategies as st
from smgpy.mlx.lookup import Lookup
from smgpy.mlx.pacing import StepCost


def test_lookup_drafts_what_followed_the_tails_last_occurrence() -> None:
    ctx = [1, 2, 3, 4, 5, 9, 9, 2, 3]
    assert Lookup(ctx).propose(3) == [4, 5, 9]
    # The longest match wins over a more recent, shorter one.
    ctx = [7, 1, 2, 3, 4, 8, 0, 2, 3, 5, 7, 1, 2, 3]
    assert Lookup(ctx).propose(2) == [4, 8]


def test_lookup_goes_on_in_the_text_it_was_copying() -> None:
    """Two passages end alike; the output copied the first, left it for a renamed token and came
    back: the draft goes on in the first, where a fresh lookup takes the more recent second."""
    first, second = [7, 1, 2, 3, 4, 5, 6], [8, 1, 2, 3, 4, 5, 0]
    lk = Lookup([*first, *second, 7, 1])
    assert lk.propose(4) == [2, 3, 4, 5]  # only the first passage follows "7 1"
    lk.verified(0, 4)  # the model wrote 20 where the text has 2 (a rename)
    lk.extend([20, 3, 4, 5])
    assert lk.propose(2) == [6, 8]
    assert Lookup(lk.context).propose(2) == [0, 7]


def test_lookup_never_drafts_a_position_that_is_no_token() -> None:
    """A vision-language prompt's image positions are held as -1: a draft stops before them."""
    assert Lookup([1, 2, 3, -1, -1, 4, 1, 2]).propose(4) == [3]
    assert Lookup([1, 2, -1, 3, 1, 2]).propose(4) == []


def test_lookup_rests_after_misses_and_wakes_after_a_hit() -> None:
    lk = Lookup([1, 2, 3, 1, 2])
    assert lk.propose(4) == [3, 1, 2]  # up to the end of the context
    lk.verified(0)  # rejected: rest one token
    assert lk.resting and lk.propose(4) == []
    lk.extend([3])
    assert not lk.resting
    lk.verified(0)  # two misses in a row: two tokens
    lk.extend([1])
    assert lk.resting
    lk.extend([2])
    assert not lk.resting
    assert Lookup([5, 6, 7]).propose(4) == []  # nothing repeats


def test_an_unverified_lookup_checks_its_drafts_against_the_output() -> None:
    """While no step verifies a row (its drafts judged not worth a wider pass), the lookup checks
    drafts against the tokens that come instead: the row's rate rises when its answer copies the
    prompt and falls when it writes something else, where before it stayed at what it was."""
    passage = list(range(100, 220))
    copying = Lookup([*passage, 1, 2, 3, *passage[:3]])
    copying.pace.rate = 0.3  # as after a stretch of rejected drafts
    copying.verified(0, 4)
    for t in passage[3:]:  # the answer copies the passage; no step verifies it
        copying.extend([t])
    assert copying.pace.rate > 0.9
    astray = Lookup([*passage, 1, 2, 3, *passage[:3]])
    astray.pace.rate = 0.9
    astray.verified(4, 4)
    for i in range(60):  # the passage's first two tokens again and again, and then something else
        for t in (passage[0], passage[1], 300 + i):
            astray.extend([t])
    assert astray.pace.rate < 0.3
    # A draft to verify replaces a check in progress: the step's verification counts, not both.
    lk = Lookup([*passage, *passage[:3]])
    assert lk._check
    assert lk.propose(4) == passage[3:7]
    assert not lk._check


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


def test_step_cost_drafts_where_a_wider_pass_is_cheap_and_not_where_it_is_not() -> None:
    """What a wider step costs is learnt per batch size from the steps run: where a pass of 8 rows
    x 5 columns costs what 8 x 1 does (an accelerator), 8 rows that draft well verify 4 drafts
    each; where each column costs what a whole step does (a CPU bound by arithmetic), a plain step
    wins; in between (the demo model with OpenBLAS here: 8 x 2 costs 1.4x), a shorter width for
    rows that draft well and none for rows that draft badly. A batch size not seen speculating
    borrows the nearest one's cost."""
    from smgpy.mlx.pacing import Pace

    def paces(rate: float) -> list[tuple[Pace, int]]:
        out = []
        for _ in range(8):
            pace = Pace()
            pace.rate = rate
            out.append((pace, 4))
        return out

    flat, linear, mixed = StepCost(), StepCost(), StepCost()
    for cost in (flat, linear, mixed):
        cost.decoded(8, 0.3)
    for _ in range(5):
        flat.speculated(8, 5, 0.3)
        linear.speculated(8, 2, 0.6)
        mixed.speculated(8, 2, 0.42)
    assert flat.best_width(8, paces(0.6)) == 5
    assert linear.best_width(8, paces(0.9)) == 1
    assert mixed.best_width(8, paces(0.2)) == 1
    assert 1 < mixed.best_width(8, paces(0.8)) < 5
    assert mixed.best_width(6, paces(0.2)) == 1  # 5-8 rows: the same bucket
    assert abs(mixed.line(32)[1] - 0.4) < 1e-9  # no 32-row step seen: the nearest bucket's
    assert StepCost().best_width(8, paces(0.6)) == 5  # nothing learnt yet: try it
    # Tried once at a batch size with no plain step measured: plain steps until one is, then the
    # step is priced (left free, speculation went on unpriced for as long as any row drafted).
    fresh = StepCost()
    fresh.speculated(8, 5, 0.3)
    assert fresh.best_width(8, paces(0.99)) == 1
    assert fresh.best_width(6, paces(0.99)) == 1  # the same bucket
    assert fresh.best_width(2, paces(0.99)) > 1  # another batch size is not held back
    fresh.decoded(8, 0.3)
    assert fresh.line(8) == (0.0, 0.0) and fresh.best_width(8, paces(0.6)) == 5  # as cheap as a plain step
    # While prompts arrive, a prefill chunk comes between plain steps and none is measured: after
    # ``_HOLD`` such turns, one more step is tried, and the hold starts again.
    from smgpy.mlx.pacing import _HOLD

    arriving = StepCost()
    arriving.speculated(8, 5, 0.3)
    for _ in range(_HOLD):
        assert arriving.best_width(8, paces(0.99)) == 1
        arriving.unmeasured(8)
    assert arriving.best_width(8, paces(0.99)) > 1
    arriving.speculated(8, 5, 0.3)
    assert arriving.best_width(8, paces(0.99)) == 1
    for _ in range(_HOLD):
        arriving.unmeasured(2)  # another batch size's turns do not count
    assert arriving.best_width(8, paces(0.99)) == 1
    assert StepCost().best_width(8, []) == 1
    frozen = StepCost(learn=False)
    frozen.decoded(8, 0.3)
    frozen.speculated(8, 2, 0.6)
    assert frozen.best_width(8, paces(0.6)) == 5
    # An estimate that stopped speculation fades with plain steps, so it is measured again.
    unlucky = StepCost()
    unlucky.decoded(8, 0.1)
    unlucky.speculated(8, 2, 0.2)  # one slow step: a column as dear as a step
    assert unlucky.best_width(8, paces(0.6)) == 1
    for _ in range(200):
        unlucky.decoded(8, 0.1)
    assert unlucky.best_width(8, paces(0.6)) > 1
    # A speculative step costs a fixed part more than a plain one, plus a part per column (at 8
    # rows on this project's CPU, 0.16 and 0.39 plain steps): priced by the 2-wide steps alone,
    # a 9-wide step would cost 5.4 plain steps, not 4.3.
    both = StepCost()
    both.speculated(8, 7, 0.35)  # before the batch size's first plain step: priced once it comes
    both.decoded(8, 0.1)
    for _ in range(20):
        both.speculated(8, 2, 0.155)
    fixed, per_column = both.line(8)
    assert abs(fixed - 0.16) < 0.01 and abs(per_column - 0.39) < 0.01
    only_narrow = StepCost()
    only_narrow.decoded(8, 0.1)
    only_narrow.speculated(8, 2, 0.155)
    assert only_narrow.line(8) == (0.0, pytest.approx(0.55))
    rows = [(pace, 8) for pace, _ in paces(0.85)]
    assert both.best_width(8, rows) > only_narrow.best_width(8, rows)
    pace = Pace()
    pace.rate = 0.5
    assert pace.expected(3) == 0.5 + 0.25 + 0.125
    # Misses lower a row's rate; tokens decoded without verifying bring it back towards the
    # prior, so a row judged not worth verifying is tried again later.
    for _ in range(5):
        pace.verified(0, 4)
    low = pace.rate
    assert low < 0.2
    pace.advanced(4)
    assert pace.rate == low  # right after a verification: no drift
    for _ in range(60):
        pace.advanced(1)
    assert 0.5 < pace.rate <= 0.6


@pytest.fixture(scope="module")
def spec_engine() -> Iterator[Any]:
    """Prompt lookup on, verifying whenever a row drafts: on this CPU a wider pass costs about
    as much per token as a narrow one, so the engine's own cost model would mostly not draft."""
    engine = demo_engine(prompt_lookup_tokens=4)
    engine._sched.cost = StepCost(learn=False)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def mlx_engine() -> Iterator[Any]:
    """The reference: the same model without speculation."""
    engine = demo_engine(prompt_lookup_tokens=0)
    yield engine
    engine.shutdown()


@pytest.fixture(scope="module")
def greedy(mlx_engine: Any) -> Callable[[str], list[int]]:
    """The reference engine's greedy output for a prompt (40 tokens at most), run once per prompt:
    a run with fewer tokens, alone or batched, gives a prefix of it."""
    memo: dict[str, list[int]] = {}

    def reference(prompt: str) -> list[int]:
        if prompt not in memo:
            memo[prompt] = _run(mlx_engine, [prompt])[0][0]
        return memo[prompt]

    return reference


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
        return await collect(engine, obj)

    async def main() -> list[tuple[list[int], Any]]:
        return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts))))

    return asyncio.run(main())


def test_greedy_output_is_unchanged_and_drafts_are_accepted(greedy: Any, spec_engine: Any) -> None:
    sched = spec_engine._sched
    before = sched.drafts_accepted
    for prompt in (REPEAT, LIST, CHAT):
        got = _run(spec_engine, [prompt])[0][0]
        assert got == greedy(prompt)
    assert sched.speculative_steps > 0 and sched.drafts_accepted > before


@pytest.mark.parametrize("max_tokens", [1, 2, 3, 7, 23])
def test_length_limits_hold_exactly(greedy: Any, spec_engine: Any, max_tokens: int) -> None:
    got, meta = _run(spec_engine, [REPEAT], max_new_tokens=max_tokens)[0]
    assert got == greedy(REPEAT)[:max_tokens] and len(got) == max_tokens
    assert meta["finish_reason"] == {"type": "length"}


def test_stop_ids_end_at_the_same_token(mlx_engine: Any, greedy: Any, spec_engine: Any) -> None:
    full = greedy(REPEAT)
    stop = full[12]  # a token inside what drafts cover
    want, meta_want = _run(mlx_engine, [REPEAT], stop_token_ids=[stop])[0]
    got, meta = _run(spec_engine, [REPEAT], stop_token_ids=[stop])[0]
    assert got == want
    assert meta["finish_reason"] == meta_want["finish_reason"]


def test_concurrent_and_logprob_requests_are_unchanged(mlx_engine: Any, greedy: Any, spec_engine: Any) -> None:
    """Rows come and go, each drafting from its own context in one batch, and give what each prompt
    gives alone without speculation; a logprobs request speculates too, and reports each token's
    logprob from its own position of the verification pass: the same values (to float32 rounding
    of a wider pass) and the same top alternatives."""
    prompts = [REPEAT, LIST, CHAT]
    got = [ids for ids, _ in _run(spec_engine, prompts, max_new_tokens=30)]
    assert got == [greedy(p)[:30] for p in prompts]
    steps = spec_engine._sched.speculative_steps
    a, tops_a = _logprobs(mlx_engine, LIST)
    b, tops_b = _logprobs(spec_engine, LIST)
    assert spec_engine._sched.speculative_steps > steps
    assert len(a) == len(b) == len(tops_a) == len(tops_b) > 10
    for (lp_a, id_a, _), (lp_b, id_b, _) in zip(a, b, strict=True):
        assert id_a == id_b and abs(lp_a - lp_b) < 1e-3
    for top_a, top_b in zip(tops_a, tops_b, strict=True):
        assert len(top_a) == len(top_b) == 3 and top_a[0][1] == top_b[0][1]
        assert all(abs(x[0] - y[0]) < 1e-3 for x, y in zip(top_a, top_b, strict=True))


def _logprobs(engine: Any, text: str) -> tuple[list[Any], list[Any]]:
    """Every emitted token's logprob entry and top-3 alternatives, over all of a request's outputs."""
    obj = SimpleNamespace(
        rid=None,
        text=text,
        input_ids=None,
        sampling_params={"temperature": 0, "max_new_tokens": 40},
        return_logprob=True,
        top_logprobs_num=3,
    )
    tokens: list[Any] = []
    tops: list[Any] = []

    async def main() -> None:
        async for out in engine.generate_request(obj):
            tokens.extend(out["meta_info"].get("output_token_logprobs", []))
            tops.extend(out["meta_info"].get("output_top_logprobs", []))

    asyncio.run(main())
    return tokens, tops


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


# ----- sampled requests -----


def _chi_square(counts: list[int], probs: list[float]) -> float:
    n = sum(counts)
    return sum((c - n * p) ** 2 / (n * p) for c, p in zip(counts, probs, strict=True) if p > 0)


def test_sampled_acceptance_follows_the_target_distribution() -> None:
    """Speculative sampling's rule on a 5-token vocabulary: the first emitted token follows the
    first position's distribution, and each later one, given that the drafts before it were
    emitted, its own position's distribution, whether the draft is likely, unlikely or cut."""
    import math

    import mlx.core as mx
    from smgpy.mlx.verify import accept_sampled

    table = [
        [2.0, 1.0, 0.5, -1.0, 0.0],  # draft 0 is likely
        [0.0, 0.3, -0.5, 1.2, 0.4],  # draft 3 is the mode
        [0.1, -0.2, 0.7, 0.0, -float("inf")],  # draft 4 is cut (top-k, top-p): never accepted
        [1.0, 0.0, 0.5, 0.2, 0.3],  # the bonus position, after every draft is accepted
    ]
    drafts = [0, 3, 4]
    probs = []
    for row in table:
        z = sum(math.exp(x) for x in row)
        probs.append([math.exp(x) / z for x in row])
    scaled = mx.array(table)
    mx.random.seed(1234)
    n = 6000
    first = [0] * 5
    second = [0] * 5
    lengths = [0] * 5
    for _ in range(n):
        out = accept_sampled(scaled, drafts)
        assert 1 <= len(out) <= 4 and out[:-1] == drafts[: len(out) - 1]
        first[out[0]] += 1
        lengths[len(out)] += 1
        if len(out) > 1:
            second[out[1]] += 1
    # chi-square, 4 degrees of freedom: 18.5 is the 0.1 % tail (the seed fixes the draws)
    assert _chi_square(first, probs[0]) < 18.5, first
    assert _chi_square(second, probs[1]) < 18.5, second
    # A draft that the cut removed is never kept.
    assert lengths[4] == 0
    # The acceptance rate of the first draft is its probability.
    assert abs(first[0] / n - probs[0][0]) < 0.03


def test_sampled_acceptance_is_reproducible_from_a_key() -> None:
    import mlx.core as mx
    from smgpy.mlx.verify import accept_sampled

    scaled = mx.array([[0.0, 1.0, 2.0], [1.0, 0.0, 0.5], [0.3, 0.3, 0.3]])
    runs = [[accept_sampled(scaled, [2, 0], key=mx.random.key(s)) for s in range(40)] for _ in range(2)]
    assert runs[0] == runs[1]
    assert len({tuple(r) for r in runs[0]}) > 3


def test_sampled_requests_speculate_and_opt_outs_do_not(spec_engine: Any) -> None:
    """A sampled request without a seed runs speculative steps (a copy task at a low temperature
    accepts drafts); one sent with ``num_draft_tokens: 0`` decodes one token per step.

    An unseeded sample of the demo model rewords the list in about 2 runs of 5 (measured: 12 of
    30 runs accepted no draft), so it tries until one copies, up to 15 times (a chance of about
    1e-6 that none does)."""
    sched = spec_engine._sched
    steps, accepted = sched.speculative_steps, sched.drafts_accepted
    for _ in range(15):
        ids = _run(spec_engine, [LIST], temperature=0.2, max_new_tokens=60)[0][0]
        if len(ids) > 10 and sched.drafts_accepted > accepted:
            break
    assert sched.speculative_steps > steps and sched.drafts_accepted > accepted
    for params in ({"temperature": 0.3, "num_draft_tokens": 0}, {"num_draft_tokens": 0}):
        steps = sched.speculative_steps
        _run(spec_engine, [LIST], **params)
        assert sched.speculative_steps == steps, params


@pytest.mark.parametrize(
    "params",
    [
        {"temperature": 0.3, "seed": 7},
        {"temperature": 0.8, "top_p": 0.9, "seed": 11},
        {"temperature": 0, "repetition_penalty": 1.02},
        {"temperature": 0, "frequency_penalty": 0.4, "presence_penalty": 0.2},
        {"temperature": 0, "logit_bias": {"29": 2.0}, "min_new_tokens": 40},
        {"temperature": 0.2, "seed": 3, "frequency_penalty": 0.1},
    ],
)
def test_seeded_and_penalised_requests_speculate_and_give_the_same_tokens(
    mlx_engine: Any, spec_engine: Any, params: dict[str, Any]
) -> None:
    """Seeded requests draw each position with its own key (the same draw a decode step makes
    there), and logits processors apply at each drafted position over the context up to it: with
    speculation the output is token-identical to the engine's without it."""
    sched = spec_engine._sched
    steps = sched.speculative_steps
    want = _run(mlx_engine, [LIST], max_new_tokens=50, **params)[0][0]
    got = _run(spec_engine, [LIST], max_new_tokens=50, **params)[0][0]
    assert got == want
    assert sched.speculative_steps > steps


def test_num_draft_tokens_caps_the_draft(spec_engine: Any) -> None:
    sched = spec_engine._sched
    steps, proposed = sched.speculative_steps, sched.drafts_proposed
    _run(spec_engine, [LIST], num_draft_tokens=1)
    assert sched.speculative_steps > steps
    assert sched.drafts_proposed - proposed == sched.speculative_steps - steps  # one draft per step


# ----- structured output -----

RECORD = (
    '<|im_start|>user\nCopy this JSON exactly: {"name": "Alice Smith", "city": "Springfield", '
    '"items": ["apples", "pears", "plums", "figs"]}<|im_end|>\n<|im_start|>assistant\n'
)
RECORD_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "city": {"type": "string"},
        "items": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "city", "items"],
}


def test_constrained_output_is_unchanged_and_drafts_follow_the_grammar(mlx_engine: Any, spec_engine: Any) -> None:
    """A structured-output request speculates: each drafted position is masked by the constraint
    (a copy of its matcher walks the drafts), and a draft the constraint forbids ends the draft.
    Greedy output is token-identical, and valid."""
    import json

    sched = spec_engine._sched
    steps, accepted = sched.speculative_steps, sched.drafts_accepted
    params = {"json_schema": json.dumps(RECORD_SCHEMA), "max_new_tokens": 60}
    want = _run(mlx_engine, [RECORD], **params)[0]
    got = _run(spec_engine, [RECORD], **params)[0]
    assert got[0] == want[0]
    assert got[1]["finish_reason"] == want[1]["finish_reason"]
    assert sched.speculative_steps > steps and sched.drafts_accepted > accepted
    assert got[1]["finish_reason"]["type"] == "stop"
    record = json.loads(spec_engine.tokenizer.decode(got[0]).removesuffix("<|im_end|>"))
    assert record == {"name": "Alice Smith", "city": "Springfield", "items": ["apples", "pears", "plums", "figs"]}
