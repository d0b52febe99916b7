"""API key auth, CORS and the access log."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
from typing import Any

import anthropic
import httpx
import openai
import pytest
from conftest import REPO, free_port, serve_in_thread, wait_for_health
from engines import ScriptedEngine

KEY = "sk-test-123"
MSG: Any = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def url() -> object:
    with serve_in_thread(ScriptedEngine(), api_key=KEY) as u:
        yield u


def test_health_stays_open(url: str) -> None:
    assert httpx.get(url + "/health").status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/models"),
        ("GET", "/metrics"),
        ("GET", "/v1/loads"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/completions"),
        ("POST", "/v1/responses"),
        ("POST", "/generate"),
        ("POST", "/v1/tokenize"),
        ("GET", "/openapi.json"),
    ],
)
def test_openai_routes_need_the_key(url: str, method: str, path: str) -> None:
    r = httpx.request(method, url + path, json={})
    assert r.status_code == 401
    err = r.json()["error"]
    assert err["type"] == "authentication_error" and "API key" in err["message"]
    r = httpx.request(method, url + path, json={}, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401


def test_anthropic_routes_answer_in_anthropic_shape(url: str) -> None:
    r = httpx.post(url + "/v1/messages", json={})
    assert r.status_code == 401
    assert r.json()["type"] == "error" and r.json()["error"]["type"] == "authentication_error"


def test_bearer_and_x_api_key_both_work(url: str) -> None:
    assert httpx.get(url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
    assert httpx.get(url + "/v1/models", headers={"x-api-key": KEY}).status_code == 200


def test_sdks_with_key(url: str) -> None:
    r = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0).chat.completions.create(
        model="scripted", messages=MSG
    )
    assert r.choices[0].message.content == "Hello, world!"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url + "/v1", api_key="nope", max_retries=0).models.list()
    m = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0).messages.create(
        model="scripted", max_tokens=10, messages=MSG
    )
    assert m.content[0].type == "text"
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=url, api_key="nope", max_retries=0).messages.create(
            model="scripted", max_tokens=10, messages=MSG
        )


def test_cors_off_by_default() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.get(url + "/v1/models", headers={"Origin": "https://app.example"})
    assert "access-control-allow-origin" not in r.headers


def test_cors_allowed_origins() -> None:
    with serve_in_thread(ScriptedEngine(), api_key=KEY, allowed_origins=["https://app.example"]) as url:
        pre = httpx.options(
            url + "/v1/chat/completions",
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        ok = httpx.get(url + "/v1/models", headers={"Origin": "https://app.example", "x-api-key": KEY})
        other = httpx.get(url + "/v1/models", headers={"Origin": "https://evil.example", "x-api-key": KEY})
    assert pre.status_code == 200
    assert pre.headers["access-control-allow-origin"] == "https://app.example"
    assert ok.headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-origin" not in other.headers


def test_request_timeout_is_504() -> None:
    with serve_in_thread(ScriptedEngine(delay=0.5), request_timeout=0.2) as url:
        r = httpx.post(url + "/v1/completions", json={"prompt": "x"})
    assert r.status_code == 504 and r.json()["error"]["type"] == "timeout_error"


def test_access_log_line() -> None:
    """`serve_oai(log_level="info")` writes one structured line per request, with token counts."""
    port = free_port()
    code = textwrap.dedent(
        f"""
        import sys; sys.path.insert(0, {str(REPO / "tests")!r})
        import smgpy
        from engines import ScriptedEngine
        smgpy.serve_oai(ScriptedEngine(), port={port}, log_level="info")
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(url)
        assert httpx.post(url + "/v1/completions", json={"prompt": "x"}).status_code == 200
        assert httpx.post(url + "/v1/completions", json={"prompt": 3}).status_code == 400
        chat = {"messages": [{"role": "user", "content": "x"}]}
        assert httpx.post(url + "/v1/chat/completions", json=chat).status_code == 200
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    # tracing-subscriber's fmt layer writes to stdout unless told otherwise: accept either stream.
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out + err)  # the fmt layer may colour its output
    lines = [line for line in plain.splitlines() if "path=/v1/completions" in line]
    assert len(lines) == 2, plain
    assert "method=POST" in lines[0] and "status=200" in lines[0] and "latency_ms=" in lines[0]
    assert "prompt_tokens=7" in lines[0] and "completion_tokens=4" in lines[0]
    assert "status=400" in lines[1]
    # Every non-streaming generation route logs its counts, chat included.
    (chat_line,) = [line for line in plain.splitlines() if "path=/v1/chat/completions" in line]
    assert "status=200" in chat_line and "prompt_tokens=" in chat_line and "completion_tokens=4" in chat_line
