"""Differential test: smgpy's chat-template renderer against transformers' own renderer.

Every template under ``../shared/fixtures/chat_templates/**/*.jinja`` is rendered with every conversation of
``../shared/fixtures/conversations.json`` by both engines, with the clock frozen on both sides. Where
transformers renders, the outputs must be byte-identical; where it raises, smgpy must raise too.
"""

from __future__ import annotations

import datetime
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from smgpy import _native

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"
TEMPLATES = FIXTURES / "chat_templates"
CONVERSATIONS = FIXTURES / "conversations.json"
FROZEN = datetime.datetime(2025, 1, 15, 10, 30, 0)
SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}

# Pairs where minijinja cannot match jinja2 today; each must be a documented engine difference.
KNOWN_GAPS: dict[str, str] = {}

RESULTS: Counter[str] = Counter()


def _fixtures_or_skip() -> None:
    if not CONVERSATIONS.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared fixtures missing at {FIXTURES}")
        pytest.skip(f"shared fixtures not found at {FIXTURES}")


def _template_files() -> list[Path]:
    return sorted(TEMPLATES.rglob("*.jinja")) if TEMPLATES.is_dir() else []


def _conversations() -> list[dict[str, Any]]:
    return json.loads(CONVERSATIONS.read_text()) if CONVERSATIONS.is_file() else []


@pytest.fixture(scope="module")
def reference_renderer() -> Any:
    ctu = pytest.importorskip("transformers.utils.chat_template_utils")

    class FrozenDateTime(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> FrozenDateTime:
            return cls(2025, 1, 15, 10, 30, 0)

    original = ctu.datetime
    ctu.datetime = FrozenDateTime
    yield ctu.render_jinja_template
    ctu.datetime = original


@pytest.fixture(scope="module", autouse=True)
def report_counts() -> Any:
    yield
    if RESULTS:
        print(
            "\nchat template differential: "
            + ", ".join(f"{k}={v}" for k, v in sorted(RESULTS.items()))
            + f" (total {sum(RESULTS.values())})"
        )


_CASES = [
    pytest.param(path, conv, id=f"{path.relative_to(TEMPLATES)}::{conv['name']}")
    for path in _template_files()
    for conv in _conversations()
]


@pytest.mark.parametrize(("template_path", "conversation"), _CASES or [pytest.param(None, None, id="no-fixtures")])
def test_matches_transformers(
    template_path: Path | None, conversation: dict[str, Any] | None, reference_renderer: Any
) -> None:
    _fixtures_or_skip()
    assert template_path is not None and conversation is not None
    source = template_path.read_text()
    rel = str(template_path.relative_to(TEMPLATES))
    messages = [{k: v for k, v in m.items() if v is not None} for m in conversation["messages"]]
    try:
        expected, _ = reference_renderer(
            conversations=[messages],
            tools=conversation["tools"],
            chat_template=source,
            add_generation_prompt=conversation["add_generation_prompt"],
            **SPECIAL_TOKENS,
            **conversation["kwargs"],
        )
        expected_text: str | None = expected[0]
    except Exception:
        expected_text = None

    template = _native.ChatTemplate(source, SPECIAL_TOKENS, now=FROZEN)
    try:
        got: str | None = template.render(
            conversation["messages"],
            tools=conversation["tools"],
            add_generation_prompt=conversation["add_generation_prompt"],
            **conversation["kwargs"],
        )
    except ValueError:
        got = None

    if expected_text is None:
        RESULTS["both_raise" if got is None else "only_transformers_raises"] += 1
    elif got == expected_text:
        RESULTS["identical"] += 1
    else:
        RESULTS["known_gap" if rel in KNOWN_GAPS else "different"] += 1

    if rel in KNOWN_GAPS and expected_text is not None and got != expected_text:
        pytest.xfail(KNOWN_GAPS[rel])
    if expected_text is None:
        assert got is None, "transformers raises on this pair but smgpy rendered it"
    else:
        assert got == expected_text
