"""`/v1/embeddings` through the official `openai` SDK and raw HTTP: the request forms, the answer's
shape, `encoding_format`, `dimensions`, `usage`, and every refusal as a 400 naming its parameter.
These run on a scripted engine (tests/engines.py); tests/test_embeddings_mlx.py runs the real
MLX encoder against sentence-transformers' own vectors."""

from __future__ import annotations

import asyncio
import base64
import struct
import time
from typing import Any

import httpx
import pytest
from conftest import serve_in_thread
from engines import HashEmbeddingEngine, ScriptedEngine

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def engine() -> HashEmbeddingEngine:
    """The engine conftest's `url` fixture serves."""
    return HashEmbeddingEngine(dim=8, matryoshka=[4])


@pytest.fixture(scope="module")
def client(url: str) -> Any:
    return openai.OpenAI(base_url=url + "/v1", api_key="x")


def post(url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(url + "/v1/embeddings", json=body, timeout=30)


def test_the_sdk_gets_one_vector_per_input_in_order(client: Any) -> None:
    texts = ["abc", "hello world", "zz"]
    r = client.embeddings.create(model="hash-embed", input=texts)
    assert [d.index for d in r.data] == [0, 1, 2]
    for d, t in zip(r.data, texts, strict=True):
        assert d.embedding == pytest.approx(HashEmbeddingEngine.vector(t, 8), abs=1e-6)
    assert r.model == "hash-embed" and r.object == "list"
    assert r.usage.prompt_tokens == 1 + 2 + 1 and r.usage.total_tokens == 4


def test_float_and_base64_carry_the_same_numbers(url: str) -> None:
    as_float = post(url, {"input": ["abc", "de"], "encoding_format": "float"}).json()
    as_b64 = post(url, {"input": ["abc", "de"], "encoding_format": "base64"}).json()
    for f, b in zip(as_float["data"], as_b64["data"], strict=True):
        raw = base64.b64decode(b["embedding"])
        assert list(struct.unpack(f"<{len(raw) // 4}f", raw)) == pytest.approx(f["embedding"], abs=0)
        assert f["object"] == "embedding"


def test_token_ids_in_both_forms(url: str, engine: HashEmbeddingEngine) -> None:
    one = post(url, {"input": [1, 2, 3]}).json()
    assert one["data"][0]["embedding"] == pytest.approx(HashEmbeddingEngine.vector([1, 2, 3], 8), abs=1e-6)
    assert engine.embed_requests[-1].input_ids == [[1, 2, 3]] and engine.embed_requests[-1].text is None
    many = post(url, {"input": [[5], [6, 7]]}).json()
    assert [d["index"] for d in many["data"]] == [0, 1]
    assert many["usage"] == {"prompt_tokens": 3, "total_tokens": 3}


def test_dimensions_only_where_the_model_was_trained_for_them(url: str) -> None:
    full = post(url, {"input": "abcdefgh", "dimensions": 8}).json()["data"][0]["embedding"]
    assert len(full) == 8
    cut = post(url, {"input": "abcdefgh", "dimensions": 4}).json()["data"][0]["embedding"]
    assert len(cut) == 4 and sum(x * x for x in cut) == pytest.approx(1.0, abs=1e-6)
    assert cut == pytest.approx([x / sum(y * y for y in full[:4]) ** 0.5 for x in full[:4]], abs=1e-6)
    r = post(url, {"input": "abc", "dimensions": 3})
    assert r.status_code == 400 and r.json()["error"]["param"] == "dimensions"
    assert "[4]" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": ""}, "input"),
        ({"input": []}, "input"),
        ({}, "input"),
        ({"input": ["a", ""]}, "input[1]"),
        ({"input": ["a", 3]}, "input[1]"),
        ({"input": [[1], "a"]}, "input[1]"),
        ({"input": [[1], []]}, "input[1]"),
        ({"input": [-1]}, "input[0]"),
        ({"input": [1.5]}, "input[0]"),
        ({"input": {"text": "a"}}, "input"),
        ({"input": True}, "input"),
        ({"input": ["x"] * 2049}, "input"),
        ({"input": list(range(17))}, "input"),
        ({"input": [[1], list(range(17))]}, "input[1]"),
        ({"input": "a", "encoding_format": "hex"}, "encoding_format"),
        ({"input": "a", "dimensions": 0}, "dimensions"),
        ({"input": "a", "dimensions": "4"}, "dimensions"),
    ],
)
def test_bad_requests_are_400_naming_the_parameter(url: str, body: dict[str, Any], param: str) -> None:
    r = post(url, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error" and err["message"]


def test_over_length_is_a_context_length_error(url: str) -> None:
    err = post(url, {"input": list(range(17))}).json()["error"]
    assert err["code"] == "context_length_exceeded" and "16" in err["message"]


def test_the_sdk_sees_a_400_as_bad_request(client: Any) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="hash-embed", input="")
    assert e.value.body["param"] == "input"


def test_an_engine_refusal_is_a_400_with_its_message(url: str) -> None:
    r = post(url, {"input": ["fine", "please refuse"]})
    assert r.status_code == 400 and "refuses" in r.json()["error"]["message"]


def test_models_lists_the_embedding_model_beside_the_chat_model(url: str) -> None:
    ids = [m["id"] for m in httpx.get(url + "/v1/models").json()["data"]]
    assert ids == ["scripted", "hash-embed"]
    assert httpx.get(url + "/v1/models/hash-embed").json()["id"] == "hash-embed"


def test_chat_still_works_beside_embeddings(client: Any) -> None:
    r = client.chat.completions.create(model="scripted", messages=[{"role": "user", "content": "hi"}])
    assert r.choices[0].message.content == "Hello, world!"


def test_an_engine_without_embed_request_says_so() -> None:
    with serve_in_thread(ScriptedEngine()) as url:
        r = post(url, {"input": "hello"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["param"] == "model" and "no embedding model" in err["message"]
    assert "--embedding-model" in err["message"]


class _EmbedOnly:
    """An engine with `embed_request` alone, answering a NumPy-free list of plain vectors."""

    model_name = "only-embed"

    async def embed_request(self, obj: Any) -> list[list[float]]:
        return [[1.0, 0.0]] * len(obj.text or obj.input_ids)


def test_an_embedding_only_engine_serves_embeddings_and_refuses_generation() -> None:
    with serve_in_thread(_EmbedOnly()) as url:
        r = post(url, {"input": ["a", "b"]}).json()
        assert [d["embedding"] for d in r["data"]] == [[1.0, 0.0], [1.0, 0.0]]
        assert r["usage"]["prompt_tokens"] == 0
        gen = httpx.post(url + "/v1/completions", json={"prompt": "hi", "max_tokens": 2}, timeout=30)
    assert gen.status_code == 400 and "embedding model only" in gen.json()["error"]["message"]


class _SlowEmbed:
    """An engine whose `embed_request` takes its time, and records being cancelled."""

    model_name = "slow-embed"

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.finished: list[str] = []

    async def embed_request(self, obj: Any) -> list[list[float]]:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            self.cancelled.append(obj.rid)
            raise
        self.finished.append(obj.rid)
        return [[1.0]] * len(obj.text or obj.input_ids)


def test_a_client_that_hangs_up_cancels_its_embedding_request() -> None:
    engine = _SlowEmbed()
    with serve_in_thread(engine) as url:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + "/v1/embeddings", json={"input": "x"}, timeout=0.5)
        deadline = time.monotonic() + 4
        while not engine.cancelled and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(engine.cancelled) == 1 and not engine.finished
        # A client that waits still gets its answer.
        r = httpx.post(url + "/v1/embeddings", json={"input": "x"}, timeout=30)
        assert r.status_code == 200 and len(engine.finished) == 1
