"""Structured output on the real MLX engine (SmolLM2-135M-Instruct, greedy), through the official
SDKs and real HTTP: JSON Schema (with `pattern`, `format`, bounds), JSON objects, regular
expressions, choices, Lark grammars and structural tags on every endpoint that takes them, and
the 400s for constraints that cannot be enforced. Plus the pieces: the vocabulary read as bytes,
the request keys, the native matcher."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from conftest import demo_gguf

GGUF = demo_gguf()
openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
pydantic = pytest.importorskip("pydantic")
jsonschema = pytest.importorskip("jsonschema")
from smgpy import _native  # noqa: E402
from smgpy.engine import EngineRequestError  # noqa: E402
from smgpy.mlx.structured import constraint_of, token_bytes  # noqa: E402

CAPITAL = [{"role": "user", "content": 'What is the capital of France? Answer in JSON with the key "capital".'}]
PERSON = [
    {"role": "user", "content": 'Return a JSON object with keys "name" and "age" for a person called Ann who is 30.'}
]
OBJECT = {"type": "json_object"}
# A schema with what the old recognizer could not enforce: a pattern, a format, bounds, a
# length, no extra keys.
EVENT = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"},
        "day": {"type": "string", "format": "date"},
        "guests": {"type": "integer", "minimum": 2, "maximum": 9},
        "price": {"type": "number", "exclusiveMinimum": 0},
        "title": {"type": "string", "minLength": 3, "maxLength": 20},
    },
    "required": ["code", "day", "guests", "price", "title"],
    "additionalProperties": False,
}
EVENT_ASK = [{"role": "user", "content": "Make up a dinner event as JSON."}]


@pytest.fixture(scope="module")
def engine(mlx_engine: Any) -> Any:
    return mlx_engine


@pytest.fixture(scope="module")
def client(mlx_url: str) -> Any:
    return openai.OpenAI(base_url=mlx_url + "/v1", api_key="x", max_retries=0, timeout=120)


def chat(client: Any, messages: Any = CAPITAL, max_tokens: int = 60, **extra: Any) -> Any:
    return client.chat.completions.create(
        model="m", messages=messages, max_tokens=max_tokens, temperature=0, extra_body=extra or None
    ).choices[0]


def test_json_object_gives_a_json_object(client: Any) -> None:
    plain = chat(client, max_tokens=40).message.content
    choice = client.chat.completions.create(
        model="m", messages=CAPITAL, max_tokens=40, response_format=OBJECT, temperature=0
    ).choices[0]
    assert choice.finish_reason == "stop"
    assert json.loads(choice.message.content) == {"capital": "Paris"}, (choice.message.content, plain)
    # Without the format the model wraps its answer; the mask is what made it bare JSON.
    assert plain != choice.message.content


def test_pattern_format_and_bounds_are_enforced(client: Any) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "event", "schema": EVENT, "strict": True}}
    r = client.chat.completions.create(
        model="m", messages=EVENT_ASK, max_tokens=120, response_format=fmt, temperature=0
    )
    doc = json.loads(r.choices[0].message.content)
    checker = jsonschema.Draft202012Validator(EVENT, format_checker=jsonschema.FormatChecker())
    checker.validate(doc)
    assert re.fullmatch(r"[A-Z]{3}-[0-9]{2}", doc["code"]) and 2 <= doc["guests"] <= 9
    assert list(doc) == list(EVENT["properties"])


def test_openai_sdk_parse_with_a_pydantic_model(client: Any) -> None:
    class Person(pydantic.BaseModel):  # type: ignore[misc]
        name: str
        age: int

    r = client.chat.completions.parse(model="m", messages=PERSON, max_tokens=60, response_format=Person, temperature=0)
    person = r.choices[0].message.parsed
    assert isinstance(person, Person) and person.name and isinstance(person.age, int)


def test_responses_parse_with_a_pydantic_model(client: Any) -> None:
    class Capital(pydantic.BaseModel):  # type: ignore[misc]
        capital: str

    r = client.responses.parse(
        model="m", input=CAPITAL[0]["content"], text_format=Capital, max_output_tokens=40, temperature=0
    )
    assert r.output_parsed == Capital(capital="Paris")


def test_anthropic_sdk_parse_with_a_pydantic_model(mlx_url: str) -> None:
    """`messages.parse(output_format=Model)` sends `output_config.format`; the answer is the
    model's JSON (issue #22: it was ignored and the model answered in prose)."""

    class Capital(pydantic.BaseModel):  # type: ignore[misc]
        capital: str

    c = anthropic.Anthropic(base_url=mlx_url, api_key="x", max_retries=0)
    r = c.messages.parse(
        model="m", max_tokens=40, messages=CAPITAL, output_format=Capital, extra_body={"temperature": 0}
    )
    assert r.parsed_output == Capital(capital="Paris")


def test_regex_and_choice_in_every_request_shape(client: Any) -> None:
    for extra in ({"structured_outputs": {"regex": "[0-9]{3}"}}, {"guided_regex": "[0-9]{3}"}, {"regex": "[0-9]{3}"}):
        out = chat(client, max_tokens=10, **extra)
        assert re.fullmatch("[0-9]{3}", out.message.content), (extra, out.message.content)
        assert out.finish_reason == "stop"
    yes_no = [{"role": "user", "content": "Is Paris in France? Answer yes or no."}]
    for extra in ({"structured_outputs": {"choice": ["yes", "no"]}}, {"guided_choice": ["yes", "no"]}):
        assert chat(client, yes_no, max_tokens=5, **extra).message.content in ("yes", "no")


def test_a_lark_grammar(client: Any) -> None:
    grammar = 'start: "The answer is " ANSWER "."\nANSWER: /[A-Z][a-z]+/'
    for extra in ({"structured_outputs": {"grammar": grammar}}, {"guided_grammar": grammar}, {"ebnf": grammar}):
        text = chat(client, max_tokens=20, **extra).message.content
        assert re.fullmatch(r"The answer is [A-Z][a-z]+\.", text), (extra, text)


def test_json_in_every_request_shape(client: Any) -> None:
    schema = {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}
    for extra in (
        {"guided_json": schema},
        {"guided_json": json.dumps(schema)},
        {"structured_outputs": {"json": schema}},
        {"structured_outputs": {"json_object": True}},
        {"json_schema": json.dumps(schema)},
    ):
        assert json.loads(chat(client, max_tokens=40, **extra).message.content) == {"capital": "Paris"}, extra


def test_completions_generate_and_structural_tags(client: Any, mlx_url: str) -> None:
    r = client.completions.create(
        model="m", prompt="The year the Eiffel Tower was finished:", max_tokens=8, temperature=0,
        extra_body={"regex": "[12][0-9]{3}"},
    )  # fmt: skip
    assert re.fullmatch("[12][0-9]{3}", r.choices[0].text)
    body = {"text": "Paris is in", "sampling_params": {"max_new_tokens": 8, "temperature": 0, "regex": " [A-Z][a-z]+"}}
    out = httpx.post(mlx_url + "/generate", json=body, timeout=120).json()
    assert re.fullmatch(" [A-Z][a-z]+", out["text"]), out
    tag = {
        "type": "structural_tag",
        "structures": [{"begin": "<city>", "schema": {"type": "string", "enum": ["Paris"]}, "end": "</city>"}],
        "triggers": ["<city>"],
    }
    ask = [{"role": "user", "content": "Write <city> then the capital of France as a JSON string, then </city>."}]
    text = chat(client, ask, max_tokens=30, response_format=tag).message.content
    if "<city>" in text:
        assert '<city>"Paris"</city>' in text


def test_invalid_constraints_are_400_naming_the_field_on_every_endpoint(client: Any, mlx_url: str) -> None:
    unique = {"type": "array", "uniqueItems": True}
    bad = {"type": "json_schema", "json_schema": {"name": "x", "schema": unique}}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=CAPITAL, response_format=bad)
    assert e.value.body["param"] == "response_format.json_schema.schema"
    assert 'Unimplemented keys: ["uniqueItems"]' in e.value.body["message"]
    with pytest.raises(openai.BadRequestError, match="strnig") as e:
        chat(client, guided_json={"type": "strnig"})
    assert e.value.body["param"] == "guided_json"
    with pytest.raises(openai.BadRequestError, match="regular expression") as e:
        client.completions.create(model="m", prompt="x", extra_body={"structured_outputs": {"regex": "a(b"}})
    assert e.value.body["param"] == "structured_outputs.regex"
    with pytest.raises(openai.BadRequestError, match="nothing_here") as e:
        chat(client, guided_grammar="start: nothing_here")
    with pytest.raises(openai.BadRequestError, match="GBNF"):
        chat(client, ebnf='root ::= "a"')
    with pytest.raises(openai.BadRequestError, match="strnig") as e:
        client.responses.create(
            model="m", input="x", text={"format": {"type": "json_schema", "name": "x", "schema": {"type": "strnig"}}}
        )
    assert e.value.body["param"] == "text.format.schema"
    r = httpx.post(mlx_url + "/generate", json={"text": "x", "sampling_params": {"regex": "(?<=a)b"}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "sampling_params.regex"
    body = {
        "model": "m",
        "max_tokens": 5,
        "messages": CAPITAL,
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "not": {}}}},
    }
    r = httpx.post(mlx_url + "/v1/messages", json=body)
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert "not" in r.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError, match="response_format.type"):
        client.completions.create(model="m", prompt="x", extra_body={"response_format": {"type": "xml"}})
    with pytest.raises(openai.BadRequestError, match="not valid JSON"):
        chat(client, guided_json="{nope")
    with pytest.raises(openai.BadRequestError, match="both ask"):
        chat(client, guided_json={}, guided_regex="a")


def test_the_server_compiles_each_constraint_once_and_hands_it_to_the_engine(
    client: Any, engine: Any, monkeypatch: Any
) -> None:
    """The engine declares its vocabulary; the server compiles a request's constraint against it
    and the request carries the result (``grammar``), so the engine compiles nothing itself."""
    import smgpy

    assert isinstance(engine.vocabulary, smgpy.Vocabulary)
    seen: list[Any] = []
    generate = engine.generate_request

    async def recording(obj: Any) -> Any:
        seen.append(obj.grammar)
        async for out in generate(obj):
            yield out

    async def no_compiling_here() -> Any:
        raise AssertionError("the engine compiled a constraint the server had compiled")

    monkeypatch.setattr(engine, "generate_request", recording)
    monkeypatch.setattr(engine._structured, "vocabulary_async", no_compiling_here)
    doc = json.loads(chat(client, max_tokens=40, response_format=OBJECT).message.content)
    assert doc == {"capital": "Paris"}
    assert isinstance(seen[-1], smgpy.Grammar)
    chat(client, max_tokens=3)
    assert seen[-1] is None


def test_streamed_equals_complete(client: Any) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "event", "schema": EVENT}}
    args: dict[str, Any] = dict(model="m", messages=EVENT_ASK, max_tokens=120, response_format=fmt, temperature=0)
    full = client.chat.completions.create(**args).choices[0].message.content
    pieces = [c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **args)]
    assert "".join(pieces) == full


def test_truncated_output_is_a_prefix_the_constraint_accepts(client: Any, engine: Any) -> None:
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "List three colors as JSON."}], max_tokens=12,
        response_format=OBJECT, temperature=0,
    )  # fmt: skip
    choice = r.choices[0]
    assert choice.finish_reason == "length" and choice.message.content.lstrip().startswith("{")


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


def test_sampled_choices_stay_valid(client: Any) -> None:
    r = client.chat.completions.create(
        model="m", messages=PERSON, max_tokens=60, response_format=OBJECT, n=3, temperature=1.0, seed=7
    )
    assert len(r.choices) == 3
    for c in r.choices:
        assert c.message.content.lstrip().startswith("{")
        if c.finish_reason == "stop":
            assert isinstance(json.loads(c.message.content), dict)


def test_vocabulary_bytes_are_what_decoding_gives(engine: Any) -> None:
    hf = engine._hf
    tb = token_bytes(hf)
    assert len(tb) == len(hf)
    checked = 0
    for i in range(0, len(hf), 7):
        text = hf.decode([i])
        if "\ufffd" in text:
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
    assert token_bytes(_SentencePieceLike()) == [b"</s>", b" {", b'"a"', b": 1}", b"\n", b"\xe6"]


def test_which_requests_are_constrained() -> None:
    assert constraint_of({}) is None
    assert constraint_of({"response_format": {"type": "text"}}) is None
    assert constraint_of({"response_format": {"type": "json_object"}}) == ("json_schema", '{"type": "object"}')
    assert constraint_of({"json_schema": '{"type": "array"}'}) == ("json_schema", '{"type": "array"}')
    assert constraint_of({"json_schema": {"type": "array"}}) == ("json_schema", '{"type": "array"}')
    assert constraint_of({"regex": "a+"}) == ("regex", "a+")
    assert constraint_of({"ebnf": 'start: "a"'}) == ("ebnf", 'start: "a"')
    with pytest.raises(EngineRequestError, match="only one"):
        constraint_of({"regex": "a", "ebnf": "b"})


def bits(mask: bytes | None, size: int) -> list[int]:
    assert mask is not None
    words = [int.from_bytes(mask[i : i + 4], "little") for i in range(0, len(mask), 4)]
    return [(words[i // 32] >> (i % 32)) & 1 for i in range(size)]


def test_native_matcher() -> None:
    # Tokens: the 4 bytes of `{"a"`, then `:1}`, an end token and a special token.
    tokens: list[bytes | None] = [b"{", b'"', b"a", b":1}", b"<|end|>", b"<|im_start|>"]
    vocab = _native.Vocabulary(tokens, [4, 5], [4], 8)
    assert len(vocab) == 8
    grammar = vocab.compile("json_schema", '{"type":"object","properties":{"a":{"const":1}},"required":["a"]}')
    m = grammar.matcher()
    assert bits(m.step(None), 8) == [1, 0, 0, 0, 0, 0, 0, 0]
    for t in (0, 1, 2):
        m.accept(t)
    assert bits(m.step(1), 8) == [0, 0, 0, 1, 0, 0, 0, 0]
    with pytest.raises(_native.GrammarError):
        m.accept(2)
    m2 = grammar.matcher()
    for t in (0, 1, 2, 1, 3):
        m2.accept(t)
    assert m2.is_accepting and list(m2.mask()) == [0, 0, 0, 0, 1, 0, 0, 0]
    assert m2.step(4) is None and m2.is_stopped
    with pytest.raises(_native.GrammarError, match="uniqueItems"):
        vocab.compile("json_schema", '{"type": "array", "uniqueItems": true}')
    with pytest.raises(_native.GrammarError, match="unknown constraint key"):
        vocab.compile("grammar", "x")
    assert isinstance(_native.GrammarError("x"), ValueError)
