"""Structured output for the MLX engine: ``response_format`` ``json_object`` / ``json_schema``.

At each decoding step of a request that asked for JSON, every token that would make the output
stop being the start of a JSON document is masked out, and the end-of-sequence tokens are
allowed only once the document is complete. The masks are computed in Rust
(``smgpy._native.JsonVocab`` / ``JsonMatcher``); this module reads the tokenizer's vocabulary as
bytes and turns a request's parameters into matcher options.

What is enforced: the output is one JSON document (RFC 8259, UTF-8, no lone surrogates); an
object for ``json_object``; for ``json_schema``, a document valid against the schema, for the
keywords structured outputs use (``type``, ``properties``, ``required``, ``items``,
``minItems``/``maxItems``, ``enum``, ``const``, ``anyOf`` / ``oneOf`` (alternatives that start
differently, or objects tagged by a ``const`` key), local ``$ref``). Keys are written in the
schema's order, and the output ends with the document (no trailing whitespace). A schema with
other constraints (``pattern``, ``format``, ``minimum``...) is not enforced beyond being valid
JSON (an object when its top level is one), and a warning is logged.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from smgpy._native import JsonMatcher, JsonVocab
from smgpy.engine import EngineRequestError

__all__ = ["JsonSpec", "build_vocab", "json_spec", "make_matcher", "token_bytes"]

log = logging.getLogger("smgpy.mlx")

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


@dataclass(frozen=True)
class JsonSpec:
    """What a request asked for: a JSON document, an object or not, maybe under a schema."""

    object_only: bool
    #: The JSON Schema to enforce, as JSON text; None for any document.
    schema: str | None = None


def json_spec(sampling_params: Mapping[str, Any]) -> JsonSpec | None:
    """The structured output a request asked for (``response_format`` or sglang's
    ``json_schema``), or None."""
    fmt = sampling_params.get("response_format")
    schema: Any = sampling_params.get("json_schema")
    if isinstance(fmt, Mapping):
        kind = fmt.get("type")
        if kind == "json_object":
            return JsonSpec(object_only=True)
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
    object_only = bool(schema.get("type") == "object" or "properties" in schema or not schema)
    return JsonSpec(object_only=object_only, schema=json.dumps(schema) if schema else None)


def make_matcher(vocab: JsonVocab, spec: JsonSpec) -> JsonMatcher:
    """A matcher for one sequence. A schema that uses what cannot be enforced (``pattern``,
    ``format``, ``minimum``...) is logged and the output kept a valid JSON document."""
    if spec.schema is not None:
        try:
            return vocab.matcher(schema=spec.schema)
        except ValueError as e:
            log.warning("structured output: %s; the output is kept valid JSON, not checked against the schema", e)
    return vocab.matcher(object_only=spec.object_only)
