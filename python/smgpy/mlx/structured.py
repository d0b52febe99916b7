"""Structured output for the MLX engine: JSON Schema, regex, Lark grammars, structural tags.

A request's constraint arrives in ``sampling_params`` under SGLang's keys (``json_schema``,
``regex``, ``ebnf``, ``structural_tag``; the server turns every API shape into one of them, and
forced tool calls into a grammar of the model's own tool-call format). At each decoding step
of a constrained request, every token that cannot continue the constrained output is masked
out, and the end tokens are allowed only once it is complete. The masks come from llguidance
through ``smgpy._native`` (``Vocabulary`` / ``Grammar`` / ``GrammarMatcher``): this module
reads the tokenizer's vocabulary as bytes, once per model, and compiles a request's
constraint (cached by the constraint's text, so a repeated schema compiles once).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from smgpy._native import Grammar, GrammarError, Vocabulary
from smgpy.engine import EngineRequestError

__all__ = ["StructuredOutput", "build_vocab", "constraint_of", "special_ids", "token_bytes"]

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")

# The engine keys, in the order they are looked for.
KEYS = ("json_schema", "regex", "ebnf", "structural_tag")


def _byte_level_alphabet() -> dict[str, int]:
    """The byte-level BPE alphabet (GPT-2 and most current models): the printable bytes of
    Latin-1 stand for themselves, the other 68 byte values are shifted to U+0100 onwards, in
    byte order."""
    printable = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    table: dict[str, int] = {}
    shifted = 0
    for b in range(256):
        if b in printable:
            table[chr(b)] = b
        else:
            table[chr(0x100 + shifted)] = b
            shifted += 1
    return table


def _decoder_kind(hf_tokenizer: Any) -> str | None:
    """``"byte_level"``, ``"sentencepiece"`` (``▁`` for spaces, ``<0xNN>`` byte tokens) or None."""
    backend = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        decoder = json.loads(backend.to_str()).get("decoder") or {}
    except (ValueError, AttributeError):
        return None
    parts = decoder.get("decoders") or [decoder]
    types = {p.get("type") for p in parts if isinstance(p, dict)}
    if "ByteLevel" in types:
        return "byte_level"
    if "ByteFallback" in types or "Metaspace" in types:
        return "sentencepiece"
    return None


def special_ids(hf_tokenizer: Any) -> set[int]:
    """Special tokens (chat markers, end of turn) and added tokens marked special."""
    ids = {int(i) for i in getattr(hf_tokenizer, "all_special_ids", ()) or ()}
    for i, added in (getattr(hf_tokenizer, "added_tokens_decoder", None) or {}).items():
        if getattr(added, "special", True):
            ids.add(int(i))
    return ids


def token_bytes(hf_tokenizer: Any) -> list[bytes | None]:
    """Each token id's bytes in decoded text; ``None`` where they cannot be told.

    Added and special tokens are their text (the decoder writes them into the output: a
    ``<tool_call>`` token is the text ``<tool_call>``); which of them may appear in constrained
    text is the vocabulary's decision (:class:`smgpy._native.Vocabulary`)."""
    size = len(hf_tokenizer)
    added = {int(i) for i in (getattr(hf_tokenizer, "added_tokens_decoder", None) or {})}
    added |= special_ids(hf_tokenizer)
    pieces = hf_tokenizer.convert_ids_to_tokens(list(range(size)))
    kind = _decoder_kind(hf_tokenizer)
    alphabet = _byte_level_alphabet() if kind == "byte_level" else {}
    out: list[bytes | None] = []
    for i, piece in enumerate(pieces):
        if not piece:
            out.append(None)
        elif i in added:
            out.append(piece.encode())
        elif kind == "byte_level":
            try:
                out.append(bytes(alphabet[c] for c in piece))
            except KeyError:
                out.append(None)
        elif kind == "sentencepiece":
            m = _BYTE_TOKEN.fullmatch(piece)
            out.append(bytes([int(m.group(1), 16)]) if m else piece.replace("\u2581", " ").encode())
        else:
            # Unknown decoder: decode the token alone; a piece of a multi-byte character cannot
            # be told this way and is left out.
            text = hf_tokenizer.decode([i])
            out.append(None if "\ufffd" in text else text.encode())
    return out


def build_vocab(hf_tokenizer: Any, end_ids: Iterable[int], size: int) -> Vocabulary:
    """The vocabulary for masks (0.3-0.8 s for SmolLM2's 49k tokens on a 2-core CPU, about half of it
    reading the tokenizer's pieces in Python, half building the token trie in Rust)."""
    return Vocabulary(
        token_bytes(hf_tokenizer), sorted(special_ids(hf_tokenizer)), sorted(int(t) for t in end_ids), size
    )


def constraint_of(sampling_params: Mapping[str, Any]) -> tuple[str, str] | None:
    """The constraint a request carries, as ``(key, text)``: SGLang's keys first, then an
    OpenAI ``response_format`` (from a client that calls the engine directly)."""
    found = [(k, sampling_params[k]) for k in KEYS if sampling_params.get(k) is not None]
    if len(found) > 1:
        raise EngineRequestError(f"only one structured-output key may be set, got {', '.join(k for k, _ in found)}")
    if found:
        key, value = found[0]
        if isinstance(value, str):
            return key, value
        if key in ("json_schema", "structural_tag"):
            return key, json.dumps(value)
        raise EngineRequestError(f"{key} must be a string")
    fmt = sampling_params.get("response_format")
    if isinstance(fmt, Mapping):
        if fmt.get("type") == "json_object":
            return "json_schema", '{"type": "object"}'
        if fmt.get("type") == "json_schema":
            spec = fmt.get("json_schema")
            schema = spec.get("schema") if isinstance(spec, Mapping) else None
            return "json_schema", json.dumps({} if schema is None else schema)
    return None


class StructuredOutput:
    """One model's structured output: its vocabulary (built once, on first use) and the compiled
    constraints (cached by the native vocabulary)."""

    def __init__(self, hf_tokenizer: Any, end_ids: Iterable[int], size: int) -> None:
        self._hf = hf_tokenizer
        self._end_ids = sorted(int(t) for t in end_ids)
        self._size = size
        self._vocab: Vocabulary | None = None
        self._lock = threading.Lock()

    def vocabulary(self) -> Vocabulary:
        """The vocabulary, built by the first caller (under a second for 49k tokens; it blocks, so callers
        on an event loop use :meth:`vocabulary_async`)."""
        with self._lock:
            if self._vocab is None:
                self._vocab = build_vocab(self._hf, self._end_ids, self._size)
            return self._vocab

    async def vocabulary_async(self) -> Vocabulary:
        if self._vocab is not None:
            return self._vocab
        return await asyncio.to_thread(self.vocabulary)

    async def grammar(self, sampling_params: Mapping[str, Any], compiled: Any = None) -> Grammar | None:
        """The compiled constraint of a request, or None; ``EngineRequestError`` (a 400) when it
        cannot be enforced. ``compiled`` is the grammar the server already compiled against
        this vocabulary (the request's ``grammar``): it is taken as it is."""
        if isinstance(compiled, Grammar):
            return compiled
        found = constraint_of(sampling_params)
        if found is None:
            return None
        vocab = await self.vocabulary_async()
        try:
            return await asyncio.to_thread(vocab.compile, *found)
        except GrammarError as e:
            raise EngineRequestError(str(e)) from None
