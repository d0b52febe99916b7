"""Per-request samplers and logits processors, built on mlx-lm's sampling functions.

The engine's decode step (``smgpy.mlx.batching``) calls one sampler and one list of logits
processors per row, so each request brings its own: that is what makes ``seed`` reproducible
inside a batch (the request's ``n``-th token is drawn with a key made from its seed and ``n``,
whatever else runs beside it, and whether it was drawn in a decode step or while verifying drafts).

Penalties follow the OpenAI / vLLM meaning: ``frequency_penalty`` and ``presence_penalty`` count
the generated tokens only; ``repetition_penalty`` (multiplicative) looks at prompt and output.
Structured output is one more processor, the mask of ``smgpy.mlx.structured``, kept off the
critical path: it queues the step's forward pass before it waits for the previous token, so the
mask (computed in Rust, GIL released) overlaps with the model instead of idling it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np

from smgpy._native import GrammarError, GrammarMatcher, check_sampling_params
from smgpy.engine import EngineRequestError
from smgpy.mlx.mlx_lm_api import apply_min_p, apply_top_k, apply_top_p, greedy_sampler, make_repetition_penalty

__all__ = ["GrammarMask", "SamplingParams", "TokenSampler", "make_logits_processors", "make_sampler"]

Sampler = Callable[[mx.array], mx.array]
LogitsProcessor = Callable[[mx.array, mx.array], mx.array]


@dataclass
class SamplingParams:
    """The sampling keys of a request, validated once when it arrives."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    logit_bias: dict[int, float] | None = None
    seed: int | None = None
    max_new_tokens: int | None = None
    min_new_tokens: int = 0
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    n: int = 1
    num_draft_tokens: int | None = None  # speculation's draft length cap; 0: none for this request

    @classmethod
    def from_dict(cls, d: dict[str, Any], vocab_size: int) -> SamplingParams:
        """Read and check the request's keys; bad values raise ``EngineRequestError`` (HTTP 400).

        Ranges are checked by the server's own rules (``_native.check_sampling_params``), so a
        request sent to the engine directly is held to exactly what the HTTP routes enforce; only
        what needs the model (token ids inside its vocabulary) is checked here."""
        try:
            check_sampling_params(d)
            return cls._from_dict(d, vocab_size)
        except (TypeError, ValueError, OverflowError) as e:
            raise EngineRequestError(f"invalid sampling parameters: {e}") from e

    @classmethod
    def _from_dict(cls, d: dict[str, Any], vocab_size: int) -> SamplingParams:
        def num(key: str, default: float) -> float:
            v = d.get(key)
            return default if v is None else float(v)

        p = cls(
            temperature=num("temperature", 1.0),
            top_p=num("top_p", 1.0),
            top_k=int(num("top_k", 0)),
            min_p=num("min_p", 0.0),
            repetition_penalty=num("repetition_penalty", 1.0),
            frequency_penalty=num("frequency_penalty", 0.0),
            presence_penalty=num("presence_penalty", 0.0),
            # Any integer seeds (clients send -1, OpenAI allows int64); MLX keys take 64 unsigned bits.
            seed=None if d.get("seed") is None else int(d["seed"]) % (1 << 64),
            max_new_tokens=None if d.get("max_new_tokens") is None else int(d["max_new_tokens"]),
            min_new_tokens=int(d.get("min_new_tokens") or 0),
            stop_token_ids=tuple(int(t) for t in d.get("stop_token_ids") or ()),
            ignore_eos=bool(d.get("ignore_eos") or False),
            n=int(d.get("n") or 1),
            num_draft_tokens=None if d.get("num_draft_tokens") is None else int(d["num_draft_tokens"]),
        )
        bias = d.get("logit_bias")
        if bias:
            parsed = {int(k): float(v) for k, v in bias.items()}
            bad = [t for t in parsed if not 0 <= t < vocab_size]
            if bad:
                raise EngineRequestError(f"logit_bias token ids {bad} are outside the vocabulary (0..{vocab_size - 1})")
            p.logit_bias = parsed
        for t in p.stop_token_ids:
            if not 0 <= t < vocab_size:
                raise EngineRequestError(f"stop_token_ids entry {t} is outside the vocabulary (0..{vocab_size - 1})")
        return p

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.top_k == 1


class TokenSampler:
    """Samples a token per row of logits at the request's temperature, after its top-k, top-p and
    min-p cuts.

    :meth:`distribution` is the cut and scaled distribution itself (unnormalised log
    probabilities), which speculative decoding needs to accept or reject drafted tokens by the
    probability the model gives them (:mod:`smgpy.mlx.verify`)."""

    def __init__(self, params: SamplingParams, sample_index: int = 0) -> None:
        self.temperature = params.temperature
        self.top_p, self.top_k, self.min_p = params.top_p, params.top_k, params.min_p
        self._stream: int | None = None
        self.drawn = 0  # tokens drawn so far (a seeded stream's position)
        if params.seed is not None:
            # Sample i of an n>1 request gets its own stream, still fixed by the seed.
            self._stream = _mix(params.seed, sample_index)

    @property
    def seeded(self) -> bool:
        """True when the request fixed its random stream (``seed``): token ``n`` is drawn with
        the key of (seed, sample, ``n``), so a verification can draw the tokens of several
        positions exactly as decoding them one by one would."""
        return self._stream is not None

    def _key_at(self, position: int) -> mx.array:
        assert self._stream is not None
        return mx.random.key(_mix(self._stream, position))

    def draw(self, scaled: mx.array) -> mx.array:
        """For a seeded stream: one token per row of ``scaled`` (the :meth:`distribution` of the
        next positions), each with its position's key, without moving the stream (lazy);
        :meth:`advance` moves it by the tokens kept."""
        return mx.concatenate(
            [mx.random.categorical(scaled[i : i + 1], key=self._key_at(self.drawn + i)) for i in range(scaled.shape[0])]
        )

    def advance(self, tokens: int) -> None:
        self.drawn += tokens

    def distribution(self, logits: mx.array) -> mx.array:
        """The distribution sampled from, as log probabilities up to a constant per row."""
        # The batch hands over logits, not log probabilities. Bring each row's largest to 0, as
        # in log probabilities: top-p sums exp() of the row (no overflow, no all-zero mass), and
        # a small temperature cannot scale a large fp16 logit to +inf.
        logprobs = logits - mx.max(logits, axis=-1, keepdims=True)
        if self.top_k > 0:
            logprobs = apply_top_k(logprobs, self.top_k)
        if 0 < self.top_p < 1:
            logprobs = apply_top_p(logprobs, self.top_p)
        if self.min_p > 0:
            logprobs = apply_min_p(logprobs, self.min_p)
        return logprobs * (1 / self.temperature)

    def __call__(self, logits: mx.array) -> mx.array:
        scaled = self.distribution(logits)
        if self._stream is None:
            return mx.random.categorical(scaled)
        key = self._key_at(self.drawn)
        self.drawn += 1
        return mx.random.categorical(scaled, key=key)


def _mix(a: int, b: int) -> int:
    """A 64-bit integer from two (splitmix64's finalizer over ``a`` and ``b``): distinct seeds,
    samples and positions give unrelated keys."""
    x = (a * 0x9E3779B97F4A7C15 + b + 0x632BE59BD9B4E019) % (1 << 64)
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) % (1 << 64)
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) % (1 << 64)
    return x ^ (x >> 31)


def make_sampler(params: SamplingParams, sample_index: int = 0) -> Sampler:
    """A sampler for one sequence: mlx-lm's ``greedy_sampler`` for greedy requests (shared, so
    that a batch of greedy rows samples in one call; the decode step samples the whole batch at
    once when every row holds the same sampler object, and per row otherwise), a
    :class:`TokenSampler` for the others.

    It takes a row of logits that may be off the log-probabilities by a constant (the engine
    normalises only rows that report logprobs) and picks the same token either way.
    """
    if params.greedy:
        return greedy_sampler
    return TokenSampler(params, sample_index)


def _openai_penalties(frequency: float, presence: float, prompt_len: int) -> LogitsProcessor:
    """Subtract ``frequency * count + presence * (count > 0)`` over the generated tokens."""

    def processor(tokens: mx.array, logits: mx.array) -> mx.array:
        generated = tokens[prompt_len:]
        if generated.size == 0:
            return logits
        counts = mx.zeros((logits.shape[-1],), dtype=logits.dtype).at[generated].add(1)
        return logits - frequency * counts - presence * (counts > 0).astype(logits.dtype)

    return processor


def _ban_until(token_ids: Sequence[int], min_new: int, prompt_len: int) -> LogitsProcessor:
    """Forbid end tokens until ``min_new`` tokens are generated (``min_new_tokens``)."""
    ids = mx.array(list(token_ids))

    def processor(tokens: mx.array, logits: mx.array) -> mx.array:
        # The context holds the prompt plus the tokens generated so far, minus the newest input.
        if tokens.size - prompt_len >= min_new:
            return logits
        return logits.at[:, ids].add(-float("inf"))

    return processor


class GrammarMask:
    """Holds the output to its constraint (structured output): masks every token that cannot
    continue it. The first call masks the first token; each later call first accepts the token
    sampled at the step before, which is the newest token of the context.

    mlx-lm builds a step's graph while the previous step still runs. Reading the previous
    token waits for that step; this processor first queues the current step's forward pass
    (``mx.async_eval(logits)``), so the model keeps computing through the wait and while the
    mask is computed (in Rust, without the GIL). Only this row's sampling waits for the mask;
    the other rows' forward pass does not.

    Speculative decoding masks drafted positions with :meth:`draft_masks` (a copy of the matcher
    walks through the drafts) and hands the kept tokens to :meth:`kept`."""

    def __init__(self, matcher: GrammarMatcher) -> None:
        self.matcher = matcher
        self.started = False  # the first mask was given (the first output token's)
        self.off = False  # the constraint no longer applies (complete without an end token)
        # Bit positions within a 32-bit word of the bitmask (data, not a graph node: this runs
        # on the MLX thread, whose stream the processor uses).
        self._shifts = mx.array(np.arange(32, dtype=np.uint32))

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        if self.off:
            return logits
        token: int | None = None
        if self.started:
            mx.async_eval(logits)  # type: ignore[no-untyped-call]
            token = int(tokens[-1].item())  # type: ignore[arg-type]  # an int array
        self.started = True
        try:
            bits = self.matcher.step(token)
        except GrammarError:
            # Not reachable through the mask; never leave a row with no token to sample.
            self.off = True
            return logits
        if bits is None:
            # Complete, and no end token may be sampled (``ignore_eos``): stop constraining.
            self.off = True
            return logits
        return mx.where(self.allowed([bits], logits.shape[-1]), logits, -float("inf"))

    def allowed(self, masks: list[bytes], size: int) -> mx.array:
        """Bitmasks as boolean rows of ``size`` logits, unpacked in the graph (lazily)."""
        words = mx.array(np.frombuffer(b"".join(masks), dtype=np.uint32).reshape(len(masks), -1))
        allowed = ((words[:, :, None] >> self._shifts) & 1).reshape(len(masks), -1)[:, :size]
        return allowed.astype(mx.bool_)

    def draft_masks(self, pending: int, drafts: list[int]) -> tuple[list[int], list[bytes] | None]:
        """The drafts the constraint allows (a prefix of ``drafts``) and the bitmasks of the
        positions a verification of ``pending`` followed by them scores (:meth:`allowed` unpacks
        them): one per kept draft plus one. ``None`` when the constraint gives no mask after
        ``pending``."""
        walk = self.matcher.copy()
        try:
            bits = walk.step(pending)
        except GrammarError:
            return [], None
        if bits is None:
            return [], None
        masks = [bits]
        kept: list[int] = []
        for d in drafts:
            word = int.from_bytes(bits[4 * (d >> 5) : 4 * (d >> 5) + 4], "little") if 4 * (d >> 5) < len(bits) else 0
            if not (word >> (d & 31)) & 1:
                break
            try:
                bits = walk.step(d)
            except GrammarError:
                break
            if bits is None:
                break
            kept.append(d)
            masks.append(bits)
        return kept, masks

    def kept(self, tokens: list[int]) -> None:
        """The tokens a verification fed and kept (its pending token and accepted drafts): the
        matcher advances past them, as the next steps' calls would have made it."""
        for t in tokens:
            self.matcher.accept(t)


def make_logits_processors(
    params: SamplingParams, prompt_len: int, end_ids: Sequence[int], matcher: GrammarMatcher | None = None
) -> list[LogitsProcessor]:
    """The processors a request needs; empty for plain requests, which keeps the batch fast."""
    out: list[LogitsProcessor] = []
    if params.logit_bias:
        idx = mx.array(list(params.logit_bias.keys()))
        val = mx.array(list(params.logit_bias.values()))

        def bias(_: mx.array, logits: mx.array) -> mx.array:
            return logits.at[:, idx].add(val)

        out.append(bias)
    if params.repetition_penalty != 1.0:
        out.append(make_repetition_penalty(params.repetition_penalty, context_size=1 << 30))
    if params.frequency_penalty or params.presence_penalty:
        out.append(_openai_penalties(params.frequency_penalty, params.presence_penalty, prompt_len))
    if params.min_new_tokens > 0 and end_ids:
        out.append(_ban_until(end_ids, params.min_new_tokens, prompt_len))
    if matcher is not None:
        # Last, so that no later processor can lift a masked token back.
        out.append(GrammarMask(matcher))
    return out
