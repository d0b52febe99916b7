"""When drafting pays: how much a speculating sequence drafts, and when it stops for a while.

A draft that the model rejects costs a wider forward pass (and, with a draft model, the draft's own
passes) for nothing, and drafting at all costs the engine its pipelining (the step's last token must
be read before a draft can be made). So after a verification that kept no draft, or a prompt lookup
that found none, the sequence rests for a number of tokens that doubles with each miss in a row (up
to 32) and is back to 1 after a hit: output that rarely matches its drafts runs at the speed of
plain decoding. A draft model's draft length follows what was accepted lately (up to the
configured ``k``): its drafts cost a pass of the draft model each, and a long draft whose tail is
always rejected only widens the forward pass. A prompt lookup's drafts cost nothing to make, so it
drafts ``k`` and the step's width decides how many are verified.

With several rows running, a speculative step widens every row's pass to the longest draft, so
whether it pays depends on the machine: on an accelerator a step of 8 rows x 4 tokens costs about
what 8 x 1 does, on a CPU it costs about twice as much (the demo model here: 187 ms for 8 x 1, 256
for 8 x 2, 411 for 8 x 4). :class:`StepCost` learns what a wider step costs from the steps the
engine runs, and :meth:`StepCost.best_width` picks the width that gives the most expected tokens
per second, from each row's acceptance rate (:meth:`Pace.expected`), or 1 (a plain decode step)
when no width beats it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Pace", "StepCost"]

_MAX_REST = 32
_PRIOR_RATE = 0.6  # the share of drafts assumed kept before any verification
_FORGET = 0.995  # per plain step, what a bucket keeps of its ``StepCost.extra`` (see there)


class Pace:
    """One sequence's drafting rhythm: rests after misses, draft length after acceptance (only
    where drafts cost something to make: ``follow_acceptance``, a draft model's; a prompt lookup
    drafts ``k``)."""

    def __init__(self, *, follow_acceptance: bool = True) -> None:
        self.follow_acceptance = follow_acceptance
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
        if not self.follow_acceptance:
            return k
        return max(1, min(k, round(self._recent * 1.5) + 1))

    def expected(self, drafts: int) -> float:
        """Drafts expected to be kept out of ``drafts`` (each kept with the smoothed rate, given
        the one before it was)."""
        p = min(self.rate, 0.999)
        return p * (1 - p**drafts) / (1 - p)

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
    """What a speculative step costs against a plain one, learnt from the steps run: for each
    batch size (rounded to a power of two), the time of a plain decode step, and the extra time
    per extra column of a speculative step relative to it (``extra``: 0 where a wider pass costs
    nothing more, as on an accelerator; ~0.05 for one row and ~0.4 for eight on this project's
    2-core CPU). Cost is not a function of tokens alone: a row brings its whole context to
    attention, a column only queries it. Until a batch size has been seen speculating it
    borrows the nearest one's ``extra`` (0 when none: speculation is tried, and measured). With
    ``learn=False`` it keeps assuming 0 (the tests' way to verify drafts on a CPU where they do
    not pay).

    Only a speculative step measures ``extra``, and a high estimate stops speculative steps: one
    noisy step could stop speculation for good. On this CPU, one row's ``extra`` ranged 0.14-0.52
    over one bench run (a step's time varies by a fifth here), and at 0.55 no row with the prior
    rate is worth verifying; a run that stayed there served the rest of its requests without a
    draft (1.14x on the summary workload, against 3.4-3.8x in the runs around it; in the next run
    the estimate reached 0.52). So each plain step lets its bucket's ``extra`` decay by
    ``_FORGET``, a half-life of about 140 plain steps: an estimate that says no is tried again,
    and measured, now and then."""

    def __init__(self, *, learn: bool = True) -> None:
        self.learn = learn
        self._decode: dict[int, float] = {}  # bucket -> seconds per plain step, smoothed
        self._extra: dict[int, float] = {}  # bucket -> relative cost per extra column, smoothed

    @staticmethod
    def _bucket(rows: int) -> int:
        return max(0, rows - 1).bit_length()

    def decoded(self, rows: int, seconds: float) -> None:
        """A plain decode step of ``rows`` rows took ``seconds`` (its turn, pipelined)."""
        if not self.learn or rows <= 0:
            return
        b = self._bucket(rows)
        old = self._decode.get(b)
        self._decode[b] = seconds if old is None else 0.9 * old + 0.1 * seconds
        if b in self._extra:
            self._extra[b] *= _FORGET

    def speculated(self, rows: int, width: int, seconds: float) -> None:
        """A speculative step of ``rows`` rows, ``width`` columns, took ``seconds``."""
        b = self._bucket(rows)
        plain = self._decode.get(b)
        if not self.learn or width < 2 or plain is None:
            return
        seen = min(2.0, max(0.0, (seconds / plain - 1) / (width - 1)))
        old = self._extra.get(b)
        self._extra[b] = seen if old is None else 0.7 * old + 0.3 * seen

    def extra(self, rows: int) -> float:
        """The relative cost of one more column for ``rows`` rows (see the class doc)."""
        if not self._extra:
            return 0.0
        b = self._bucket(rows)
        nearest = min(self._extra, key=lambda k: (abs(k - b), -k))
        return self._extra[nearest]

    def best_width(self, rows: int, rates: list[tuple[Pace, int]]) -> int:
        """The width of the next step of ``rows`` rows: 1 (a plain decode step) or 1 + the drafts
        per row that maximises expected tokens per unit of time. ``rates``: each drafting row's
        pace and how many drafts it has."""
        if not rates:
            return 1
        extra = self.extra(rows)
        # Each row's expected kept drafts at every width at once (this runs every turn).
        p = np.array([min(pace.rate, 0.999) for pace, _ in rates])
        d = np.array([n for _, n in rates])
        best, best_rate = 1, float(rows)
        for width in range(2, int(d.max()) + 2):
            m = np.minimum(d, width - 1)
            tokens = rows + float(np.sum(p * (1 - p**m) / (1 - p)))
            rate = tokens / (1 + extra * (width - 1))
            if rate > best_rate * 1.05:  # a speculative step gives up the pipeline: ask a margin
                best, best_rate = width, rate
        return best
