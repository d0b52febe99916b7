"""Stop sequences through the server: matched on decoded text across token boundaries, never
leaked in a stream, reported with `matched_stop`, and the engine request aborted at the match."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest
from conftest import serve_in_thread
from engines import ScriptedEngine

MSG = [{"role": "user", "content": "What is the capital of France?"}]
SCRIPT = ["The", " capital", " of", " France", " is", " P", "ar", "is", ".", " It", " is", " big", "."] + ["x"] * 200


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)


def stream_text(url: str, body: dict) -> tuple[list[str], dict]:
    r = httpx.post(url + "/v1/chat/completions", json={**body, "stream": True}, timeout=30)
    pieces, final = [], {}
    for line in r.text.splitlines():
        if not line.startswith("data: {"):
            continue
        chunk = json.loads(line[6:])
        for ch in chunk["choices"]:
            if ch["delta"].get("content"):
                pieces.append(ch["delta"]["content"])
            if ch["finish_reason"]:
                final = ch
    return pieces, final


@pytest.mark.parametrize("stop", ["Paris", ["zzz", "Paris"], ["aris", "Paris"], " Pa"])
def test_stop_across_tokens_non_streaming(stop: str | list[str]) -> None:
    engine = ScriptedEngine(SCRIPT, delay=0.002)
    with serve_in_thread(engine) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "stop": stop}).json()
    choice = r["choices"][0]
    expected_cut = "The capital of France is" + ("" if stop == " Pa" else " ")
    assert choice["message"]["content"] == expected_cut
    assert choice["finish_reason"] == "stop"
    stops = [stop] if isinstance(stop, str) else stop
    assert choice["matched_stop"] in stops
    assert engine.aborted, "the engine request was not aborted at the stop"


def test_stop_streaming_never_leaks() -> None:
    engine = ScriptedEngine(SCRIPT, delay=0.002)
    with serve_in_thread(engine) as url:
        pieces, final = stream_text(url, {"messages": MSG, "stop": ["Paris"]})
    assert "".join(pieces) == "The capital of France is "
    assert all("P" not in p for p in pieces)
    assert final["finish_reason"] == "stop" and final["matched_stop"] == "Paris"


def test_include_stop_str_in_output() -> None:
    with serve_in_thread(ScriptedEngine(SCRIPT)) as url:
        r = httpx.post(
            url + "/v1/chat/completions", json={"messages": MSG, "stop": "Paris", "include_stop_str_in_output": True}
        ).json()
        pieces, _ = stream_text(url, {"messages": MSG, "stop": "Paris", "include_stop_str_in_output": True})
    assert r["choices"][0]["message"]["content"] == "The capital of France is Paris"
    assert "".join(pieces) == "The capital of France is Paris"


def test_held_text_released_on_non_match_and_at_end() -> None:
    with serve_in_thread(ScriptedEngine(["Par", "ty", " at ", "Pa"])) as url:
        pieces, final = stream_text(url, {"messages": MSG, "stop": ["Paris"]})
    assert "".join(pieces) == "Party at Pa"
    assert final["finish_reason"] == "stop" and final.get("matched_stop") is None


def test_stop_token_id_reported() -> None:
    engine = ScriptedEngine(["Hi", "!"], finish={"type": "stop", "matched": 2})
    with serve_in_thread(engine) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "stop_token_ids": [2]}).json()
    assert r["choices"][0]["matched_stop"] == 2
    assert engine.requests[0].sampling_params["stop_token_ids"] == [2]


def test_stop_passed_down_and_sdk_sees_cut_text() -> None:
    engine = ScriptedEngine(SCRIPT)
    with serve_in_thread(engine) as url:
        r = client(url).chat.completions.create(model="x", messages=MSG, stop=["France"])
    assert r.choices[0].message.content == "The capital of "
    assert engine.requests[0].sampling_params["stop"] == ["France"]


def test_tokens_generated_after_the_match() -> None:
    """The engine is aborted within about one step of the match (a step here is 20 ms)."""
    engine = ScriptedEngine(SCRIPT, delay=0.02)
    with serve_in_thread(engine) as url:
        httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "stop": "Paris"})
        time.sleep(0.1)
    rid = engine.aborted[0]
    match_token = SCRIPT.index("is") + 1  # tokens up to and including the one completing "Paris"
    assert engine.produced[rid] - match_token <= 1


def test_too_many_and_empty_stops_rejected() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "stop": [str(i) for i in range(65)]})
        assert r.status_code == 400 and r.json()["error"]["param"] == "stop"
        r = httpx.post(url + "/v1/chat/completions", json={"messages": MSG, "stop": ""})
        assert r.status_code == 400
