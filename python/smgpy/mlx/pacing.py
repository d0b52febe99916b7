"""When drafting pays: how much a speculating sequence drafts, and when it stops for a while.

A draft that the model rejects costs a wider forward pass (and, with a draft model, the draft's own
passes) for nothing, and drafting at all costs the engine its pipelining (the step's last token must
be read before a draft can be made). So after a verification that kept no draft, or a prompt lookup
that found none, the sequence rests for a number of tokens that doubles with each miss in a row (up
to 32) and is back to 1 after a hit: output that rarely matches its drafts runs at the speed of
plain decoding. A draft model's draft length follows what was accepted lately (up to the
configured ``k``): its drafts cost a pass of the draft model each, and a long draft whose tail is
always rejected only widens the forward pass. A prompt lookup's drafts cost nothing to make, so it
drafts ``k`` and the step's width decides how many are verified; and while its row is not
verified, it checks its drafts against the output itself (:class:`~smgpy.mlx.lookup.Lookup`), so a
row judged not worth verifying is verified again when its text turns to copying.

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
_FORGET = 0.995  # per plain step, what a bucket keeps of its speculative steps' prices (``StepCost``)
_EARLY = 16  # speculative steps kept to price before their batch size's first plain step
_HOLD = 8  # plain turns, none measured, after which an unpriced batch size may speculate again


class Pace:
    """One sequence's drafting rhythm: rests after misses, draft length after acceptance, and the
    share of its drafts kept.

    ``free_drafts``: drafts cost nothing to make (a prompt lookup's). Such a sequence drafts ``k``
    (the step's width decides how many are verified), and while no step verifies it its owner
    checks drafts against the tokens that come instead (:meth:`measured`), so its rate follows the
    text. A draft model's drafts cost a pass each: their length follows what was accepted lately,
    and a rate no verification has tested for a while drifts back to the prior (a row judged not
    worth verifying would otherwise never be tried again, however its text changes)."""

    def __init__(self, *, free_drafts: bool = False) -> None:
        self.free_drafts = free_drafts
        self._rest = 0  # tokens to go before drafting again
        self._backoff = 1
        self._recent = 2.0  # accepted drafts per verification, smoothed
        self.rate = _PRIOR_RATE  # the share of drafted tokens accepted, smoothed (per token, in order)
        self.unverified = 0  # tokens emitted since the last verification

    @property
    def resting(self) -> bool:
        """Whether the sequence sits out the next token (after misses)."""
        return self._rest > 0

    def advanced(self, tokens: int) -> None:
        """``tokens`` more were emitted: a rest runs down, and a rate that no verification has
        tested for a while drifts back to the prior (not with free drafts: their owner checks
        them against the output instead)."""
        if self._rest:
            self._rest = max(0, self._rest - tokens)
        self.unverified += tokens
        if self.unverified > 8 and not self.free_drafts:
            self.rate += (_PRIOR_RATE - self.rate) * min(1.0, 0.03 * tokens)

    def miss(self) -> None:
        """Nothing was drafted, or nothing kept: rest, longer each time in a row."""
        self._rest = self._backoff
        self._backoff = min(_MAX_REST, self._backoff * 2)

    def size(self, k: int) -> int:
        """How many tokens to draft now, at most ``k``."""
        if self.free_drafts:
            return k
        return max(1, min(k, round(self._recent * 1.5) + 1))

    def expected(self, drafts: int) -> float:
        """Drafts expected to be kept out of ``drafts`` (each kept with the smoothed rate, given
        the one before it was)."""
        p = min(self.rate, 0.999)
        return p * (1 - p**drafts) / (1 - p)

    def verified(self, accepted: int, drafted: int | None = None) -> None:
        """Record a verification that kept ``accepted`` of ``drafted`` drafts."""
        self.unverified = 0
        if drafted:
            self.measured(accepted, drafted)
        self._recent = 0.7 * self._recent + 0.3 * accepted
        if accepted:
            self._backoff = 1
        else:
            self.miss()

    def measured(self, accepted: int, drafted: int) -> None:
        """``accepted`` of ``drafted`` drafts agreed with the output, verified or checked after it."""
        # A verification stops at the first rejection: ``accepted`` kept, one rejected.
        tried = min(drafted, accepted + 1)
        self.rate = 0.8 * self.rate + 0.2 * (accepted / tried)


class StepCost:
    """What a speculative step costs against a plain one, learnt from the steps run: for each
    batch size (rounded to a power of two), the time of a plain decode step, and the time of a
    speculative step of each width tried, relative to it. A line through those,
    ``1 + fixed + per_column * (width - 1)``, prices the widths (:meth:`line`): ``per_column`` is
    0 where a wider pass costs nothing more (an accelerator at small batch), ~0.4 for eight rows
    on this project's 2-core CPU; ``fixed`` is what any speculative step costs more than a plain
    one (the pipeline it gives up, an eager graph where the plain step is compiled). Cost is not
    a function of tokens alone: a row brings its whole context to attention, a column only
    queries it. A batch size not seen speculating borrows the nearest one's line (none: free).
    With ``learn=False`` a wider step is always free (the tests' way to verify drafts on a CPU
    where they do not pay).

    Why a line with a fixed part, and a table by width under it: a single per-column price, learnt
    from whatever widths ran last, overprices wide steps after narrow ones. At eight rows here a
    2-wide step took 1.55 plain steps and a 7-wide one 3.5 (a fixed 0.16, 0.39 a column): priced
    from the 2-wide steps, a 9-wide one cost 5.4 steps instead of 4.3, too dear at the acceptance
    of a copied file, so steps stayed narrow and kept it priced so.

    Why prices decay: only a speculative step measures its width, and a high price stops
    speculative steps, so one noisy step could stop speculation for good (here a run whose price
    reached 0.55 a column served the rest of its requests without a draft). Each plain step lets
    its bucket's prices decay by ``_FORGET`` (a half-life of about 140 plain steps), so a price
    that says no is measured again now and then.

    Why a hold: a batch size with no plain step measured cannot price its speculative steps, and
    left free, speculation went on unpriced at every width the drafts allowed for as long as any
    row drafted (at eight rows on the edit workload, half of a run's speculative steps, 6-9
    columns wide and 3-4.5 plain steps each, came before the first plain step). So such steps are
    kept (``_EARLY`` at most) and priced when the first plain step is measured, and after one of
    them the batch size runs plain steps until then. Only a plain step that follows one is timed,
    and while prompts arrive a prefill chunk comes between them, so the hold lasts ``_HOLD``
    untimed plain turns at most (:meth:`unmeasured`), then one more step is tried."""

    def __init__(self, *, learn: bool = True) -> None:
        self.learn = learn
        self._decode: dict[int, float] = {}  # bucket -> seconds per plain step, smoothed
        self._extra: dict[int, dict[int, float]] = {}  # bucket -> width -> its cost - 1, in plain steps
        self._early: dict[int, list[tuple[int, float]]] = {}  # bucket -> (width, seconds) before a plain step
        self._held: dict[int, int] = {}  # bucket -> plain turns not measured since its last early step

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
        table = self._extra.get(b)
        if table:
            for width in table:
                table[width] *= _FORGET
        for width, spent in self._early.pop(b, []):
            self._learn(b, width, spent)
        self._held.pop(b, None)

    def unmeasured(self, rows: int) -> None:
        """A plain decode step of ``rows`` rows ran untimed: the turn before it ran no plain step
        (a speculative one, or none), or a prefill chunk came between them."""
        if self.learn and rows > 0:
            b = self._bucket(rows)
            if b in self._early:
                self._held[b] = self._held.get(b, 0) + 1

    def speculated(self, rows: int, width: int, seconds: float) -> None:
        """A speculative step of ``rows`` rows, ``width`` columns, took ``seconds``."""
        if not self.learn or width < 2 or rows <= 0:
            return
        b = self._bucket(rows)
        if b not in self._decode:
            early = self._early.setdefault(b, [])
            if len(early) < _EARLY:
                early.append((width, seconds))
            self._held[b] = 0
            return
        self._learn(b, width, seconds)

    def _learn(self, b: int, width: int, seconds: float) -> None:
        seen = min(2.0 * (width - 1), max(0.0, seconds / self._decode[b] - 1))
        table = self._extra.setdefault(b, {})
        old = table.get(width)
        table[width] = seen if old is None else 0.7 * old + 0.3 * seen

    def line(self, rows: int) -> tuple[float, float]:
        """``(fixed, per_column)``, the price of a speculative step of ``rows`` rows (see the
        class doc): the least-squares line through the widths measured, or through the origin
        where one width was, or neither part negative."""
        if not self._extra:
            return 0.0, 0.0
        b = self._bucket(rows)
        table = self._extra[min(self._extra, key=lambda k: (abs(k - b), -k))]
        # A handful of widths at most (up to ``k`` + 1): plain arithmetic, cheaper than arrays here.
        xs = [w - 1 for w in table]
        ys = list(table.values())
        if len(xs) > 1:
            mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
            fixed = my - slope * mx
            if slope < 0:  # wider measured cheaper: noise; one price for any width
                return my, 0.0
            if fixed >= 0:
                return fixed, slope
        return 0.0, sum(x * y for x, y in zip(xs, ys, strict=True)) / sum(x * x for x in xs)

    def best_width(self, rows: int, rates: list[tuple[Pace, int]]) -> int:
        """The width of the next step of ``rows`` rows: 1 (a plain decode step) or 1 + the drafts
        per row that maximises expected tokens per unit of time. ``rates``: each drafting row's
        pace and how many drafts it has."""
        if not rates:
            return 1
        b = self._bucket(rows)
        if self.learn and self._early.get(b) and self._held.get(b, 0) < _HOLD:
            return 1  # a step was tried at this batch size: plain steps now, to price it
        fixed, per_column = self.line(rows)
        # Each row's expected kept drafts at every width at once (this runs every turn).
        p = np.array([min(pace.rate, 0.999) for pace, _ in rates])
        d = np.array([n for _, n in rates])
        best, best_rate = 1, float(rows)
        for width in range(2, int(d.max()) + 2):
            m = np.minimum(d, width - 1)
            tokens = rows + float(np.sum(p * (1 - p**m) / (1 - p)))
            rate = tokens / (1 + fixed + per_column * (width - 1))
            if rate > best_rate * 1.05:  # a speculative step gives up the pipeline: ask a margin
                best, best_rate = width, rate
        return best
