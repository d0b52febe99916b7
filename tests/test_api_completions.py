"""`POST /v1/completions` through the official `openai` SDK and raw HTTP."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from conftest import assert_openai_error, serve_in_thread
from engines import ScriptedEngine, TokenizingEngine


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def test_single_prompt() -> None:
    engine = ScriptedEngine()
    with serve_in_thread(engine) as url:
        r = client(url).completions.create(model="scripted", prompt="Once upon")
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert [c.text for c in r.choices] == ["Hello, world!"]
    assert r.choices[0].finish_reason == "stop"
    assert r.usage is not None and (r.usage.prompt_tokens, r.usage.completion_tokens) == (7, 4)
    assert engine.requests[0].text == "Once upon"  # raw prompt: no chat template
    assert engine.requests[0].sampling_params["max_new_tokens"] == 16  # OpenAI's default


def test_batch_one_choice_per_prompt_in_order() -> None:
    engine = ScriptedEngine()
    with serve_in_thread(engine) as url:
        r = client(url).completions.create(model="scripted", prompt=["a", "b", "c"], n=2, echo=True, max_tokens=2)
    assert [c.index for c in r.choices] == list(range(6))
    assert [c.text for c in r.choices] == ["aHello,", "aHello,", "bHello,", "bHello,", "cHello,", "cHello,"]
    assert sorted(q.text for q in engine.requests) == ["a", "a", "b", "b", "c", "c"]
    assert r.usage is not None and r.usage.prompt_tokens == 21 and r.usage.completion_tokens == 12


def test_token_id_prompts() -> None:
    engine = TokenizingEngine()
    with serve_in_thread(engine) as url:
        r = client(url).completions.create(model="scripted", prompt=[[104, 105], [111]], echo=True)
    assert engine.requests[0].input_ids in ([104, 105], [111])
    assert [c.text for c in r.choices] == ["hiHello, world!", "oHello, world!"]


def test_token_prompt_echo_needs_a_tokenizer() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/v1/completions", json={"prompt": [1, 2], "echo": True})
    assert r.status_code == 400 and "tokenizer" in r.json()["error"]["message"]


def test_streaming_with_usage() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        chunks = list(
            client(url).completions.create(
                model="scripted", prompt="x", stream=True, stream_options={"include_usage": True}
            )
        )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "Hello, world!"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 4
    assert len({c.id for c in chunks}) == 1


def test_streaming_batch_and_echo() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        chunks = list(client(url).completions.create(model="scripted", prompt=["p0 ", "p1 "], stream=True, echo=True))
    texts: dict[int, str] = {}
    for c in chunks:
        for ch in c.choices:
            texts[ch.index] = texts.get(ch.index, "") + ch.text
    assert texts == {0: "p0 Hello, world!", 1: "p1 Hello, world!"}
    assert all(c.usage is None for c in chunks)


def test_logprobs_completions_form() -> None:
    engine = ScriptedEngine()
    with serve_in_thread(engine) as url:
        r = client(url).completions.create(model="scripted", prompt="x", logprobs=2)
        s = list(client(url).completions.create(model="scripted", prompt="x", logprobs=2, stream=True))
    lp = r.choices[0].logprobs
    assert lp is not None
    assert lp.tokens == ["Hello", ",", " world", "!"]
    assert lp.token_logprobs == [-0.5] * 4
    assert lp.text_offset == [0, 5, 6, 12]
    assert lp.top_logprobs is not None and lp.top_logprobs[0] == {"Hello": -0.5, "t0": -2.0}
    assert engine.requests[0].return_logprob and engine.requests[0].top_logprobs_num == 2
    streamed = [t for c in s for ch in c.choices if ch.logprobs for t in ch.logprobs.tokens or []]
    assert streamed == lp.tokens
    offsets = [o for c in s for ch in c.choices if ch.logprobs for o in ch.logprobs.text_offset or []]
    assert offsets == lp.text_offset


def test_stop_strings() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = client(url).completions.create(model="scripted", prompt="x", stop=[" wor"])
        s = list(client(url).completions.create(model="scripted", prompt="x", stop=" wor", stream=True))
    assert r.choices[0].text == "Hello,"
    assert r.choices[0].finish_reason == "stop"
    assert r.model_extra is not None
    assert r.choices[0].model_extra == {"matched_stop": " wor"}
    assert "".join(ch.text for c in s for ch in c.choices) == "Hello,"


def test_length_finish() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = client(url).completions.create(model="scripted", prompt="x", max_tokens=2)
    assert r.choices[0].text == "Hello," and r.choices[0].finish_reason == "length"


def test_best_of_equal_to_n_is_honoured() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = client(url).completions.create(model="scripted", prompt="x", n=2, best_of=2)
    assert len(r.choices) == 2


INVALID: list[tuple[dict[str, Any], int, str | None]] = [
    ({}, 400, "prompt"),
    ({"prompt": 5}, 400, "prompt"),
    ({"prompt": []}, 400, "prompt"),
    ({"prompt": ["a", 1]}, 400, "prompt[1]"),
    ({"prompt": "a", "suffix": "b"}, 400, "suffix"),
    ({"prompt": "a", "best_of": 3}, 400, "best_of"),
    ({"prompt": "a", "logprobs": 6}, 400, "logprobs"),
    ({"prompt": "a", "max_tokens": "many"}, 400, "max_tokens"),
    ({"prompt": "a", "max_tokens": 0}, 400, "max_tokens"),
    ({"prompt": "a", "temperature": -1}, 400, "temperature"),
    ({"prompt": "a", "n": 0}, 400, "n"),
    ({"prompt": "a", "stop": ["ok", ""]}, 400, "stop[1]"),
    ({"prompt": "a", "stream": "yes"}, 400, "stream"),
]


@pytest.mark.parametrize(("body", "status", "param"), INVALID)
def test_invalid_requests(body: dict[str, Any], status: int, param: str | None) -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/v1/completions", json=body)
    assert_openai_error(r, status, param)


def test_malformed_json_is_400() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/v1/completions", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"


def test_sdk_raises_bad_request_for_suffix() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        with pytest.raises(openai.BadRequestError) as e:
            client(url).completions.create(model="scripted", prompt="a", suffix="z")
    assert "suffix" in str(e.value)
    assert json.dumps(e.value.body)
