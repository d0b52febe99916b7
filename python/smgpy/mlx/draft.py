"""Draft-model speculation: a small model with the target's tokenizer proposes the next tokens.

``smgpy serve --draft-model DIR --num-draft-tokens K`` (``mlx_lm.server``'s flags). The draft model
proposes up to ``K`` tokens for every drafting row of the running batch, and the engine verifies
them with the target in one forward pass (:mod:`smgpy.mlx.batching`), keeping them by the rule that
leaves the output's distribution unchanged (:mod:`smgpy.mlx.verify`). The draft proposes its argmax:
a proposal that is a function of the context is a one-hot draft distribution, for which the
acceptance rule is exact for greedy and sampled requests alike. Unlike ``mlx_lm.server``, which
turns batching off for a draft model, the continuous batch stays on.

The draft's keys and values live in a batch of their own (:class:`DraftBatch`, a
:class:`~smgpy.mlx.slots.SlotBatch`) whose rows are the target batch's rows, so drafting ``K`` tokens
for eight rows is ``K`` forward passes of the draft, not ``8 K``, and its graph is evaluated once. A
row's draft cache follows it lazily: the first time it drafts, its context is prefilled alone (in
chunks) and joins the draft batch; later, whatever it emitted since (the tokens of steps it decoded
without drafting, the model's own token after a verification) is fed in the first pass of the next
drafting, rows of different lengths side by side (the shorter ones' extra columns become holes).
After a verification each row's rejected drafts are dropped from its row. The draft model must have
plain attention caches. When a row leaves, what its draft cache holds is kept in a prefix cache of
the draft's own (a :class:`~smgpy.mlx.prefix_cache.PrefixCache`, in memory, with a quarter of the
target's prefix-cache budget), so a later request sharing that prefix (the next turn of a
conversation, a shared system prompt) prefills only the rest of its context in the draft model, as
the target prefills only what its own prefix cache lacks. A draft the model keeps rejecting is
paced as prompt lookup is (:class:`smgpy.mlx.pacing.Pace`): it rests, so a poor draft model costs
little.
"""

from __future__ import annotations

from typing import Any

import mlx.core as mx

from smgpy.mlx import mlx_lm_api
from smgpy.mlx.batch_probe import probe_batching
from smgpy.mlx.pacing import Pace
from smgpy.mlx.prefix_cache import PrefixCache
from smgpy.mlx.slots import SlotBatch, is_plain_kv

__all__ = ["DraftBatch", "DraftModel", "DraftState"]

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
        if not is_plain_kv(mlx_lm_api.make_prompt_cache(model)):
            raise ValueError(
                f"{path} keeps a cache that is not plain attention (sliding windows or recurrent state): "
                "a draft model needs plain attention"
            )
        fit = probe_batching(model, "slots")
        if fit.mode != "slots":
            raise ValueError(f"{path} cannot be batched ({fit.reason}): a draft model drafts for every row at once")
        self.grouped = fit.grouped
        self.model = model

    def state(self, context: list[int]) -> DraftState:
        """A new sequence's draft state, holding its context so far (nothing run yet)."""
        return DraftState(context)

    def batch(self, cache_bytes: int = 0) -> DraftBatch:
        """An empty batch of draft caches (one per running batch), whose rows leave their
        caches in a prefix cache of ``cache_bytes`` (0: none)."""
        return DraftBatch(self.model, PrefixCache(cache_bytes), grouped=self.grouped)


def _vocab_size(tokenizer: Any) -> int | None:
    """Tokens in a tokenizer's vocabulary, added tokens included (mlx-lm's wrapper or HF's)."""
    get_vocab = getattr(tokenizer, "get_vocab", None)
    if callable(get_vocab):
        return len(get_vocab())
    size = getattr(tokenizer, "vocab_size", None)
    return size if isinstance(size, int) else None


class DraftState:
    """One sequence's draft: its context, how much of it its row of the draft batch holds, and
    its pace."""

    def __init__(self, context: list[int]) -> None:
        self.context = list(context)
        self.fed = 0  # tokens of ``context`` in its row of the draft batch; short of the whole context
        self.joined = False  # its row of the draft batch holds it
        self.pace = Pace()

    @property
    def resting(self) -> bool:
        """Whether the draft sits out the next token (after drafts the model rejected)."""
        return self.pace.resting

    def extend(self, tokens: list[int]) -> None:
        """Append emitted tokens to the context."""
        self.context.extend(tokens)
        self.pace.advanced(len(tokens))

    def verified(self, accepted: int, drafted: int | None = None) -> None:
        """Record a verification that kept ``accepted`` of ``drafted`` drafts (the draft batch
        drops the rejected ones: :meth:`DraftBatch.verified`)."""
        self.pace.verified(accepted, drafted)


class DraftBatch:
    """The draft model's keys and values for the rows of the running batch (see the module doc)."""

    def __init__(self, model: Any, cache: PrefixCache | None = None, *, grouped: bool = False) -> None:
        self.model = model
        self.batch = SlotBatch(len(mlx_lm_api.make_prompt_cache(model)), grouped=grouped)
        # Where rows that leave keep their draft caches, and where joining rows look first.
        self.cache = cache if cache is not None else PrefixCache(0)
        # Per row drafting now: its state and the columns its fed drafts occupy (begin, end).
        self._fed: dict[int, tuple[DraftState, int, int]] = {}
        self._states: dict[int, DraftState] = {}  # the state of each joined row
        self.prefilled = 0  # context tokens prefilled at joins (what the prefix cache did not hold)

    def leave(self, rows: list[int]) -> None:
        """The target batch freed ``rows``: their draft caches go to the prefix cache."""
        gone = [r for r in rows if r < len(self.batch.live) and self.batch.live[r]]
        for r in gone:
            self._keep(r)
        if gone:
            self.batch.leave(gone)

    def _keep(self, row: int) -> None:
        state = self._states.pop(row, None)
        # The row holds its first ``fed`` tokens (a sequence that stopped inside its accepted
        # drafts emitted fewer: only those are known to be its context).
        n = 0 if state is None else min(state.fed, len(state.context))
        if state is None or not self.cache.enabled or n < 2:
            return
        caches = self.batch.extract(row, n)
        arrays = [a for c in caches for a in (c.keys, c.values) if a is not None]
        if arrays:
            mx.async_eval(arrays)  # type: ignore[no-untyped-call]  # lets go of the batch's buffers
            self.cache.insert(state.context[:n], caches, prompt_len=n)

    def reset(self) -> None:
        self.batch.reset()
        self._fed = {}
        self._states = {}

    def _join(self, row: int, state: DraftState) -> None:
        """Prefill the row's context but its last token alone, in chunks (from what the prefix
        cache holds of it), and place it."""
        hit = self.cache.fetch(state.context)
        caches = hit.cache if hit.cache is not None else mlx_lm_api.make_prompt_cache(self.model)
        head = state.context[:-1]
        for start in range(hit.cached, len(head), _CATCH_UP_CHUNK):
            part = head[start : start + _CATCH_UP_CHUNK]
            self.model(mx.array([part], dtype=mx.uint32), cache=caches)
            mx.eval([c.state for c in caches])
            self.prefilled += len(part)
        self.batch.join(caches, len(head), row=row)
        self._states[row] = state
        state.fed = len(head)
        state.joined = True

    def propose(self, wants: dict[int, tuple[DraftState, int]]) -> dict[int, list[int]]:
        """Up to ``k`` drafts per row (``wants``: row -> its state and ``k``), the draft model's
        argmax one after another from the end of each row's context, all rows in each pass."""
        wants = {r: (st, k) for r, (st, k) in wants.items() if k > 0 and st.fed < len(st.context)}
        if not wants:
            return {}
        for row, (st, _) in wants.items():
            if not st.joined:
                self._join(row, st)
        batch = self.batch
        rows = batch.rows
        # Catch up: every row's pending tokens (at least its last emitted one), in passes of at
        # most a chunk; a row's first draft comes from the pass that fed its last pending token.
        pending = {r: st.context[st.fed :] for r, (st, _) in wants.items()}
        first: dict[int, mx.array] = {}
        while pending:
            width = min(_CATCH_UP_CHUNK, max(len(p) for p in pending.values()))
            grid = [[0] * width for _ in range(rows)]
            kept = [0] * rows
            for r, p in pending.items():
                part = p[:width]
                grid[r][: len(part)] = part
                kept[r] = len(part)
            logits = self.model(mx.array(grid, dtype=mx.uint32), cache=batch.caches)
            batch.advance(width)
            batch.settle(width, kept)
            for r in list(pending):
                if len(pending[r]) <= width:
                    first[r] = mx.argmax(logits[r, len(pending[r]) - 1])
                    del pending[r]
                else:
                    pending[r] = pending[r][width:]
        for st, _ in wants.values():
            st.fed = len(st.context)
        order = sorted(wants)
        drafts: dict[int, list[mx.array]] = {r: [first[r]] for r in order}
        start = batch.write_column
        most = max(k for _, k in wants.values())
        for i in range(1, most):
            # Feed each row's newest draft while it wants more: one column per pass.
            going = [r for r in order if wants[r][1] > i]
            x = mx.zeros((rows,), dtype=mx.uint32)
            x[mx.array(going, dtype=mx.int32)] = mx.stack([drafts[r][-1] for r in going]).astype(mx.uint32)
            logits = self.model(x[:, None], cache=batch.caches)
            batch.advance(1)
            batch.settle(1, [1 if r in going else 0 for r in range(rows)])
            nxt = mx.argmax(logits[mx.array(going, dtype=mx.int32), 0], axis=-1)
            for j, r in enumerate(going):
                drafts[r].append(nxt[j])
        stacked = {r: mx.stack(drafts[r]) for r in order}
        mx.eval(list(stacked.values()))
        out: dict[int, list[int]] = {}
        for r in order:
            st, k = wants[r]
            tokens: list[int] = stacked[r].tolist()  # type: ignore[assignment]
            out[r] = tokens
            # Its fed drafts (all but the last) sit in the columns of passes 1..k-1.
            self._fed[r] = (st, start, start + k - 1)
        return out

    def verified(self, accepted: dict[int, int]) -> None:
        """After the verification of the last :meth:`propose`: each row keeps the drafts it
        accepted (``accepted``, 0 for rows not verified) and drops the rest."""
        for r, (st, begin, end) in sorted(self._fed.items()):
            keep = min(accepted.get(r, 0), end - begin)
            st.fed += keep
            if r < len(self.batch.live) and self.batch.live[r]:
                self.batch.drop(r, begin + keep, end)
        self._fed = {}
