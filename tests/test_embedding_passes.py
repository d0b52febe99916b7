"""How the MLX embedder cuts length-sorted inputs into padded forward passes
(:func:`smgpy.mlx.embedder.plan_passes`): every input once, in order, within the bounds, and each
cut made for a reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from smgpy.mlx.embedder import plan_passes

np = pytest.importorskip("numpy")


def padded(widths: list[int], passes: list[range]) -> int:
    return sum(len(p) * widths[p.stop - 1] for p in passes)


@given(
    st.lists(st.integers(1, 600), max_size=300).map(sorted),
    st.integers(1, 80),
    st.integers(1, 20_000),
)
def test_passes_cover_every_input_in_order_within_the_bounds(widths: list[int], max_batch: int, budget: int) -> None:
    passes = plan_passes(widths, max_batch, budget)
    assert [i for p in passes for i in p] == list(range(len(widths)))
    assert all(len(p) > 0 for p in passes)
    for n, p in enumerate(passes):
        assert len(p) <= max_batch
        assert len(p) == 1 or len(p) * widths[p.stop - 1] <= budget
        if n + 1 < len(passes):  # a cut: the next input would break a bound or double a full pass's width
            count, w = len(p) + 1, widths[p.stop]
            assert count > max_batch or count * w > budget or (count > 8 and w > 2 * widths[p.start])


def test_the_reference_texts_compute_little_padding() -> None:
    """sentence-transformers' 100 test texts (1 to 256 tokens): one pass per 64 inputs pads them to
    11,328 tokens; the planned passes to about 6,700 (5,872 are real)."""
    tokens = np.load(Path(__file__).parent / "data" / "minilm_reference.npz")["tokens"]
    widths = sorted(int(t) for t in tokens)
    per_64 = [range(s, min(s + 64, len(widths))) for s in range(0, len(widths), 64)]
    planned = plan_passes(widths, 64, 8192)
    assert padded(widths, per_64) == 11_328
    assert padded(widths, planned) < 6_800
    assert plan_passes([], 64, 8192) == []
