"""`/generate` (sglang-native), `/v1/tokenize`, `/v1/detokenize`, `/v1/loads`, `/metrics`."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from conftest import serve_in_thread
from engines import ScriptedEngine, TokenizingEngine


def test_generate_text() -> None:
    engine = ScriptedEngine()
    with serve_in_thread(engine) as url:
        r = httpx.post(
            url + "/generate",
            json={"text": "Once", "sampling_params": {"max_new_tokens": 3, "temperature": 0, "unknown_knob": 1}},
        )
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["text"] == "Hello, world"
    assert j["meta_info"]["finish_reason"] == {"type": "length", "length": 3}
    assert j["meta_info"]["prompt_tokens"] == 7 and j["meta_info"]["completion_tokens"] == 3
    assert engine.requests[0].text == "Once"
    assert engine.requests[0].sampling_params == {"max_new_tokens": 3, "temperature": 0.0}


def test_generate_input_ids_stop_and_logprobs() -> None:
    engine = ScriptedEngine()
    with serve_in_thread(engine) as url:
        r = httpx.post(
            url + "/generate",
            json={"input_ids": [1, 2, 3], "sampling_params": {"stop": ","}, "return_logprob": True},
        )
    j = r.json()
    assert engine.requests[0].input_ids == [1, 2, 3]
    assert j["text"] == "Hello"
    assert j["meta_info"]["finish_reason"] == {"type": "stop", "matched": ","}
    assert j["meta_info"]["output_token_logprobs"][0] == [-0.5, 100, "Hello"]


def test_generate_stream_is_cumulative() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/generate", json={"text": "x", "stream": True})
    data = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert [c["text"] for c in chunks] == ["Hello", "Hello,", "Hello, world", "Hello, world!"]
    assert chunks[-1]["meta_info"]["finish_reason"] == {"type": "stop", "matched": None}
    assert chunks[0]["meta_info"]["finish_reason"] is None


GENERATE_INVALID: list[tuple[dict[str, Any], str]] = [
    ({}, "text"),
    ({"text": ["a", "b"]}, "text"),
    ({"text": 3}, "text"),
    ({"input_ids": []}, "input_ids"),
    ({"text": "a", "input_ids": [1]}, "input_ids"),
    ({"text": "a", "sampling_params": {"temperature": -2}}, "sampling_params.temperature"),
    ({"text": "a", "sampling_params": {"max_new_tokens": "lots"}}, "sampling_params.max_new_tokens"),
    ({"text": "a", "sampling_params": {"stop": [""]}}, "sampling_params.stop[0]"),
]


@pytest.mark.parametrize(("body", "param"), GENERATE_INVALID)
def test_generate_invalid(body: dict[str, Any], param: str) -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/generate", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param


def test_tokenize_and_detokenize() -> None:
    with serve_in_thread(TokenizingEngine()) as url:
        t = httpx.post(url + "/v1/tokenize", json={"prompt": "hi"}).json()
        chat = httpx.post(url + "/v1/tokenize", json={"messages": [{"role": "user", "content": "hi"}]}).json()
        d = httpx.post(url + "/v1/detokenize", json={"tokens": [104, 105]}).json()
        bad = httpx.post(url + "/v1/detokenize", json={"tokens": [-1]})
        both = httpx.post(url + "/v1/tokenize", json={"prompt": "a", "messages": []})
    assert t == {"tokens": [104, 105], "count": 2, "max_model_len": 4096}
    assert chat["count"] == len("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert d["prompt"] == "hi"
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tokens[0]"
    assert both.status_code == 400


def test_tokenize_without_tokenizer() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/v1/tokenize", json={"prompt": "hi"})
    assert r.status_code == 400 and "tokenizer" in r.json()["error"]["message"]


class LoadedEngine(ScriptedEngine):
    def get_load(self) -> dict[str, Any]:
        return {"num_waiting_reqs": 2, "num_used_tokens": 100, "max_total_num_tokens": 1000, "token_usage": 0.1}


def test_loads_shape() -> None:
    with serve_in_thread(LoadedEngine()) as url:
        j = httpx.get(url + "/v1/loads").json()
    load = j["loads"][0]
    assert load["num_running_reqs"] == 0 and load["num_waiting_reqs"] == 2 and load["token_usage"] == 0.1
    assert j["aggregate"]["total_waiting_reqs"] == 2 and j["dp_rank_count"] == 1


def test_loads_without_engine_load() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        j = httpx.get(url + "/v1/loads").json()
    assert j["loads"][0]["num_waiting_reqs"] == 0


def test_metrics_parse_as_prometheus() -> None:
    parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client is not installed")
    with serve_in_thread(ScriptedEngine()) as url:
        httpx.post(url + "/v1/completions", json={"prompt": "x"})
        text = httpx.get(url + "/metrics").text
    names = {f.name for f in parser.text_string_to_metric_families(text)}
    assert any("time_to_first_token" in n for n in names)
