"""The engine contract is typed: an engine written against ``smgpy.Engine``, ``GenerateReqInput``
and ``GenerateOutput`` is checked by mypy, and a wrong output shape is an error mypy reports."""

from __future__ import annotations

from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

GOOD = """
from collections.abc import AsyncIterator

import smgpy


class Echo:
    async def generate_request(self, obj: smgpy.GenerateReqInput) -> AsyncIterator[smgpy.GenerateOutput]:
        limit = obj.sampling_params.get("max_new_tokens", 4)
        for i in range(limit):
            finish: smgpy.FinishReason | None = {"type": "length"} if i == limit - 1 else None
            meta: smgpy.MetaInfo = {"prompt_tokens": 1, "completion_tokens": i + 1, "finish_reason": finish}
            yield {"delta": "x", "output_ids": [i], "meta_info": meta}

    def abort_request(self, rid: str) -> None:
        pass


engine: smgpy.Engine = Echo()
"""

BAD = """
from collections.abc import AsyncIterator

import smgpy


class Broken:
    async def generate_request(self, obj: smgpy.GenerateReqInput) -> AsyncIterator[smgpy.GenerateOutput]:
        yield {"delta": "x", "output_ids": ["one"], "meta_info": {"prompt_tokens": 1}}

    def abort_request(self, rid: str) -> None:
        pass
"""


def run_mypy(tmp_path: Path, source: str) -> tuple[str, int]:
    path = tmp_path / "engine_under_test.py"
    path.write_text(source)
    out, err, status = mypy_api.run(["--strict", "--no-incremental", "--cache-dir", str(tmp_path / "c"), str(path)])
    return out + err, status


def test_a_typed_engine_checks(tmp_path: Path) -> None:
    out, status = run_mypy(tmp_path, GOOD)
    assert status == 0, out


def test_a_wrong_output_shape_is_a_type_error(tmp_path: Path) -> None:
    out, status = run_mypy(tmp_path, BAD)
    assert status == 1, out
    assert 'List item 0 has incompatible type "str"; expected "int"' in out
    assert "Missing keys" in out and "completion_tokens" in out
