"""The model's tokenizer in Rust (``smgpy._native.Tokenizer``): the same ids as the Python
tokenizer the MLX engine used before, for every shared conversation rendered with every fixture
template, and a streaming decoder that never differs from a full decode.

And the serving path built on it: an engine that takes ``input_ids`` and exposes the Rust
tokenizer gets ids from the server, never text to encode on its event loop.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from conftest import demo_gguf, serve_in_thread, shared_dir
from engines import ScriptedEngine
from smgpy import ChatTemplate
from smgpy._native import Tokenizer


@pytest.fixture(scope="module")
def tokenizers() -> tuple[Tokenizer, Any, str]:
    """(Rust tokenizer, transformers' fast tokenizer) of the demo model, from the same file."""
    from smgpy.mlx import resolve_model
    from transformers import AutoTokenizer

    model_dir = resolve_model(str(demo_gguf()))[0]
    hf = AutoTokenizer.from_pretrained(model_dir)
    return Tokenizer.from_file(f"{model_dir}/tokenizer.json", hf.bos_token), hf, hf.bos_token


def _renders() -> list[tuple[str, str]]:
    root = shared_dir() / "fixtures"
    conversations = json.loads((root / "conversations.json").read_text())
    specials = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
    out = []
    for path in sorted((root / "chat_templates").rglob("*.jinja")):
        template = ChatTemplate(path.read_text(), specials)
        for conv in conversations:
            try:
                text = template.render(
                    conv["messages"],
                    tools=conv.get("tools"),
                    add_generation_prompt=conv.get("add_generation_prompt", True),
                    **(conv.get("kwargs") or {}),
                )
            except ValueError:
                continue  # a template that refuses this conversation
            out.append((f"{path.stem}/{conv['name']}", text))
    return out


def test_ids_equal_the_python_tokenizers_on_every_fixture_render(tokenizers: tuple[Tokenizer, Any, str]) -> None:
    native, hf, bos = tokenizers
    renders = _renders()
    assert len(renders) > 500
    for name, text in renders:
        for special in (False, True):
            assert native.encode(text, special) == hf.encode(text, add_special_tokens=special), (name, special)
        # the engines' prompt rule: no special tokens added to a text that starts with BOS
        want = hf.encode(text, add_special_tokens=not text.startswith(bos))
        assert native.encode_prompt(text) == want, name
        assert native.decode(want) == hf.decode(want, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def test_the_streaming_decoder_equals_a_full_decode_at_every_prefix(tokenizers: tuple[Tokenizer, Any, str]) -> None:
    native, hf, _ = tokenizers
    rng = random.Random(5)
    texts = [
        "Plain ASCII text, with punctuation!",
        "Emoji 😀🎉🇫🇷 and accents: éàüñ, CJK: 漢字かな, Thai: ภาษาไทย",
        '<|im_start|>assistant\nTool call: <tool_call>{"x": 1}</tool_call><|im_end|>',
    ]
    # random ids too: byte-level pieces that split characters anywhere
    sequences = [hf.encode(t, add_special_tokens=False) for t in texts]
    sequences += [[rng.randrange(native.vocab_size) for _ in range(60)] for _ in range(20)]
    for ids in sequences:
        d = native.decoder()
        out = ""
        for i, token in enumerate(ids):
            out += d.push(token)
            full = hf.decode(ids[: i + 1], skip_special_tokens=False, clean_up_tokenization_spaces=False)
            assert full.rstrip("\ufffd").startswith(out), (ids[: i + 1], out, full)
        out += d.flush()
        assert out == hf.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def test_end_of_turn_ids_leave_no_text(tokenizers: tuple[Tokenizer, Any, str]) -> None:
    native, hf, _ = tokenizers
    eos = hf.convert_tokens_to_ids("<|im_end|>")
    d = native.decoder([eos])
    assert d.push(eos) == ""
    assert "".join(d.push(t) for t in hf.encode("Paris.", add_special_tokens=False)) + d.flush() == "Paris."


def test_an_engine_that_takes_ids_gets_them_from_the_server(tokenizers: tuple[Tokenizer, Any, str]) -> None:
    native, hf, bos = tokenizers

    class IdsEngine(ScriptedEngine):
        tokenizer = native
        accepts_input_ids = True
        context_length = 64

        async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
            assert obj.text is None and obj.input_ids, "the engine must get ids, not text"
            async for out in super().generate_request(obj):
                yield out

    engine = IdsEngine(["ok"])
    engine.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    with serve_in_thread(engine) as url:
        r = httpx.post(url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "héllo"}]})
        assert r.status_code == 200, r.text
        assert engine.requests[-1].input_ids == hf.encode("héllo\n", add_special_tokens=not "héllo".startswith(bos))
        r = httpx.post(url + "/v1/completions", json={"prompt": "abc", "max_tokens": 3})
        assert engine.requests[-1].input_ids == native.encode_prompt("abc")
        # the context is checked on those ids before the engine sees the request
        n = len(engine.requests)
        r = httpx.post(url + "/v1/completions", json={"prompt": "word " * 80, "max_tokens": 3})
        err = r.json()["error"]
        assert r.status_code == 400 and err["code"] == "context_length_exceeded" and err["param"] == "prompt"
        assert len(engine.requests) == n
        # /v1/tokenize answers from the Rust tokenizer
        t = httpx.post(url + "/v1/tokenize", json={"prompt": "héllo"}).json()
        assert t["tokens"] == native.encode("héllo")
        d = httpx.post(url + "/v1/detokenize", json={"tokens": t["tokens"]}).json()
        assert d["text"] == "héllo"
