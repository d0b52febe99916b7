"""Accepting drafted tokens in speculative decoding, by the rule that keeps the output's
distribution exactly the model's.

The engine feeds a row its pending token followed by ``k`` drafted tokens in one forward pass,
which gives the model's distribution at each of the ``k + 1`` positions. For a greedy request a
draft is kept while it is the model's own argmax, so the output is token-identical to decoding
one token at a time. For a sampled request the standard rule of speculative sampling (Leviathan et
al., Chen et al., 2023) applies, here with a draft source that proposes one token with certainty
(prompt lookup: ``q`` is one-hot): draft ``d`` at position ``i`` is accepted with probability
``min(1, p(d) / q(d)) = p(d)``; at the first rejection the emitted token is sampled from
``max(0, p - q)`` renormalised, which is ``p`` with ``d`` taken out; when every draft is accepted
one more token is sampled from the last position's ``p``. Each emitted token then follows ``p``
given the tokens before it, as plain sampling would.

The whole decision is one small graph (uniforms, a cumulative product, ``k + 1`` categorical
draws), so the engine reads back two integers per verification; the rows of a batch are built first and
evaluated together (``*_choice``), then read (``kept_*``).
"""

from __future__ import annotations

import mlx.core as mx

__all__ = ["accept_greedy", "accept_sampled", "greedy_choice", "kept_greedy", "kept_sampled", "sampled_choice"]


def greedy_choice(logits: mx.array) -> mx.array:
    """The model's argmax at each of the ``len(drafts) + 1`` positions of one row (lazy: a batch
    of rows is evaluated at once, then :func:`kept_greedy` reads each)."""
    return mx.argmax(logits, axis=-1)


def kept_greedy(chosen: list[int], drafts: list[int]) -> list[int]:
    """The tokens to emit: the drafts the model's argmax agrees with, then its own next token."""
    accepted = 0
    while accepted < len(drafts) and drafts[accepted] == chosen[accepted]:
        accepted += 1
    return chosen[: accepted + 1]


def accept_greedy(logits: mx.array, drafts: list[int]) -> list[int]:
    """:func:`greedy_choice` and :func:`kept_greedy` for one row."""
    chosen: list[int] = greedy_choice(logits).tolist()  # type: ignore[assignment]
    return kept_greedy(chosen, drafts)


def sampled_choice(scaled: mx.array, drafts: list[int], key: mx.array | None = None) -> mx.array:
    """The rule above for one sampled row, lazy: ``[accepted, token]``, how many drafts are kept
    and the token sampled after them (from the residual at the first rejection, else from the
    last position); :func:`kept_sampled` reads it.

    ``scaled`` is the sampler's distribution at the ``len(drafts) + 1`` positions of one row, as
    log probabilities up to a constant per row (temperature and cuts applied; see
    :meth:`smgpy.mlx.sampling.TokenSampler.distribution`)."""
    k = len(drafts)
    logp = scaled - mx.logsumexp(scaled, axis=-1, keepdims=True)
    d = mx.array(drafts, dtype=mx.int32)
    if key is None:
        u = mx.random.uniform(shape=(k,))
        noise_key = None
    else:
        u_key, noise_key = mx.random.split(key)
        u = mx.random.uniform(shape=(k,), key=u_key)
    p_draft = mx.exp(mx.take_along_axis(logp[:k], d[:, None], axis=-1)[:, 0])
    accepted = mx.sum(mx.cumprod((u < p_draft).astype(mx.int32)))
    # Row i < k: p without draft i (sampled only when draft i is the first rejected); row k: p.
    drafted = mx.arange(logp.shape[-1])[None, :] == d[:, None]
    residual = mx.concatenate([mx.where(drafted, -mx.inf, logp[:k]), logp[k:]], axis=0)
    tokens = mx.random.categorical(residual, key=noise_key)
    return mx.stack([accepted, mx.take(tokens, accepted).astype(mx.int32)])


def kept_sampled(picked: list[int], drafts: list[int]) -> list[int]:
    """The tokens to emit, from :func:`sampled_choice`'s result."""
    n, token = picked
    return [*drafts[:n], token]


def accept_sampled(scaled: mx.array, drafts: list[int], key: mx.array | None = None) -> list[int]:
    """:func:`sampled_choice` and :func:`kept_sampled` for one row."""
    picked: list[int] = sampled_choice(scaled, drafts, key).tolist()  # type: ignore[assignment]
    return kept_sampled(picked, drafts)
