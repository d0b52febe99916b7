"""When drafting pays: how much a speculating sequence drafts, and when it stops for a while.

A draft that the model rejects costs a wider forward pass (and, with a draft model, the draft's own
passes) for nothing, and drafting at all costs the engine its pipelining (the step's last token must
be read before a draft can be made). So after a verification that kept no draft, or a prompt lookup
that found none, the sequence rests for a number of tokens that doubles with each miss in a row (up
to 32) and is back to 1 after a hit: output that rarely matches its drafts runs at the speed of
plain decoding. The draft length follows what was accepted lately (up to the configured ``k``): a
long draft whose tail is always rejected only widens the forward pass.
"""

from __future__ import annotations

__all__ = ["Pace"]

_MAX_REST = 32


class Pace:
    """One sequence's drafting rhythm: rests after misses, draft length after acceptance."""

    def __init__(self) -> None:
        self._rest = 0  # tokens to go before drafting again
        self._backoff = 1
        self._recent = 2.0  # accepted drafts per verification, smoothed

    @property
    def resting(self) -> bool:
        """Whether the sequence sits out the next token (after misses)."""
        return self._rest > 0

    def advanced(self, tokens: int) -> None:
        """``tokens`` more were emitted: a rest runs down."""
        if self._rest:
            self._rest = max(0, self._rest - tokens)

    def miss(self) -> None:
        """Nothing was drafted, or nothing kept: rest, longer each time in a row."""
        self._rest = self._backoff
        self._backoff = min(_MAX_REST, self._backoff * 2)

    def size(self, k: int) -> int:
        """How many tokens to draft now, at most ``k``."""
        return max(1, min(k, round(self._recent * 1.5) + 1))

    def verified(self, accepted: int) -> None:
        """Record a verification that kept ``accepted`` drafts."""
        self._recent = 0.7 * self._recent + 0.3 * accepted
        if accepted:
            self._backoff = 1
        else:
            self.miss()
