"""Structured output for the MLX engine: ``response_format`` ``json_object`` / ``json_schema``.

At each decoding step of a request that asked for JSON, every token that would make the output
stop being the start of a JSON document is masked out, and the end-of-sequence tokens are
allowed only once the document is complete. The masks are computed in Rust
(``smgpy._native.JsonVocab`` / ``JsonMatcher``); this module reads the tokenizer's vocabulary as
bytes and turns a request's parameters into matcher options.

What is enforced: the output is one JSON document (RFC 8259, UTF-8, no lone surrogates); an
object for ``json_object`` and for a ``json_schema`` whose top level is an object. The schema's
properties, types and required keys are not enforced: the model is steered by the schema only
through the prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from smgpy._native import JsonVocab
from smgpy.engine import EngineRequestError

__all__ = ["json_object_only", "token_bytes", "build_vocab"]

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


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


def token_bytes(hf_tokenizer: Any) -> list[bytes | None]:
    """Each token id's bytes in decoded text; None for special and added tokens (chat markers,
    end of turn) and for tokens whose bytes cannot be told."""
    size = len(hf_tokenizer)
    special = set(getattr(hf_tokenizer, "all_special_ids", ()) or ())
    special.update(int(i) for i in (getattr(hf_tokenizer, "added_tokens_decoder", None) or {}))
    pieces = hf_tokenizer.convert_ids_to_tokens(list(range(size)))
    kind = _decoder_kind(hf_tokenizer)
    alphabet = _byte_level_alphabet() if kind == "byte_level" else {}
    out: list[bytes | None] = []
    for i, piece in enumerate(pieces):
        if i in special or not piece:
            out.append(None)
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


def build_vocab(hf_tokenizer: Any, end_ids: Iterable[int]) -> JsonVocab:
    """The vocabulary for JSON masks (a few hundred milliseconds for a 150k-token vocabulary)."""
    return JsonVocab(token_bytes(hf_tokenizer), sorted(int(t) for t in end_ids))


def json_object_only(sampling_params: Mapping[str, Any]) -> bool | None:
    """Whether a request asked for JSON: None if not, else whether the document must be an
    object (``json_object``, or a ``json_schema`` whose top level is an object)."""
    fmt = sampling_params.get("response_format")
    schema: Any = sampling_params.get("json_schema")
    if isinstance(fmt, Mapping):
        kind = fmt.get("type")
        if kind == "json_object":
            return True
        if kind == "json_schema":
            spec = fmt.get("json_schema")
            schema = (spec.get("schema") if isinstance(spec, Mapping) else None) or schema or {}
    if schema is None:
        return None
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise EngineRequestError(f"json_schema is not valid JSON: {e}") from None
    if not isinstance(schema, Mapping):
        raise EngineRequestError("json_schema must be a JSON object (a JSON Schema)")
    return bool(schema.get("type") == "object" or "properties" in schema or not schema)
