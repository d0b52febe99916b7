"""Stop matching through the built wheel: examples plus the streaming invariant under hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from smgpy._native import StopMatcher

# Few symbols so matches and overlaps are frequent; multi-byte ones share lead bytes.
ALPHABET = ["a", "b", "c", "\n", "｜", "▁", "终", "止", "🛑"]


def naive(stops: list[str], text: str, include: bool) -> tuple[str, int | None]:
    """For each start in order, the shortest stop there (smallest index on ties)."""
    for start in range(len(text) + 1):
        hits = [(len(s), i) for i, s in enumerate(stops) if text.startswith(s, start)]
        if hits:
            length, index = min(hits)
            return text[: start + length if include else start], index
    return text, None


def stream(m: StopMatcher, chunks: list[str]) -> tuple[str, list[str]]:
    pieces = []
    for chunk in chunks:
        pieces.append(m.feed(chunk))
        if m.stopped:
            break
    pieces.append(m.finish())
    return "".join(pieces), pieces


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def test_cut_across_chunks() -> None:
    m = StopMatcher(["</stop>"])
    assert m.feed("hello </st") == "hello "
    assert not m.stopped
    assert m.feed("op> ignored") == ""
    assert m.stopped
    assert m.matched == "</stop>"
    assert m.matched_index == 0
    assert m.feed("more") == ""
    assert m.finish() == ""


def test_single_string_and_include_stop() -> None:
    m = StopMatcher("END", include_stop=True)
    assert m.stops == ["END"]
    assert m.include_stop
    assert m.feed("aaE") == "aa"
    assert m.feed("NDbb") == "END"
    assert m.matched == "END"


def test_overlapping_stops_cut_at_earliest_start() -> None:
    m = StopMatcher(["abcd", "bc"])
    assert m.feed("xabc") == "x"
    assert m.finish() == "a"
    assert (m.stopped, m.matched, m.matched_index) == (True, "bc", 1)


def test_unicode_stop() -> None:
    m = StopMatcher(["<｜end｜>"])
    assert m.feed("答案<｜e") == "答案"
    assert m.feed("nd｜>") == ""
    assert m.matched == "<｜end｜>"


def test_held_text_released_without_match() -> None:
    m = StopMatcher(["<|im_end|>"])
    assert m.feed("a <|im") == "a "
    assert m.feed("_x") == "<|im_x"
    assert m.feed(" <|") == " "
    assert m.finish() == "<|"
    assert (m.stopped, m.matched, m.matched_index) == (False, None, None)


def test_empty_list_passes_through() -> None:
    m = StopMatcher([])
    assert m.feed("anything") == "anything"
    assert m.finish() == ""


@pytest.mark.parametrize(
    ("stops", "message"),
    [
        (["a", ""], "stop string #1 is empty"),
        (["x"] * 65, "65 stop strings given, at most 64"),
        (["y" * 1025], "stop string #0 is 1025 bytes long, at most 1024"),
    ],
)
def test_bad_stop_lists_raise_value_error(stops: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StopMatcher(stops)


def test_wrong_types_raise_type_error() -> None:
    with pytest.raises(TypeError):
        StopMatcher([1, 2])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        StopMatcher(["a"], includestop=True)  # type: ignore[call-arg]


texts = st.lists(st.sampled_from(ALPHABET), max_size=60).map("".join)
stop_lists = st.lists(st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=4).map("".join), min_size=1, max_size=6)


@settings(max_examples=500, deadline=None)
@given(stops=stop_lists, text=texts, cuts=st.lists(st.integers(min_value=0), max_size=20), include=st.booleans())
def test_streaming_equals_complete_equals_naive(stops: list[str], text: str, cuts: list[int], include: bool) -> None:
    expected = naive(stops, text, include)

    whole = StopMatcher(stops, include_stop=include)
    out, _ = stream(whole, [text])
    assert (out, whole.matched_index) == expected

    chunked = StopMatcher(stops, include_stop=include)
    out, pieces = stream(chunked, split(text, cuts))
    assert (out, chunked.matched_index) == expected
    assert text.startswith(out)
    if chunked.matched_index is not None:
        assert chunked.matched == stops[chunked.matched_index]
    if not include:
        for piece in pieces:
            assert not any(s in piece for s in stops)
