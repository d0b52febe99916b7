"""When drafting pays: how much a speculating sequence drafts, and when it stops for a while.

A draft that the model rejects costs a wider forward pass (and, with a draft model, the draft's own
passes) for nothing, and drafting at all costs the engine its pipelining (the step's last token must
be read before a draft can be made). So after a verification that kept no draft, or a prompt lookup
that found none, the sequence rests for a number of tokens that doubles with each miss in a row (up
to 32) and is back to 1 after a hit: output that rarely matches its drafts runs at the speed of
plain decoding. The draft length follows what was accepted lately (up to the configured ``k``): a
long draft whose tail is always rejected only widens the forward pass.

With several rows running, a speculative step widens every row's pass to the longest draft, so
whether it pays depends on the machine: on an accelerator a step of 8 rows x 4 tokens costs about
what 8 x 1 does, on a CPU it costs about twice as much (the demo model here: 187 ms for 8 x 1, 256
for 8 x 2, 411 for 8 x 4). :class:`StepCost` learns the step's cost from the steps the engine runs
(a line, time against tokens computed) and :meth:`StepCost.best_width` picks the width that
gives the most expected tokens per second, from each row's acceptance rate (:meth:`Pace.expected`),
or 1 (a plain decode step) when no width beats it.
"""

from __future__ import annotations

__all__ = ["Pace", "StepCost"]

_MAX_REST = 32
_PRIOR_RATE = 0.6  # the share of drafts assumed kept before any verification


class Pace:
    """One sequence's drafting rhythm: rests after misses, draft length after acceptance."""

    def __init__(self) -> None:
        self._rest = 0  # tokens to go before drafting again
        self._backoff = 1
        self._recent = 2.0  # accepted drafts per verification, smoothed
        self.rate = _PRIOR_RATE  # the share of drafted tokens accepted, smoothed (per token, in order)
        self._unverified = 0  # tokens emitted since the last verification

    @property
    def resting(self) -> bool:
        """Whether the sequence sits out the next token (after misses)."""
        return self._rest > 0

    def advanced(self, tokens: int) -> None:
        """``tokens`` more were emitted: a rest runs down, and a rate that no verification has
        tested for a while drifts back to the prior (a row judged not worth verifying would
        otherwise never be tried again, however its text changes)."""
        if self._rest:
            self._rest = max(0, self._rest - tokens)
        self._unverified += tokens
        if self._unverified > 8:
            self.rate += (_PRIOR_RATE - self.rate) * min(1.0, 0.03 * tokens)

    def miss(self) -> None:
        """Nothing was drafted, or nothing kept: rest, longer each time in a row."""
        self._rest = self._backoff
        self._backoff = min(_MAX_REST, self._backoff * 2)

    def size(self, k: int) -> int:
        """How many tokens to draft now, at most ``k``."""
        return max(1, min(k, round(self._recent * 1.5) + 1))

    def expected(self, drafts: int) -> float:
        """Drafts expected to be kept out of ``drafts`` (each kept with the smoothed rate, given
        the one before it was)."""
        p, total, term = self.rate, 0.0, 1.0
        for _ in range(drafts):
            term *= p
            total += term
        return total

    def verified(self, accepted: int, drafted: int | None = None) -> None:
        """Record a verification that kept ``accepted`` of ``drafted`` drafts."""
        self._unverified = 0
        if drafted:
            # A verification stops at the first rejection: ``accepted`` kept, one rejected.
            tried = min(drafted, accepted + 1)
            self.rate = 0.8 * self.rate + 0.2 * (accepted / tried)
        self._recent = 0.7 * self._recent + 0.3 * accepted
        if accepted:
            self._backoff = 1
        else:
            self.miss()


class StepCost:
    """A forward pass's cost, learnt from the steps run: ``seconds = fixed + per_token * tokens``,
    fitted by least squares with older steps weighing less (the context grows, the machine is
    shared). Until steps of different sizes have been seen it assumes the cost does not grow
    with tokens, so speculation is tried, and measured, at least once. With ``learn=False`` it
    keeps that assumption (the tests' way to verify drafts on a CPU where they do not pay)."""

    def __init__(self, memory: float = 0.97, *, learn: bool = True) -> None:
        self._memory = memory
        self.learn = learn
        self._sums = [0.0] * 5  # weights, tokens, tokens^2, seconds, tokens * seconds

    def record(self, tokens: int, seconds: float) -> None:
        if not self.learn:
            return
        m = self._memory
        w, x, xx, y, xy = self._sums
        self._sums = [m * w + 1, m * x + tokens, m * xx + tokens * tokens, m * y + seconds, m * xy + tokens * seconds]

    def line(self) -> tuple[float, float]:
        """(fixed seconds, seconds per token)."""
        w, x, xx, y, xy = self._sums
        if w <= 0:
            return 1.0, 0.0
        spread = w * xx - x * x
        slope = (w * xy - x * y) / spread if spread > 1e-9 * max(1.0, w * xx) else 0.0
        slope = max(0.0, slope)
        fixed = max(1e-6, (y - slope * x) / w)
        return fixed, slope

    def best_width(self, rows: int, rates: list[tuple[Pace, int]]) -> int:
        """The width of the next step of ``rows`` rows: 1 (a plain decode step) or 1 + the drafts
        per row that maximises expected tokens per second. ``rates``: each drafting row's pace
        and how many drafts it has."""
        if not rates:
            return 1
        fixed, per_token = self.line()
        best, best_rate = 1, rows / (fixed + per_token * rows)
        for width in range(2, max(d for _, d in rates) + 2):
            tokens = rows + sum(pace.expected(min(d, width - 1)) for pace, d in rates)
            rate = tokens / (fixed + per_token * rows * width)
            if rate > best_rate * 1.02:  # a speculative step gives up the pipeline: ask a margin
                best, best_rate = width, rate
        return best
