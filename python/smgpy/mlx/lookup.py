"""Prompt lookup: draft tokens for speculative decoding from the sequence's own context.

Code edits, answers quoting a document and tool calls that echo their arguments repeat long runs of
tokens the prompt (or the answer so far) already holds. When the last tokens of the context
occurred before, the tokens that followed them then are a likely continuation now: up to ``k`` of
them are drafted, and the engine verifies them in one forward pass (:mod:`smgpy.mlx.batching`),
keeping them by the rule that leaves the output's distribution unchanged (:mod:`smgpy.mlx.verify`).

Drafting is a dictionary lookup: every bigram of the context maps to the positions after which it
occurred, kept as tokens are added, and the candidate whose match with the context's tail is the
longest (up to ``max_ngram`` tokens) wins. Among equally long matches, the text the last draft was
copied from comes first: where the output has kept to it since (or rejoined it after an edit, a
renamed word), it goes on there. Repetitive text, such as code whose lines differ only in a
number, has many equal matches, and the most recent one is usually another line. Otherwise the
most recent match wins.

Up to ``k`` tokens that followed the match are drafted: a longer draft costs nothing to make, and
how many of them a step verifies is :class:`smgpy.mlx.pacing.StepCost`'s choice, from what a wider
pass costs and how often this sequence's drafts were kept. When to rest after misses is
:class:`smgpy.mlx.pacing.Pace`'s: free chat, which rarely repeats, runs at the speed of plain
decoding. While no step verifies the sequence, its drafts are checked against the output anyway
(:meth:`Lookup.extend`), so how often they are kept follows the text, not the last verification.

Measured against an exact editor (``benches/lookup_drafts.py``: the answer given, each draft checked
against it; the passes are what speculation saves where a wider pass costs about what one token
does), ``k`` = 8, before the rule of the copied text and after: the 40 alike lines of
``benches/speculative.py`` with one call renamed (1,146 tokens), 245 -> 171 passes; a 54-line
function with one parameter renamed (482 tokens), 67 -> 63 (its 60-line file now: 563 tokens in 72).
"""

from __future__ import annotations

from bisect import bisect_left

from smgpy.mlx.pacing import Pace

__all__ = ["Lookup"]

_CANDIDATES = 8  # most recent occurrences of a bigram compared
_NEAR = 8  # how far from where the copied text goes on a candidate still counts as continuing it
_CHECK_AFTER = 8  # tokens without a verification before drafts are checked against the output


class Lookup:
    """The draft source of one sequence: its context so far, indexed by bigram."""

    def __init__(self, context: list[int], max_ngram: int = 4, k: int = 8) -> None:
        self.context: list[int] = []
        self._after: dict[tuple[int, int], list[int]] = {}
        self.max_ngram = max(2, max_ngram)
        self.pace = Pace(free_drafts=True)
        self._source = -1  # the position the last draft was copied from ...
        self._source_at = 0  # ... when the context was this long
        self._k = k  # the last draft's limit: a check drafts as many
        self._check: list[int] = []  # a draft no step verified, checked against the tokens that come
        self._checked = 0  # ... how many of it agreed so far
        self._check_wait = 0  # tokens before the next check, after one that agreed on nothing
        self.extend(context)

    def extend(self, tokens: list[int]) -> None:
        """Append tokens to the context (the prompt, then each emitted token).

        While no step verifies this sequence's drafts (the engine judged them not worth a wider
        pass), a draft is made anyway and checked against the tokens that come, so the pace's rate
        follows the text: a row whose answer turns to copying its prompt is verified again, where
        a rate left at what it was (or drifting to a prior) would keep it out. A check that agreed
        on something is followed by the next at once; one that agreed on nothing waits
        ``_CHECK_AFTER`` tokens, so free text costs a lookup per few tokens."""
        ctx = self.context
        for t in tokens:
            ctx.append(t)
            if len(ctx) >= 2:
                self._after.setdefault((ctx[-2], ctx[-1]), []).append(len(ctx))
            if self._check:
                self._checking(t)
        self.pace.advanced(len(tokens))
        if self._check_wait:
            self._check_wait = max(0, self._check_wait - len(tokens))
        elif not self._check and self.pace.unverified >= _CHECK_AFTER:
            self._check = self._draft(self._k)
            if not self._check:
                self._check_wait = _CHECK_AFTER

    def _checking(self, token: int) -> None:
        """The next token after a checked draft's agreed part: the check goes on, or ends."""
        if token == self._check[self._checked]:
            self._checked += 1
            if self._checked < len(self._check):
                return
        self.pace.measured(self._checked, len(self._check))
        if not self._checked:
            self._check_wait = _CHECK_AFTER
        self._check, self._checked = [], 0

    @property
    def resting(self) -> bool:
        """Whether the lookup sits out the next token (after misses)."""
        return self.pace.resting

    def propose(self, k: int) -> list[int]:
        """Up to ``k`` draft tokens continuing the context, or none (no match, or resting)."""
        self._check, self._checked = [], 0  # a draft to verify replaces a check
        if k <= 0 or self.pace.resting:
            return []
        self._k = k
        draft = self._draft(k)
        if not draft:
            self.pace.miss()
        return draft

    def _draft(self, k: int) -> list[int]:
        """Up to ``k`` tokens that followed the best match of the context's tail (see the module
        doc), or none."""
        ctx = self.context
        if len(ctx) < 3:
            return []
        ends = self._after.get((ctx[-2], ctx[-1]))
        if not ends or len(ends) < 2:
            return []  # the tail's own bigram is the only occurrence
        n = len(ctx)
        candidates = ends[-_CANDIDATES - 1 : -1]  # earlier occurrences, the latest
        expect = -1
        if self._source >= 0:
            # Where the copied text goes on if the output kept to it; ``ends`` is in order.
            expect = self._source + (n - self._source_at)
            i = bisect_left(ends, expect - _NEAR)
            candidates = [*candidates, *(e for e in ends[i : i + 2 * _NEAR + 1] if e <= expect + _NEAR)]
        best, best_key = -1, (0, 0, 0)
        for end in candidates:
            if end >= n:
                continue
            match = 2
            while match < self.max_ngram and end - match - 1 >= 0 and ctx[end - match - 1] == ctx[n - match - 1]:
                match += 1
            off = abs(end - expect)
            key = (match, -off if expect >= 0 and off <= _NEAR else -n, end)
            if key > best_key:
                best, best_key = end, key
        if best < 0:
            return []
        self._source, self._source_at = best, n
        draft = ctx[best : best + k]
        for i, t in enumerate(draft):
            if t < 0:  # a position that is no token (an image's, in a vision-language prompt)
                return draft[:i]
        return draft

    def verified(self, accepted: int, drafted: int | None = None) -> None:
        """Record a verification that kept ``accepted`` of ``drafted`` drafts (it replaces a check
        in progress)."""
        self._check, self._checked = [], 0
        self.pace.verified(accepted, drafted)
