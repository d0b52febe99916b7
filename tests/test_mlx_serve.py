"""MLXEngine behind ``smgpy.serve_oai``, through the ``openai`` SDK, on the real SmolLM2 model."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import smgpy
from conftest import demo_engine, demo_gguf  # noqa: E402

GGUF = demo_gguf()
if not hasattr(smgpy, "serve_oai"):
    pytest.skip("smgpy.serve_oai is not in this build yet", allow_module_level=True)

openai = pytest.importorskip("openai")
serve_in_thread = pytest.importorskip("conftest").serve_in_thread

from smgpy.mlx import MLXEngine  # noqa: E402

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
MODEL = "SmolLM2-135M-Instruct"
STORY = [{"role": "user", "content": "Write a long story about a dragon."}]


@pytest.fixture(scope="module")
def engine() -> Iterator[MLXEngine]:
    eng = demo_engine(max_running=2, max_waiting=1)
    yield eng
    eng.shutdown()


@pytest.fixture(scope="module")
def client(engine: MLXEngine) -> Iterator[Any]:
    with serve_in_thread(engine) as base:
        yield openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=120)


def mlx_lm_greedy_text(engine: MLXEngine, max_tokens: int) -> str:
    from mlx_lm import load, stream_generate

    model, tok = load(engine.model_path)
    prompt = tok.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=False)
    return "".join(r.text for r in stream_generate(model, tok, prompt, max_tokens=max_tokens))


def test_models_lists_the_engine_name(client: Any) -> None:
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_capital_of_france_streaming_and_not(client: Any, engine: MLXEngine) -> None:
    expected = mlx_lm_greedy_text(engine, 16)
    assert "Paris" in expected
    reply = client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=16)
    assert reply.choices[0].message.content == expected
    assert reply.choices[0].finish_reason == "stop"
    stream = client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        temperature=0,
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage = "", None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        usage = chunk.usage or usage
    assert text == expected
    assert usage is not None and usage.completion_tokens > 0
    # The same prompt again: its prefix comes from the cache.
    details = usage.prompt_tokens_details
    assert details is not None and (details.cached_tokens or 0) > 0


def test_n_choices_share_one_prefill(client: Any, engine: MLXEngine) -> None:
    engine.flush_cache()
    messages = [{"role": "user", "content": "Name three rivers of Europe, please."}]
    n_prompt = len(prompt_tokens(client, messages))
    before = engine.get_load()["prefilled_tokens"]
    reply = client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=6, n=2)
    prefilled = engine.get_load()["prefilled_tokens"] - before
    # One prefill of the prompt plus each choice's first step, not two prefills.
    assert prefilled == n_prompt + 1, (prefilled, n_prompt)
    alone = client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=6)
    assert [c.message.content for c in reply.choices] == [alone.choices[0].message.content] * 2
    assert reply.usage.prompt_tokens == n_prompt
    # Seeded sampling: each choice has its own stream, and the request is reproducible.
    sampled = [
        client.chat.completions.create(model=MODEL, messages=messages, temperature=1.0, max_tokens=8, n=2, seed=11)
        for _ in range(2)
    ]
    texts = [[c.message.content for c in r.choices] for r in sampled]
    assert texts[0] == texts[1]
    assert texts[0][0] != texts[0][1]


def prompt_tokens(client: Any, messages: list[dict[str, str]]) -> list[int]:
    """The prompt's token ids, as the server renders and tokenizes a chat request."""
    r = client.post("/tokenize", cast_to=object, body={"messages": messages})
    return list(r["tokens"])


def test_context_overflow_is_a_400_naming_both_numbers(client: Any) -> None:
    long = [{"role": "user", "content": "hello " * 9000}]
    n = len(prompt_tokens(client, long))
    assert n > 8192
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=long, max_tokens=4)
    assert f"{n} tokens" in info.value.message and "8192" in info.value.message
    assert info.value.status_code == 400
    # without max_tokens too: the prompt alone does not fit
    with pytest.raises(openai.BadRequestError, match=f"{n} tokens"):
        client.chat.completions.create(model=MODEL, messages=long)


def test_prompt_plus_max_tokens_overflow_is_a_400(client: Any) -> None:
    n = len(prompt_tokens(client, QUESTION))
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=8192 - n + 1)
    message = info.value.message
    assert f"({n} tokens)" in message and f"({8192 - n + 1})" in message and "8192" in message, message
    # streaming requests are refused with the status too, before any event
    with pytest.raises(openai.BadRequestError, match="8192"):
        client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=8192 - n + 1, stream=True)


def test_tokenize_matches_the_mlx_lm_tokenizer(client: Any, engine: MLXEngine) -> None:
    from pathlib import Path

    from mlx_lm.utils import load_tokenizer

    tok = load_tokenizer(Path(engine.model_path))
    text = "Hello world, héllo 😀 世界 <|im_start|>user"
    r = client.post("/tokenize", cast_to=object, body={"prompt": text})
    assert r["tokens"] == tok.encode(text) and r["count"] == len(r["tokens"])
    assert r["max_model_len"] == 8192
    # a chat request renders with the model's template exactly as mlx-lm's apply_chat_template
    assert prompt_tokens(client, QUESTION) == tok.apply_chat_template(QUESTION, add_generation_prompt=True)
    back = client.post("/detokenize", cast_to=object, body={"tokens": r["tokens"]})
    assert back["text"] == text


def test_penalties_change_greedy_output(client: Any) -> None:
    """A prompt that makes the model repeat: penalising repetition changes the greedy tokens."""
    repeat = [{"role": "user", "content": "Write the word cat ten times."}]

    def greedy(**kw: Any) -> str:
        r = client.chat.completions.create(model=MODEL, messages=repeat, temperature=0, max_tokens=12, **kw)
        return str(r.choices[0].message.content)

    plain = greedy()
    assert plain.lower().count("cat") >= 3, plain  # it does repeat
    assert greedy(frequency_penalty=2.0) != plain
    assert greedy(extra_body={"repetition_penalty": 1.5}) != plain


def test_without_max_tokens_generation_is_bounded_by_the_context() -> None:
    """No max_tokens: accepted, and the default (what remains of the context) ends the answer."""
    small = demo_engine(context_length=48, prefix_cache_bytes=0)
    try:
        with serve_in_thread(small) as base:
            c = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=120)
            r = c.chat.completions.create(
                model=MODEL, messages=QUESTION, temperature=0, extra_body={"ignore_eos": True}
            )
    finally:
        small.shutdown()
    assert r.choices[0].finish_reason == "length"
    assert r.usage is not None and r.usage.completion_tokens > 0
    assert r.usage.prompt_tokens + r.usage.completion_tokens == 48


def test_queue_full_is_503_or_429(client: Any, engine: MLXEngine) -> None:
    """max_running=2, max_waiting=1: with 3 long requests in, a 4th is refused."""
    errors: list[BaseException] = []
    stop = threading.Event()

    def long_request() -> None:
        try:
            stream = client.chat.completions.create(
                model=MODEL, messages=STORY, max_tokens=300, stream=True, extra_body={"ignore_eos": True}
            )
            for _ in stream:
                if stop.is_set():
                    stream.close()
                    return
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=long_request) for _ in range(3)]
    for t in threads:
        t.start()
        time.sleep(0.3)
    try:
        deadline = time.monotonic() + 30
        while engine.get_load()["num_waiting_reqs"] < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        with pytest.raises(openai.APIStatusError) as info:
            client.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=4)
        assert info.value.status_code in (429, 503)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors
    deadline = time.monotonic() + 30
    while engine.get_load()["num_running_reqs"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert engine.get_load()["num_running_reqs"] == 0  # disconnected clients freed their slots


def test_async_client_disconnect_frees_the_slot(client: Any, engine: MLXEngine) -> None:
    async def scenario() -> None:
        aclient = openai.AsyncOpenAI(base_url=str(client.base_url), api_key="x", max_retries=0, timeout=120)
        stream = await aclient.chat.completions.create(
            model=MODEL, messages=STORY, max_tokens=400, stream=True, extra_body={"ignore_eos": True}
        )
        async for _ in stream:
            break
        await stream.close()
        await aclient.close()

    asyncio.run(scenario())
    deadline = time.monotonic() + 30
    while engine.get_load()["num_running_reqs"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.get_load()["num_running_reqs"] == 0


def test_client_token_ids_and_sampling_fields_never_reach_mlx_unchecked(client: Any) -> None:
    """Once a SIGSEGV (an id past the embedding table) and 500s with Python exception text."""
    import httpx

    base = str(client.base_url).removesuffix("/v1/")
    for path, body, param in [
        ("/v1/completions", {"prompt": [60000]}, "prompt[0]"),
        ("/v1/completions", {"prompt": [49152]}, "prompt[0]"),
        ("/generate", {"input_ids": [1000000000000]}, "input_ids[0]"),
        ("/v1/chat/completions", {"messages": QUESTION, "logit_bias": {"x": 1}}, "logit_bias.x"),
        ("/v1/chat/completions", {"messages": QUESTION, "logit_bias": {"5": "a"}}, "logit_bias.5"),
        ("/v1/chat/completions", {"messages": QUESTION, "n": 3}, "n"),
    ]:
        r = httpx.post(base + path, json=body, timeout=120)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, (path, r.text)
    for seed in (-1, -(2**63)):
        r = httpx.post(
            base + "/v1/chat/completions",
            json={"messages": QUESTION, "seed": seed, "temperature": 1.0, "max_tokens": 2},
            timeout=120,
        )
        assert r.status_code == 200, r.text
    assert httpx.post(base + "/v1/completions", json={"prompt": [1, 2, 49151], "max_tokens": 1}).status_code == 200
