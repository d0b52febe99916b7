"""MLXEngine on the real SmolLM2-135M-Instruct model, driven directly through the engine protocol.

Slow by nature (CPU, ~10 tokens/s): one engine per module, small max_tokens everywhere.
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any

import pytest
from conftest import demo_engine, demo_gguf  # noqa: E402
from smgpy.engine import EngineOverloaded, EngineRequestError, GenerateReqInput

GGUF = demo_gguf()

from smgpy.mlx import MLXEngine  # noqa: E402
from smgpy.mlx.detokenize import IncrementalDecoder, end_of_turn_ids  # noqa: E402

QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def engine(mlx_engine: Any) -> Any:
    return mlx_engine


@pytest.fixture(scope="module")
def reference(engine: MLXEngine) -> Any:
    """mlx-lm's own model and tokenizer, loaded from the same converted directory."""
    from mlx_lm import load

    return load(engine.model_path)


def chat(engine: MLXEngine, *turns: str) -> str:
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
    return str(engine._hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))


async def collect(engine: MLXEngine, obj: GenerateReqInput) -> dict[str, Any]:
    text, ids, outs = "", [], []
    async for out in engine.generate_request(obj):
        text += out["delta"]
        ids += out["output_ids"]
        outs.append(out)
    return {"text": text, "ids": ids, "meta": outs[-1]["meta_info"], "outs": outs}


def run(engine: MLXEngine, prompt: str, **params: Any) -> dict[str, Any]:
    extra = {k: params.pop(k) for k in ("return_logprob", "top_logprobs_num", "rid") if k in params}
    return asyncio.run(collect(engine, GenerateReqInput(text=prompt, sampling_params=params, **extra)))


def mlx_lm_greedy(reference: Any, prompt: str, max_tokens: int) -> list[int]:
    from mlx_lm import stream_generate

    model, tok = reference
    return [r.token for r in stream_generate(model, tok, prompt, max_tokens=max_tokens)]


def test_exposes_what_the_server_needs(engine: MLXEngine) -> None:
    assert engine.model_name == "SmolLM2-135M-Instruct"
    assert engine.context_length == 8192
    assert engine.eos_token_ids == [2]
    assert engine.special_tokens["eos_token"] == "<|im_end|>"
    assert "<|im_start|>" in (engine.chat_template or "")
    assert engine.tokenizer.decode(engine.tokenizer.encode("Hello world")) == "Hello world"
    assert set(engine.get_load()) >= {"num_running_reqs", "num_waiting_reqs", "num_used_tokens"}


def test_greedy_matches_mlx_lm(engine: MLXEngine, reference: Any) -> None:
    prompt = chat(engine, QUESTION)
    out = run(engine, prompt, temperature=0, max_new_tokens=16)
    assert "Paris" in out["text"]
    assert out["ids"] == mlx_lm_greedy(reference, prompt, 16)
    assert out["meta"]["finish_reason"] == {"type": "stop", "matched": None}
    assert out["meta"]["completion_tokens"] == len(out["ids"])
    assert "<|im_end|>" not in out["text"]


def test_concurrent_requests_equal_sequential(engine: MLXEngine) -> None:
    prompts = [chat(engine, q) for q in (QUESTION, "Name a color.", "What is 2+2?", "Say hi.")]
    sequential = [run(engine, p, temperature=0, max_new_tokens=6, ignore_eos=True)["ids"] for p in prompts]

    async def together() -> list[dict[str, Any]]:
        objs = [
            GenerateReqInput(text=p, sampling_params={"temperature": 0, "max_new_tokens": 6, "ignore_eos": True})
            for p in prompts
        ]
        return await asyncio.gather(*(collect(engine, o) for o in objs))

    assert [o["ids"] for o in asyncio.run(together())] == sequential


def test_greedy_alone_and_batched_equal_mlx_lm_stream_generate(engine: MLXEngine, reference: Any) -> None:
    """Token-identical to mlx-lm's own `stream_generate`, alone and in one batch."""
    prompts = [chat(engine, q) for q in (QUESTION, "Name three colors.", "Count to five.", "Describe a cat.")]
    want = [mlx_lm_greedy(reference, p, 24) for p in prompts]
    assert [run(engine, p, temperature=0, max_new_tokens=24)["ids"] for p in prompts] == want

    async def together() -> list[dict[str, Any]]:
        objs = [GenerateReqInput(text=p, sampling_params={"temperature": 0, "max_new_tokens": 24}) for p in prompts]
        return await asyncio.gather(*(collect(engine, o) for o in objs))

    assert [o["ids"] for o in asyncio.run(together())] == want


def test_abort_one_does_not_disturb_others(engine: MLXEngine) -> None:
    prompts = [chat(engine, q) for q in ("Name a color.", "What is 2+2?", QUESTION)]
    params = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}
    expected = [run(engine, p, **params)["ids"] for p in prompts[:2]]

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        victim = GenerateReqInput(text=prompts[2], sampling_params=dict(params, max_new_tokens=200), rid="victim")

        async def aborted() -> dict[str, Any]:
            outs = []
            async for out in engine.generate_request(victim):
                outs.append(out)
                if len(outs) == 2:
                    engine.abort_request("victim")
            return outs[-1]

        others = [GenerateReqInput(text=p, sampling_params=dict(params)) for p in prompts[:2]]
        results = await asyncio.gather(aborted(), *(collect(engine, o) for o in others))
        return list(results[1:]), results[0]

    others, last = asyncio.run(scenario())
    assert last["meta_info"]["finish_reason"]["type"] == "abort"
    assert last["meta_info"]["completion_tokens"] < 10
    assert [o["ids"] for o in others] == expected
    assert engine.get_load()["num_running_reqs"] == 0


def test_prefix_cache_second_turn(engine: MLXEngine, reference: Any) -> None:
    first = chat(engine, QUESTION)
    answer = run(engine, first, temperature=0, max_new_tokens=16)
    second = chat(engine, QUESTION, answer["text"], "And of Germany?")
    out = run(engine, second, temperature=0, max_new_tokens=8)
    assert out["meta"]["cached_tokens"] > 0
    assert out["ids"] == mlx_lm_greedy(reference, second, 8)
    again = run(engine, second, temperature=0, max_new_tokens=8)
    assert again["meta"]["cached_tokens"] == again["meta"]["prompt_tokens"] - 1
    assert again["ids"] == out["ids"]


def test_seeded_sampling_reproducible_alone_and_in_a_batch(engine: MLXEngine) -> None:
    prompt = chat(engine, "Tell me a story.")
    params = {"temperature": 1.0, "top_p": 0.95, "seed": 1234, "max_new_tokens": 8, "ignore_eos": True}
    alone = run(engine, prompt, **params)["ids"]
    assert run(engine, prompt, **params)["ids"] == alone

    async def batch() -> list[dict[str, Any]]:
        objs = [GenerateReqInput(text=prompt, sampling_params=dict(params)) for _ in range(2)]
        objs.append(GenerateReqInput(text=prompt, sampling_params=dict(params, seed=99)))
        return await asyncio.gather(*(collect(engine, o) for o in objs))

    outs = asyncio.run(batch())
    assert outs[0]["ids"] == alone and outs[1]["ids"] == alone
    assert outs[2]["ids"] != alone


def test_n_samples_share_a_prefill(engine: MLXEngine) -> None:
    out = run(engine, chat(engine, QUESTION), temperature=0, max_new_tokens=5, n=2)
    finals = [o for o in out["outs"] if o["meta_info"]["finish_reason"] is not None]
    assert sorted(o["index"] for o in finals) == [0, 1]
    by_index: dict[int, list[int]] = {0: [], 1: []}
    for o in out["outs"]:
        by_index[o["index"]] += o["output_ids"]
    assert by_index[0] == by_index[1]


def test_logprobs(engine: MLXEngine) -> None:
    out = run(engine, chat(engine, QUESTION), temperature=0, max_new_tokens=3, return_logprob=True, top_logprobs_num=3)
    for o in out["outs"]:
        ((lp, tok, _),) = o["meta_info"]["output_token_logprobs"]
        top = o["meta_info"]["output_top_logprobs"][0]
        assert tok == o["output_ids"][0] and len(top) == 3
        assert top[0][1] == tok and abs(top[0][0] - lp) < 1e-5 and lp <= 0


def test_logprobs_beside_requests_without(engine: MLXEngine) -> None:
    """The decode step normalises only rows that report logprobs: a request asking for them in a
    batch of requests that do not gets every token's, equal to what it gets alone."""
    prompt = chat(engine, QUESTION)
    params = {"temperature": 0, "max_new_tokens": 8, "ignore_eos": True}
    alone = run(engine, prompt, return_logprob=True, top_logprobs_num=2, **params)

    async def together() -> list[dict[str, Any]]:
        plain = [GenerateReqInput(text=chat(engine, q), sampling_params=params) for q in ("Say hi.", "Count to 3.")]
        asking = GenerateReqInput(text=prompt, sampling_params=params, return_logprob=True, top_logprobs_num=2)
        return await asyncio.gather(*(collect(engine, o) for o in (plain[0], asking, plain[1])))

    outs = asyncio.run(together())
    batched = [o["meta_info"]["output_token_logprobs"][0] for o in outs[1]["outs"] if o["output_ids"]]
    want = [o["meta_info"]["output_token_logprobs"][0] for o in alone["outs"] if o["output_ids"]]
    assert len(batched) == len(want) == 8
    for (lp, tok, text), (lp0, tok0, text0) in zip(batched, want, strict=True):
        assert (tok, text) == (tok0, text0) and abs(lp - lp0) < 1e-4 and lp <= 0
    assert all("output_token_logprobs" not in o["meta_info"] for r in (outs[0], outs[2]) for o in r["outs"])


def test_stop_token_ids_and_sampling_options(engine: MLXEngine) -> None:
    prompt = chat(engine, QUESTION)
    greedy = run(engine, prompt, temperature=0, max_new_tokens=6)["ids"]
    out = run(engine, prompt, temperature=0, max_new_tokens=6, stop_token_ids=[greedy[2]])
    assert out["ids"] == greedy[:3]
    assert out["meta"]["finish_reason"] == {"type": "stop", "matched": greedy[2]}
    biased = run(engine, prompt, temperature=0, max_new_tokens=2, logit_bias={str(greedy[0]): -100.0})
    assert biased["ids"][0] != greedy[0]
    penalised = run(
        engine,
        prompt,
        temperature=0.7,
        top_k=20,
        min_p=0.05,
        seed=3,
        repetition_penalty=1.2,
        frequency_penalty=0.5,
        presence_penalty=0.5,
        min_new_tokens=3,
        max_new_tokens=4,
    )
    assert penalised["meta"]["completion_tokens"] >= 3


def test_context_overflow_is_refused_before_compute(engine: MLXEngine) -> None:
    async def go(ids: list[int], **params: Any) -> None:
        async for _ in engine.generate_request(GenerateReqInput(input_ids=ids, sampling_params=params)):
            pass

    with pytest.raises(EngineRequestError, match=r"8200.*8192"):
        asyncio.run(go([42] * 8200))
    with pytest.raises(EngineRequestError, match=r"8000.*500.*8192"):
        asyncio.run(go([42] * 8000, max_new_tokens=500))


def test_sampling_is_checked_by_the_servers_rules(engine: MLXEngine) -> None:
    """An engine called directly holds sampling to the HTTP routes' rules (one validator):
    top_k 0 and -1 mean no limit, as in mlx-lm and vLLM; the errors are the server's."""
    from smgpy._native import check_sampling_params

    async def go(**params: Any) -> list[int]:
        out: list[int] = []
        obj = GenerateReqInput(input_ids=[42, 43], sampling_params={"max_new_tokens": 2, **params})
        async for o in engine.generate_request(obj):
            out += o["output_ids"]
        return out

    assert len(asyncio.run(go(top_k=0, temperature=0.5, seed=1))) == 2
    assert len(asyncio.run(go(top_k=-1, temperature=0.5, seed=1))) == 2
    for bad, message in (
        ({"top_k": -2}, "top_k must be at least 1, or 0 or -1 for no limit, got -2"),
        ({"top_p": 1.5}, "top_p must be in (0, 1], got 1.5"),
        ({"temperature": -1.0}, "temperature must be between 0 and 100, got -1"),
        ({"n": 0}, "n must be between 1 and 128, got 0"),
        ({"max_new_tokens": 0}, "max_tokens must be at least 1"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            check_sampling_params(bad)
        with pytest.raises(EngineRequestError, match=re.escape(message)):
            asyncio.run(go(**bad))


def test_disconnect_frees_the_slot(engine: MLXEngine) -> None:
    async def scenario() -> None:
        gen = engine.generate_request(
            GenerateReqInput(text=chat(engine, QUESTION), sampling_params={"max_new_tokens": 500, "ignore_eos": True})
        )
        await gen.__anext__()
        await gen.aclose()  # what a server does when the client goes away
        for _ in range(100):
            if engine.get_load()["num_running_reqs"] == 0:
                return
            await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert engine.get_load()["num_running_reqs"] == 0


def test_queue_full_is_overloaded() -> None:
    small = demo_engine(max_running=1, max_waiting=1, prefix_cache_bytes=0)
    try:
        prompt = chat(small, QUESTION)

        async def scenario() -> None:
            long = {"max_new_tokens": 400, "ignore_eos": True}
            first = small.generate_request(GenerateReqInput(text=prompt, sampling_params=long, rid="a"))
            await first.__anext__()  # running
            second = small.generate_request(GenerateReqInput(text=prompt, sampling_params=long, rid="b"))
            task = asyncio.ensure_future(second.__anext__())  # waiting
            await asyncio.sleep(0.05)
            with pytest.raises(EngineOverloaded, match="full"):
                await small.generate_request(GenerateReqInput(text=prompt, sampling_params=long)).__anext__()
            small.abort_request("a")
            small.abort_request("b")
            await first.aclose()
            await task
            await second.aclose()

        asyncio.run(scenario())
    finally:
        small.shutdown()


def test_sampling_defaults_from_generation_config_and_explicit(engine: MLXEngine, tmp_path: Any) -> None:
    # The converted demo model has no generation_config.json: a copy of its directory with one.
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    for f in os.scandir(engine.model_path):
        (model_dir / f.name).symlink_to(f.path)
    (model_dir / "generation_config.json").write_text(
        '{"temperature": 0.0, "top_k": 1, "do_sample": true, "eos_token_id": 2}'
    )
    assert engine.default_sampling == {}
    with pytest.raises(ValueError, match="unknown default sampling keys"):
        MLXEngine(str(model_dir), default_sampling={"temprature": 0.5})
    eng = MLXEngine(str(model_dir), prefix_cache_bytes=0, default_sampling={"top_p": 0.9})
    try:
        assert eng.default_sampling == {"temperature": 0.0, "top_k": 1.0, "top_p": 0.9}
        prompt = chat(eng, QUESTION)
        # No temperature in the request: the model's default (greedy) applies, not 1.0.
        assert (
            run(eng, prompt, max_new_tokens=12)["ids"] == run(engine, prompt, temperature=0, max_new_tokens=12)["ids"]
        )
    finally:
        eng.shutdown()
    explicit = MLXEngine(
        str(model_dir), prefix_cache_bytes=0, default_sampling={"temperature": 0.7}, generation_config=False
    )
    try:
        assert explicit.default_sampling == {"temperature": 0.7}
    finally:
        explicit.shutdown()


def test_decoder_keeps_markers_and_whole_characters(engine: MLXEngine) -> None:
    hf = engine._hf
    drop = end_of_turn_ids(hf, engine.eos_token_ids)
    text = "<|im_start|>héllo 😀 世界<|im_end|>"
    dec = IncrementalDecoder(hf, drop)
    parts = [dec.push(t) for t in hf.encode(text, add_special_tokens=False)]
    parts.append(dec.flush())
    assert all("\ufffd" not in p for p in parts)
    assert "".join(parts) == "<|im_start|>héllo 😀 世界"


def test_prefix_cache_is_bounded_by_bytes_with_lru_eviction(reference: Any) -> None:
    """Room for two prompts: a third evicts the least recently used one, not the oldest."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    model, _ = reference
    one = make_prompt_cache(model)
    model(mx.array([[42]]), cache=one)
    per_token = sum(c.keys[..., :1, :].nbytes + c.values[..., :1, :].nbytes for c in one)  # KV bytes of a token
    length = 30
    # The prompt alone: the one generated token ends the request before any step feeds it back.
    entry = length * per_token
    bound = entry * 5 // 2
    small = demo_engine(prefix_cache_bytes=bound)
    prompts = {name: [base + i for i in range(length)] for name, base in (("a", 1000), ("b", 2000), ("c", 3000))}

    def cached(name: str) -> int:
        async def go() -> int:
            obj = GenerateReqInput(
                input_ids=prompts[name], sampling_params={"temperature": 0, "max_new_tokens": 1, "ignore_eos": True}
            )
            return int((await collect(small, obj))["meta"]["cached_tokens"])

        n = asyncio.run(go())
        load = small.get_load()
        assert 0 < load["prefix_cache_bytes"] <= bound
        return n

    try:
        assert cached("a") == 0 and cached("b") == 0
        assert small.get_load()["prefix_cache_bytes"] == 2 * entry
        assert cached("a") == length - 1  # a hit, and now "b" is the least recently used
        assert cached("c") == 0  # over the bound: "b" goes
        assert small.get_load()["prefix_cache_entries"] == 2
        assert cached("a") == length - 1
        assert cached("b") == 0
    finally:
        small.shutdown()
