"""Differential test: jinja2's filters, edge cases included, rendered by smgpy and by transformers.

Each expression is rendered as ``{{ expr }}`` by both engines with the same variables; where
transformers renders, the outputs must be byte-identical, and where it raises, smgpy must raise
too. The cases cover what jinja2's ``filters.py`` does at its edges: ``indent`` and a trailing
newline (a template that pipes a message ending in ``\\n`` through ``indent(..., first=true)``),
``blank=``, ``first=``, a string width, ``Markup``, Python's line boundaries; Python's rounding;
``int``/``float`` defaults and bases; ``title``'s word boundaries; and the filters minijinja lacks.
"""

from __future__ import annotations

from typing import Any

import pytest
from smgpy import _native

SPECIAL = {"bos_token": "<s>", "eos_token": "</s>"}
MESSAGES = [{"role": "user", "content": "hi"}]
VARS: dict[str, Any] = {
    "s": "a\nb\n",
    "two": "line1\n\nline3",
    "one": "x",
    "empty": "",
    "nl": "\n",
    "crlf": "a\r\nb\r\n",
    "breaks": "a\u2028b\x0bc\x0cd\x1ce\x85f",
    "padded": "  Hello World  ",
    "words": "the quick brown fox jumps over the lazy dog",
    "html": "<b>bold</b> &amp; <!-- note --> <i>it</i>",
    "pi": 3.14159,
    "halves": [0.5, 1.5, 2.5, -2.5, 2.675],
    "n": -7,
    "nums": [3, 1, 2],
    "objs": [{"n": "x", "v": 2}, {"n": "y", "v": 1}],
    "mixed": ["b", "A", "c"],
}

EXPRESSIONS = [
    # indent: jinja2 appends a newline before splitting, so a trailing newline survives.
    "s|indent",
    "s|indent(first=true)",
    "s|indent(2, true)",
    "s|indent(2, true, true)",
    "s|indent(blank=true)",
    "two|indent(blank=true)",
    "two|indent(4, first=true, blank=true)",
    "one|indent(first=true)",
    "empty|indent(first=true)",
    "nl|indent(first=true)",
    "nl|indent(first=true, blank=true)",
    "crlf|indent",
    "crlf|indent(first=true)",
    "breaks|indent",
    's|indent("--")',
    's|indent("> ", true)',
    "(s|safe)|indent(first=true)",
    '(s|safe)|indent("<>", true)',
    "s|indent(width=3)",
    "s|indent(0, true)",
    "s|indent(-1)",
    "(3)|indent",
    "s|trim|indent(2)",
    # Python's rounding, and jinja2's methods.
    "pi|round",
    "pi|round(2)",
    'pi|round(2, "floor")',
    'pi|round(1, "ceil")',
    "halves|map('round')|list",
    "halves|map('round', 2)|list",
    "n|round",
    # int / float: defaults, bases, text.
    "pi|int",
    '"42abc"|int',
    '"0x1A"|int(0, 16)',
    '"12"|int(base=8)',
    '" 4_2 "|int',
    '"3.7"|int',
    '"1e3"|float',
    '"abc"|float',
    '"abc"|float(1.5)',
    "none|int(5)",
    # title, replace, center, truncate, wordcount, striptags.
    '"hello-world foo_bar (x) [y]"|title',
    'words|replace("o", "0")',
    'words|replace("o", "0", 2)',
    'words|replace("", "-")',
    "padded|center(30)",
    "one|center(4)",
    "one|center(5)",
    '"ab"|center(5)',
    "words|truncate(20)",
    "words|truncate(20, true)",
    'words|truncate(20, false, "...", 0)',
    "words|truncate(9, leeway=0)",
    "words|wordcount",
    "padded|wordcount",
    "html|striptags",
    # sum, min, max.
    "nums|sum",
    "nums|sum(start=10)",
    'objs|sum(attribute="v")',
    "nums|min",
    "nums|max",
    "mixed|max",
    "mixed|min",
    "mixed|max(case_sensitive=true)",
    'objs|max(attribute="v")',
    'objs|min(attribute="v")',
    "[]|max is undefined",
]


@pytest.fixture(scope="module")
def reference() -> Any:
    ctu = pytest.importorskip("transformers.utils.chat_template_utils")
    return ctu.render_jinja_template


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_filter_matches_jinja2(expr: str, reference: Any) -> None:
    source = "{{ " + expr + " }}"
    try:
        out, _ = reference(conversations=[MESSAGES], chat_template=source, **SPECIAL, **VARS)
        expected: str | None = out[0]
    except Exception:
        expected = None
    try:
        got: str | None = _native.ChatTemplate(source, SPECIAL).render(MESSAGES, **VARS)
    except ValueError:
        got = None
    assert got == expected


def test_a_printed_list_escapes_every_character_as_python_does(reference: Any) -> None:
    """A template that prints a list or a dict shows its strings as Python's ``repr`` does: every
    character ``str.isprintable()`` rejects (controls, format characters, spaces but ' ', unassigned
    code points) as ``\\xhh`` / ``\\uhhhh`` / ``\\Uhhhhhhhh``; all the others as they are."""
    import unicodedata

    # rust/template/src/printable.rs is Python 3.11's table (scripts/make_printable_table.py).
    if unicodedata.unidata_version != "14.0.0":
        pytest.skip(f"smgpy's table is Unicode 14.0.0; this Python's is {unicodedata.unidata_version}")
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    source = "{{ chars }}|{{ {'k': chars[:300]} }}"
    out, _ = reference(conversations=[MESSAGES], chat_template=source, **SPECIAL, chars=chars)
    assert _native.ChatTemplate(source, SPECIAL).render(MESSAGES, chars=chars) == out[0]
