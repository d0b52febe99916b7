"""Every generation endpoint against the real MLX engine (SmolLM2-135M-Instruct, greedy), through the
official SDKs: stops on decoded text, completions, Anthropic messages and Responses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import demo_gguf  # noqa: E402

GGUF = demo_gguf()
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
from conftest import serve_in_thread  # noqa: E402

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def base(mlx_engine: Any) -> Iterator[str]:
    with serve_in_thread(mlx_engine) as url:
        yield url


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


def test_served_greedy_text_equals_mlx_lm_for_concurrent_clients(base: str) -> None:
    """Four clients at once over HTTP get exactly what mlx-lm's `stream_generate` writes alone."""
    from concurrent.futures import ThreadPoolExecutor

    from mlx_lm import load, stream_generate
    from smgpy.mlx import resolve_model

    model, tok = load(resolve_model(str(GGUF))[0])
    questions = ["What is the capital of France?", "Name three colors.", "Count to five.", "Describe a cat."]
    want = []
    for q in questions:
        prompt = tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
        want.append("".join(r.text for r in stream_generate(model, tok, prompt, max_tokens=24)))
    client = openai.OpenAI(base_url=base + "/v1", api_key="x", max_retries=0, timeout=300)

    def ask(q: str) -> str:
        r = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": q}], temperature=0, max_tokens=24
        )
        return r.choices[0].message.content or ""

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(ask, questions))
    assert got == [w.removesuffix("<|im_end|>") for w in want]
