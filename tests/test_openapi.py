"""`GET /openapi.json` is a valid OpenAPI document and lists every route the server answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import serve_in_thread
from engines import ScriptedEngine, TokenizingEngine
from openapi_spec_validator import validate


@pytest.fixture(scope="module")
def served() -> object:
    with serve_in_thread(ScriptedEngine()) as url:
        yield url, httpx.get(url + "/openapi.json").json()


def test_document_validates(served: tuple[str, dict[str, Any]]) -> None:
    _, doc = served
    validate(doc)
    assert doc["openapi"].startswith("3.1")


EXPECTED = {
    ("get", "/health"),
    ("get", "/live"),
    ("get", "/metrics"),
    ("get", "/v1/models"),
    ("get", "/v1/models/{id}"),
    ("get", "/v1/loads"),
    ("get", "/server_info"),
    ("get", "/get_server_info"),
    ("get", "/model_info"),
    ("get", "/get_model_info"),
    ("get", "/health_generate"),
    ("get", "/flush_cache"),
    ("post", "/flush_cache"),
    ("get", "/openapi.json"),
    ("post", "/v1/chat/completions"),
    ("post", "/v1/completions"),
    ("post", "/v1/embeddings"),
    ("post", "/v1/responses"),
    ("get", "/v1/responses/{id}"),
    ("delete", "/v1/responses/{id}"),
    ("get", "/v1/responses/{id}/input_items"),
    ("post", "/v1/messages"),
    ("post", "/v1/messages/count_tokens"),
    ("post", "/generate"),
    ("post", "/v1/tokenize"),
    ("post", "/v1/detokenize"),
}


def test_every_endpoint_is_documented(served: tuple[str, dict[str, Any]]) -> None:
    _, doc = served
    documented = {(m, p) for p, item in doc["paths"].items() for m in item if m in ("get", "post", "delete")}
    assert documented == EXPECTED


def test_every_documented_operation_is_routed(served: tuple[str, dict[str, Any]]) -> None:
    """No documented operation answers 404/405 (a route missing from the router)."""
    url, doc = served
    for path, item in doc["paths"].items():
        for method in ("get", "post", "delete"):
            if method not in item:
                continue
            r = httpx.request(method, url + path.replace("{id}", "resp_missing"), json={})
            assert r.status_code != 405, (method, path)
            if "{id}" not in path:
                assert r.status_code != 404, (method, path)
            assert r.status_code < 500, (method, path, r.status_code, r.text)


def test_schemathesis_finds_no_server_error(tmp_path: Path) -> None:
    """Fuzz every documented operation (schemathesis CLI) against a scripted engine: no 5xx."""
    pytest.importorskip("schemathesis", reason="schemathesis is not installed")
    st = Path(sys.executable).parent / "st"
    if not st.exists():
        pytest.skip(f"schemathesis CLI not found at {st}")
    with serve_in_thread(TokenizingEngine()) as url:
        r = subprocess.run(
            [str(st), "run", url + "/openapi.json", "--checks", "not_a_server_error", "-n", "15"]
            + ["--generation-deterministic", "--request-timeout", "10"],
            capture_output=True,
            text=True,
            timeout=280,
            cwd=tmp_path,  # schemathesis writes its example database to the working directory
        )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
