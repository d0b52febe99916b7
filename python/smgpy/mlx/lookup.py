"""Prompt lookup: draft tokens for speculative decoding from the sequence's own context.

Code edits, answers quoting a document and tool calls that echo their arguments repeat long runs of
tokens the prompt (or the answer so far) already holds. When the last tokens of the context
occurred before, the tokens that followed them then are a likely continuation now: up to ``k`` of
them are drafted, and the engine verifies them in one forward pass (:mod:`smgpy.mlx.batching`),
keeping the ones the model itself would have chosen, so the output is unchanged.

Drafting is a dictionary lookup: every bigram of the context maps to the positions after which it
occurred, kept as tokens are added, and the candidate whose match with the context's tail is the
longest (up to ``max_ngram`` tokens) and most recent wins. A draft that the model rejects costs a
wider forward pass for nothing, and looking for one costs the engine its pipelining (the step's
last token must be read before the draft can be made), so after a step that accepted no draft
token, or a lookup that found none, the lookup rests for a number of tokens that doubles with each
miss in a row (up to 32), and is back to 1 after a hit: free chat, which rarely repeats, runs at
the speed of plain decoding. Draft length follows what was accepted lately (up to ``k``): a long
draft whose tail is always rejected only widens the forward pass.
"""

from __future__ import annotations

__all__ = ["Lookup"]

_MAX_REST = 32
_CANDIDATES = 8  # most recent occurrences of a bigram compared


class Lookup:
    """The draft source of one sequence: its context so far, indexed by bigram."""

    def __init__(self, context: list[int], max_ngram: int = 4) -> None:
        self.context: list[int] = []
        self._after: dict[tuple[int, int], list[int]] = {}
        self.max_ngram = max(2, max_ngram)
        self._rest = 0  # tokens to go before drafting again
        self._backoff = 1
        self._recent = 2.0  # accepted drafts per verification, smoothed
        self.proposed = 0
        self.accepted = 0
        self.extend(context)

    def extend(self, tokens: list[int]) -> None:
        """Append tokens to the context (the prompt, then each emitted token)."""
        ctx = self.context
        for t in tokens:
            ctx.append(t)
            if len(ctx) >= 2:
                self._after.setdefault((ctx[-2], ctx[-1]), []).append(len(ctx))
        if self._rest:
            self._rest = max(0, self._rest - len(tokens))

    @property
    def resting(self) -> bool:
        """Whether the lookup sits out the next token (after misses)."""
        return self._rest > 0

    def _miss(self) -> None:
        self._rest = self._backoff
        self._backoff = min(_MAX_REST, self._backoff * 2)

    def propose(self, k: int) -> list[int]:
        """Up to ``k`` draft tokens continuing the context, or none (no match, or resting)."""
        ctx = self.context
        if k <= 0 or self._rest or len(ctx) < 3:
            return []
        ends = self._after.get((ctx[-2], ctx[-1]))
        if not ends or len(ends) < 2:
            self._miss()  # the tail's own bigram is the only occurrence
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
            self._miss()
            return []
        size = max(1, min(k, round(self._recent * 1.5) + 1))
        return ctx[best : best + size]

    def verified(self, proposed: int, accepted: int) -> None:
        """Record a verification: ``accepted`` of ``proposed`` drafts matched the model's choice."""
        self.proposed += proposed
        self.accepted += accepted
        self._recent = 0.7 * self._recent + 0.3 * accepted
        if accepted:
            self._backoff = 1
        else:
            self._miss()
