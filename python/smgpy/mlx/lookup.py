"""Prompt lookup: draft tokens for speculative decoding from the sequence's own context.

Code edits, answers quoting a document and tool calls that echo their arguments repeat long runs of
tokens the prompt (or the answer so far) already holds. When the last tokens of the context
occurred before, the tokens that followed them then are a likely continuation now: up to ``k`` of
them are drafted, and the engine verifies them in one forward pass (:mod:`smgpy.mlx.batching`),
keeping them by the rule that leaves the output's distribution unchanged (:mod:`smgpy.mlx.verify`).

Drafting is a dictionary lookup: every bigram of the context maps to the positions after which it
occurred, kept as tokens are added, and the candidate whose match with the context's tail is the
longest (up to ``max_ngram`` tokens) and most recent wins. How much to draft, and when to rest after
misses, is :class:`smgpy.mlx.pacing.Pace`'s: free chat, which rarely repeats, runs at the speed of
plain decoding.
"""

from __future__ import annotations

from smgpy.mlx.pacing import Pace

__all__ = ["Lookup"]

_CANDIDATES = 8  # most recent occurrences of a bigram compared


class Lookup:
    """The draft source of one sequence: its context so far, indexed by bigram."""

    def __init__(self, context: list[int], max_ngram: int = 4) -> None:
        self.context: list[int] = []
        self._after: dict[tuple[int, int], list[int]] = {}
        self.max_ngram = max(2, max_ngram)
        self.pace = Pace()
        self.extend(context)

    def extend(self, tokens: list[int]) -> None:
        """Append tokens to the context (the prompt, then each emitted token)."""
        ctx = self.context
        for t in tokens:
            ctx.append(t)
            if len(ctx) >= 2:
                self._after.setdefault((ctx[-2], ctx[-1]), []).append(len(ctx))
        self.pace.advanced(len(tokens))

    @property
    def resting(self) -> bool:
        """Whether the lookup sits out the next token (after misses)."""
        return self.pace.resting

    def propose(self, k: int) -> list[int]:
        """Up to ``k`` draft tokens continuing the context, or none (no match, or resting)."""
        ctx = self.context
        if k <= 0 or self.pace.resting or len(ctx) < 3:
            return []
        ends = self._after.get((ctx[-2], ctx[-1]))
        if not ends or len(ends) < 2:
            self.pace.miss()  # the tail's own bigram is the only occurrence
            return []
        n = len(ctx)
        best, best_len = -1, 0
        for end in reversed(ends[-_CANDIDATES - 1 : -1]):  # earlier occurrences, latest first
            if end >= n:
                continue
            match = 2
            while match < self.max_ngram and end - match - 1 >= 0 and ctx[end - match - 1] == ctx[n - match - 1]:
                match += 1
            if match > best_len:
                best, best_len = end, match
                if match >= self.max_ngram:
                    break
        if best < 0:
            self.pace.miss()
            return []
        draft = ctx[best : best + self.pace.size(k)]
        for i, t in enumerate(draft):
            if t < 0:  # a position that is no token (an image's, in a vision-language prompt)
                return draft[:i]
        return draft

    def verified(self, accepted: int, drafted: int | None = None) -> None:
        """Record a verification that kept ``accepted`` of ``drafted`` drafts."""
        self.pace.verified(accepted, drafted)
