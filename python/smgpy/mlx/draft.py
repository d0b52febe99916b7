"""Draft-model speculation: a small model with the target's tokenizer proposes the next tokens.

``smgpy serve --draft-model DIR --num-draft-tokens K`` (``mlx_lm.server``'s flags). While a row runs
alone, the draft model proposes ``K`` tokens one at a time from the row's context, and the engine
verifies them with the target in one forward pass (:mod:`smgpy.mlx.batching`), keeping them by the
rule that leaves the output's distribution unchanged (:mod:`smgpy.mlx.verify`). The draft proposes
its argmax: a proposal that is a function of the context is a one-hot draft distribution, for which
the acceptance rule is exact for greedy and sampled requests alike.

Each sequence that speculates keeps its own draft KV cache (mlx-lm's, so the draft model must have
plain attention caches, which can be trimmed back). The cache follows the sequence lazily: before
drafting, whatever the sequence emitted since (its prompt, the first time, and the tokens of steps
it decoded beside other rows) is fed in one pass; after a verification, the drafts the target
rejected are trimmed off. The cache lives as long as the sequence. A draft that the model keeps
rejecting is paced as prompt lookup is (:class:`smgpy.mlx.pacing.Pace`): it rests, so a poor draft
model costs little.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

from smgpy.mlx import mlx_lm_api
from smgpy.mlx.pacing import Pace

__all__ = ["DraftModel", "DraftState"]

_CATCH_UP_CHUNK = 512  # tokens per forward pass when the draft cache catches up with a context


class DraftModel:
    """The draft model, loaded once and shared by the sequences that speculate."""

    def __init__(self, model: Any, tokenizer: Any, target_tokenizer: Any, path: str = "the draft model") -> None:
        draft_vocab, target_vocab = _vocab_size(tokenizer), _vocab_size(target_tokenizer)
        if draft_vocab != target_vocab:
            raise ValueError(
                f"{path} has a vocabulary of {draft_vocab} tokens and the model {target_vocab}: a draft model "
                "must share the model's tokenizer (e.g. a smaller model of the same family)"
            )
        if not mlx_lm_api.can_trim_prompt_cache(mlx_lm_api.make_prompt_cache(model)):
            raise ValueError(
                f"{path} keeps a cache that cannot be trimmed back (sliding windows or recurrent state): "
                "a draft model needs plain attention"
            )
        self.model = model

    def state(self, context: list[int]) -> DraftState:
        """A new sequence's draft state, holding its context so far (nothing run yet)."""
        return DraftState(self.model, context)


def _vocab_size(tokenizer: Any) -> int | None:
    """Tokens in a tokenizer's vocabulary, added tokens included (mlx-lm's wrapper or HF's)."""
    get_vocab = getattr(tokenizer, "get_vocab", None)
    if callable(get_vocab):
        return len(get_vocab())
    size = getattr(tokenizer, "vocab_size", None)
    return size if isinstance(size, int) else None


class DraftState:
    """One sequence's draft: its context and a draft KV cache holding a prefix of it."""

    def __init__(self, model: Any, context: list[int]) -> None:
        self.model = model
        self.context = list(context)
        self.cache = mlx_lm_api.make_prompt_cache(model)
        self.fed = 0  # tokens of ``context`` in the cache; always short of the whole context
        self._fed_drafts = 0  # drafts fed after the context by the last ``propose``
        self.pace = Pace()

    @property
    def resting(self) -> bool:
        """Whether the draft sits out the next token (after drafts the model rejected)."""
        return self.pace.resting

    def extend(self, tokens: list[int]) -> None:
        """Append emitted tokens to the context."""
        self.context.extend(tokens)
        self.pace.advanced(len(tokens))

    def propose(self, k: int) -> list[int]:
        """Up to ``k`` tokens (as many as pay lately), the draft model's argmax one after another
        from the end of the context; none while resting."""
        if k <= 0 or self.pace.resting or self.fed >= len(self.context):
            return []
        k = self.pace.size(k)
        pending = self.context[self.fed :]
        for start in range(0, len(pending) - 1, _CATCH_UP_CHUNK):
            # All but the last pending token: only the cache is wanted.
            chunk = pending[start : min(start + _CATCH_UP_CHUNK, len(pending) - 1)]
            self.model(mx.array([chunk], dtype=mx.uint32), cache=self.cache)
            mx.eval([c.state for c in self.cache])
        self.fed = len(self.context)
        token = mx.array([[pending[-1]]], dtype=mx.uint32)
        drafts: list[int] = []
        for _ in range(k):
            logits = self.model(token, cache=self.cache)[:, -1, :]
            token = mx.argmax(logits, axis=-1, keepdims=True).astype(mx.uint32)
            drafts.append(int(token.item()))  # type: ignore[arg-type]
        # The last draft was not fed: the cache holds the context and drafts[:-1].
        self._fed_drafts = k - 1
        return drafts

    def verified(self, accepted: int, drafted: int | None = None) -> None:
        """Keep the accepted drafts in the cache and trim the rejected ones."""
        keep = min(accepted, self._fed_drafts)
        rejected = self._fed_drafts - keep
        if rejected:
            mlx_lm_api.trim_prompt_cache(self.cache, rejected)
        self.fed += keep
        self._fed_drafts = 0
        self.pace.verified(accepted, drafted)
