"""Scripted engines for tests: deterministic text split into tokens, no model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from smgpy.engine import EngineOverloaded, EngineRequestError

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class ScriptedEngine:
    """Yields ``script`` (a list of token strings) for every request.

    mode: ``"delta"`` (incremental text) or ``"cumulative"`` (sglang-style full text so far).
    delay: seconds to sleep before each token (a slow engine).
    raise_after: raise ``RuntimeError`` after that many tokens (a failing engine).
    finish: the final ``finish_reason`` dict.
    The engine records every request object, every aborted rid and every closed generator.
    """

    model_name = "scripted"
    chat_template = CHATML
    context_length = 4096

    def __init__(
        self,
        script: list[str] | None = None,
        *,
        mode: str = "delta",
        delay: float = 0.0,
        raise_after: int | None = None,
        finish: dict[str, Any] | None = None,
        error: Exception | None = None,
    ) -> None:
        self.script = script if script is not None else ["Hello", ",", " world", "!"]
        self.mode = mode
        self.delay = delay
        self.raise_after = raise_after
        self.finish = finish if finish is not None else {"type": "stop", "matched": None}
        self.error = error
        self.requests: list[Any] = []
        self.aborted: list[str] = []
        self.closed: list[str] = []
        self.abort_times: dict[str, float] = {}
        self.produced: dict[str, int] = {}

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        self.requests.append(obj)
        if self.error is not None:
            raise self.error
        rid = obj.rid
        text = ""
        limit = obj.sampling_params.get("max_new_tokens")
        script = self.script if limit is None else self.script[:limit]
        truncated = len(script) < len(self.script)
        n = len(script)
        try:
            for i, tok in enumerate(script):
                if self.delay:
                    await asyncio.sleep(self.delay)
                if self.raise_after is not None and i >= self.raise_after:
                    raise RuntimeError("scripted engine failure")
                text += tok
                self.produced[rid] = i + 1
                last = i == n - 1
                meta = {
                    "prompt_tokens": 7,
                    "completion_tokens": i + 1,
                    "cached_tokens": 0,
                    "finish_reason": ({"type": "length"} if truncated else self.finish) if last else None,
                }
                if obj.return_logprob:
                    meta["output_token_logprobs"] = [(-0.5, 100 + i, tok)]
                    k = obj.top_logprobs_num
                    meta["output_top_logprobs"] = [
                        [(-0.5, 100 + i, tok)] + [(-2.0 - j, j, f"t{j}") for j in range(k - 1)]
                    ]
                if self.mode == "delta":
                    yield {"delta": tok, "output_ids": [100 + i], "meta_info": meta}
                else:
                    yield {"text": text, "output_ids": list(range(100, 101 + i)), "meta_info": meta}
            if n == 0:
                yield {
                    "delta": "",
                    "output_ids": [],
                    "meta_info": {"prompt_tokens": 7, "completion_tokens": 0, "finish_reason": self.finish},
                }
        finally:
            self.closed.append(rid)

    def abort_request(self, rid: str) -> None:
        import time

        self.aborted.append(rid)
        self.abort_times[rid] = time.monotonic()


class EchoEngine(ScriptedEngine):
    """Answers with the rendered prompt's last line, token by token (for prompt tests)."""

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        self.script = [obj.text]
        async for out in super().generate_request(obj):
            yield out


class GroupEngine(ScriptedEngine):
    """Samples ``n`` choices of one request itself (``accepts_n``), as sglang does.

    Choice ``i`` yields ``script`` with ``f"[{i}]"`` before each token, and the choices' outputs
    interleave, each tagged with its ``index``. ``lengths`` cuts choice ``i`` to ``lengths[i]``
    tokens (finish ``length``).
    """

    accepts_n = True

    def __init__(self, script: list[str] | None = None, *, lengths: list[int] | None = None, **kw: Any) -> None:
        super().__init__(script, **kw)
        self.lengths = lengths

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        self.requests.append(obj)
        n = int(obj.sampling_params.get("n") or 1)
        rid = obj.rid
        scripts = [[f"[{i}]{t}" for t in self.script] for i in range(n)]
        if self.lengths is not None:
            scripts = [s[: self.lengths[i]] for i, s in enumerate(scripts)]
        try:
            for step in range(max(len(s) for s in scripts)):
                if self.delay:
                    await asyncio.sleep(self.delay)
                for i, script in enumerate(scripts):
                    if step >= len(script):
                        continue
                    last = step == len(script) - 1
                    cut = len(script) < len(self.script)
                    finish = ({"type": "length"} if cut else self.finish) if last else None
                    meta = {
                        "prompt_tokens": 7,
                        "completion_tokens": step + 1,
                        "cached_tokens": 0,
                        "finish_reason": finish,
                    }
                    out = {"delta": script[step], "output_ids": [100 + step], "meta_info": meta}
                    if n > 1:
                        out["index"] = i
                    self.produced[f"{rid}/{i}"] = step + 1
                    yield out
        finally:
            self.closed.append(rid)


class CharTokenizer:
    """One token per character (token id = code point): predictable counts for API tests."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


class TokenizingEngine(ScriptedEngine):
    """A ScriptedEngine that exposes a tokenizer (for /v1/tokenize, echo of token prompts, count_tokens)."""

    tokenizer = CharTokenizer()


__all__ = [
    "CHATML",
    "CharTokenizer",
    "EchoEngine",
    "EngineOverloaded",
    "EngineRequestError",
    "GroupEngine",
    "ScriptedEngine",
    "TokenizingEngine",
]


class HashEmbeddingEngine(ScriptedEngine):
    """A chat engine that also embeds: each text's vector counts its characters by code point
    modulo ``dim`` (unit length), so equal texts give equal vectors and tests can compute them.
    Answers in sglang's list-of-dicts shape with ``prompt_tokens`` = words of the text; token-id
    inputs count their ids. ``matryoshka_dimensions`` as given."""

    embedding_model_name = "hash-embed"

    def __init__(self, dim: int = 8, *, matryoshka: list[int] | None = None, max_tokens: int | None = 16) -> None:
        super().__init__()
        self.embedding_dimensions = dim
        self.matryoshka_dimensions = matryoshka or []
        self.embedding_max_tokens = max_tokens
        self.embed_requests: list[Any] = []

    @staticmethod
    def vector(items: Any, dim: int) -> list[float]:
        v = [0.0] * dim
        for x in items:
            v[(ord(x) if isinstance(x, str) else int(x)) % dim] += 1.0
        norm = sum(c * c for c in v) ** 0.5 or 1.0
        return [c / norm for c in v]

    async def embed_request(self, obj: Any) -> list[dict[str, Any]]:
        self.embed_requests.append(obj)
        await asyncio.sleep(0)
        if obj.text is not None:
            if any("refuse" in t for t in obj.text):
                raise EngineRequestError("this engine refuses texts that say refuse")
            return [
                {"embedding": self.vector(t, self.embedding_dimensions), "meta_info": {"prompt_tokens": len(t.split())}}
                for t in obj.text
            ]
        return [
            {"embedding": self.vector(ids, self.embedding_dimensions), "meta_info": {"prompt_tokens": len(ids)}}
            for ids in obj.input_ids
        ]
