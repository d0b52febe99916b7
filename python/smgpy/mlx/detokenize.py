"""Incremental detokenisation that never splits a multi-byte character.

Decoding token by token is wrong for byte-level BPE: one emoji can span several tokens, and
``decode([t])`` alone gives U+FFFD for each part. This decoder keeps a small window of recent
tokens, decodes the window, and emits only the new text once it no longer ends in a partial
character (the same idea as vLLM's prefix/read offsets, written for a plain HF tokenizer).

Special tokens are decoded into the text (tool-call and reasoning markers such as
``<tool_call>`` or ``<think>`` must reach smgpy's parsers); only the tokens in ``drop`` (end of
turn, padding) are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

__all__ = ["IncrementalDecoder", "TextDecoder", "end_of_turn_ids"]


class TextDecoder(Protocol):
    """One sequence's ids to text deltas: ``smgpy._native.Decoder`` (the model's tokenizer.json
    in Rust) or :class:`IncrementalDecoder` (a Hugging Face tokenizer in Python)."""

    def push(self, token: int, /) -> str: ...
    def flush(self) -> str: ...


# Tokens that end a turn or pad: never part of the visible text. Markers not in this list
# (``<tool_call>``, ``<think>``, ``[TOOL_CALLS]``, ``<|python_tag|>``...) are kept.
_END_OF_TURN = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<|eom_id|>",
    "<end_of_turn>",
    "</s>",
    "<|return|>",
    "<pad>",
    "<|pad|>",
    "[PAD]",
    "<｜end▁of▁sentence｜>",
)


def end_of_turn_ids(hf_tokenizer: Any, eos_ids: Iterable[int]) -> frozenset[int]:
    """EOS ids, the pad id and any known end-of-turn token present in the vocabulary."""
    ids = set(eos_ids)
    pad = getattr(hf_tokenizer, "pad_token_id", None)
    if pad is not None:
        ids.add(int(pad))
    vocab = hf_tokenizer.get_vocab()
    ids.update(vocab[t] for t in _END_OF_TURN if t in vocab)
    return frozenset(ids)


class IncrementalDecoder:
    """Turns a stream of token ids into text deltas."""

    __slots__ = ("_tok", "_drop", "_ids", "_prefix", "_read")

    def __init__(self, hf_tokenizer: Any, drop: frozenset[int]) -> None:
        self._tok = hf_tokenizer
        self._drop = drop
        self._ids: list[int] = []
        self._prefix = 0  # start of the window that gives context to the next decode
        self._read = 0  # tokens before this index have been emitted

    def _decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False))

    def push(self, token: int) -> str:
        """Add one token; return the text it completes (maybe empty)."""
        if token in self._drop:
            return ""
        self._ids.append(token)
        done = self._decode(self._ids[self._prefix : self._read]) if self._read > self._prefix else ""
        full = self._decode(self._ids[self._prefix :])
        if len(full) <= len(done) or full.endswith("\ufffd"):
            return ""  # an incomplete UTF-8 sequence: wait for the next token
        self._prefix, self._read = self._read, len(self._ids)
        # Keep the list short: nothing before the window is ever decoded again.
        if self._prefix > 64:
            del self._ids[: self._prefix]
            self._read -= self._prefix
            self._prefix = 0
        return full[len(done) :]

    def flush(self) -> str:
        """Text still held back at the end (an incomplete character is emitted as U+FFFD)."""
        if self._read >= len(self._ids):
            return ""
        done = self._decode(self._ids[self._prefix : self._read]) if self._read > self._prefix else ""
        full = self._decode(self._ids[self._prefix :])
        self._read = len(self._ids)
        return full[len(done) :]
