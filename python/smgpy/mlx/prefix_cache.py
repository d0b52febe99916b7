"""Prefix (prompt) cache: reuse the KV cache of an earlier prompt that shares a prefix.

A thin policy layer over mlx-lm's ``LRUPromptCache`` (a token trie with byte-bounded LRU
eviction). It adds the two things the engine needs: the number of reused tokens (reported as
``cached_tokens``) and the guarantee that at least one prompt token is left to run, because the
model must see a token to produce the next-token logits.

Only the MLX thread touches this object.
"""

from __future__ import annotations

from typing import Any

from smgpy.mlx.mlx_lm_api import LRUPromptCache, can_trim_prompt_cache, trim_prompt_cache

__all__ = ["PrefixCache"]

_MODEL_KEY = "model"  # one engine serves one model


class PrefixCache:
    """Byte-bounded LRU of KV caches keyed by the tokens they hold."""

    def __init__(self, max_bytes: int, max_entries: int = 64) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._lru = self._new_lru()
        self.hits = 0
        self.queries = 0

    def _new_lru(self) -> LRUPromptCache | None:
        return LRUPromptCache(max_size=self.max_entries, max_bytes=self.max_bytes) if self.max_bytes > 0 else None

    @property
    def nbytes(self) -> int:
        return self._lru.nbytes if self._lru is not None else 0

    def __len__(self) -> int:
        return len(self._lru) if self._lru is not None else 0

    def fetch(self, tokens: list[int]) -> tuple[list[Any] | None, int]:
        """Return ``(cache copy or None, cached length)``; the caller runs ``tokens[cached:]``."""
        if self._lru is None or len(tokens) < 2:
            return None, 0
        self.queries += 1
        cache, rest = self._lru.fetch_nearest_cache(_MODEL_KEY, tokens)
        if cache is None:
            return None, 0
        cached = len(tokens) - len(rest)
        if cached >= len(tokens):
            # Exact hit: give the last prompt token back so the model produces logits for it.
            if not can_trim_prompt_cache(cache):
                return None, 0
            trim_prompt_cache(cache, cached - (len(tokens) - 1))
            cached = len(tokens) - 1
        if cached <= 0:
            return None, 0
        self.hits += 1
        return cache, cached

    def clear(self) -> None:
        """Drop every entry."""
        self._lru = self._new_lru()

    def insert(self, tokens: list[int], cache: list[Any]) -> None:
        """Remember ``cache``, which holds exactly ``tokens``."""
        if self._lru is None or not tokens or not cache:
            return
        if sum(c.nbytes for c in cache) > self.max_bytes:
            return  # would evict everything and still not fit
        self._lru.insert_cache(_MODEL_KEY, list(tokens), cache)
