"""Prefix (prompt) cache: reuse the model state of an earlier prompt that shares a prefix.

Agent loops resend a growing conversation each turn, so most of a prompt was seen a moment ago.
An entry holds a model state (one cache object per layer) and the tokens it covers. A new prompt
reuses the entry that covers most of its prefix:

* **Trimmable entries** (plain attention: keys and values can be cut back) serve any shared
  prefix, cut to the first token where the prompts differ.
* **Untrimmable entries** (recurrent state, a rotated sliding window, hybrids of those) can only
  serve a prompt that starts with *all* of their tokens. So the state is snapshotted where later
  prompts are likely to diverge: at the end of each prompt (agent turns diverge inside the
  previous answer, e.g. when a template drops the last turn's reasoning), at the point where a
  prompt diverged from a stored one (the last point two renders agreed: the next turn diverges
  there again), and every ``checkpoint_block`` tokens of a long prefill.

Snapshots are cheap: MLX arrays are immutable values, so a snapshot shares buffers with the live
cache until the live one is written.

Eviction is LRU within three tiers, lowest first: block checkpoints, ordinary entries, entries a
client pinned with a cache key. With a disk tier (:mod:`smgpy.mlx.prefix_disk`) an entry evicted
from memory stays findable on disk and is loaded back on a hit.

mlx-lm's ``LRUPromptCache`` is a token trie with one LRU: it has no snapshots of untrimmable
state at chosen points, no tiers and no disk, so this module keeps its own index. The longest
common prefix against every entry is a vectorised numpy comparison (about 20 us for 30k tokens;
entries are bounded by ``max_entries``), so a lookup stays well under a millisecond.

Only the MLX thread touches this object.
"""

from __future__ import annotations

import copy
import itertools
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from smgpy.mlx.mlx_lm_api import can_trim_prompt_cache, trim_prompt_cache
from smgpy.mlx.prefix_disk import DiskEntry, DiskStore, WriteJob

__all__ = ["Hit", "PrefixCache"]

log = logging.getLogger("smgpy.mlx")

# Eviction tiers: lower tiers go first.
TIER_BLOCK = 0
TIER_PLAIN = 1
TIER_PINNED = 2

# An entry goes to disk once it has stood this long without being superseded: an agent's turns
# follow each other quickly, and each one's entry replaces the last (a dense model's state
# covers every prefix of itself), so most of them never need writing.
_WRITE_DELAY_S = 1.0
# Entries waiting for their delay; a burst beyond this skips the oldest ones' disk copies.
_MAX_PENDING_WRITES = 16
# States handed to the writer thread at once (each keeps its buffers alive until written).
_MAX_IN_FLIGHT = 2


@dataclass(eq=False)
class _Entry:
    tokens: np.ndarray  # int32, the tokens the state covers
    prompt_len: int  # how many of them were prompt (the rest was generated)
    cache: list[Any] | None  # None: on disk only
    nbytes: int
    trimmable: bool
    tier: int
    used: int
    disk: DiskEntry | None = None
    job: WriteJob | None = None  # its disk write, while in flight
    born: float = 0.0


@dataclass
class Hit:
    """A lookup's answer: a private copy of the state and how many prompt tokens it covers."""

    cache: list[Any] | None
    cached: int
    # Absolute prompt positions worth a snapshot while this prompt is prefilled (untrimmable
    # models only): where the prompt diverged from a stored one.
    checkpoints: list[int] = field(default_factory=list)


_MISS = Hit(None, 0)


def _trimmable(cache: list[Any]) -> bool:
    """Whether the state can be trimmed back to any shorter prefix of its tokens. Not a chunked
    attention layer's that has dropped its front (``start_position``: Llama 4's), which mlx-lm's
    and mlx-vlm's ``ChunkedKVCache`` call trimmable although it cannot go back past that point."""
    if not can_trim_prompt_cache(cache):
        return False
    return not any(getattr(c, "start_position", 0) for c in cache)


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


class PrefixCache:
    """Byte-bounded, tiered LRU of model states keyed by the tokens they hold."""

    def __init__(
        self,
        max_bytes: int,
        max_entries: int = 64,
        *,
        disk: DiskStore | None = None,
        checkpoint_block: int = 4096,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.checkpoint_block = checkpoint_block
        self._disk = disk
        self._entries: list[_Entry] = []
        self._clock = itertools.count(1)
        self._pending: deque[_Entry] = deque()  # waiting for their write delay
        self.hits = 0
        self.queries = 0
        self.cached_tokens = 0  # prompt tokens served from the cache, summed
        self.disk_hits = 0
        # Prompts that diverged inside a stored entry's prompt part (a re-rendered history, an
        # edited message, or a different conversation sharing a system prompt).
        self.prompt_divergences = 0
        if disk is not None:
            for d in disk.entries():
                self._entries.append(
                    _Entry(
                        np.asarray(d.tokens, dtype=np.int32),
                        d.prompt_len,
                        None,
                        0,
                        d.trimmable,
                        TIER_PLAIN,
                        next(self._clock),
                        d,
                    )
                )

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0

    @property
    def nbytes(self) -> int:
        """Bytes held in memory."""
        return sum(e.nbytes for e in self._entries if e.cache is not None)

    @property
    def disk_bytes(self) -> int:
        return self._disk.nbytes if self._disk is not None else 0

    def __len__(self) -> int:
        return len(self._entries)

    # ----- lookup -----

    def fetch(self, tokens: list[int]) -> Hit:
        """The entry covering most of ``tokens``' prefix; the caller runs ``tokens[cached:]``.

        At least one prompt token is always left to run: the model must see a token to give
        the next token's logits.
        """
        if not self.enabled or len(tokens) < 2:
            return _MISS
        self.queries += 1
        query = np.asarray(tokens, dtype=np.int32)
        last = len(tokens) - 1
        best: _Entry | None = None
        best_use = 0
        deepest = 0  # the longest prefix shared with any entry
        deepest_inside_prompt = False
        for e in self._entries:
            common = _common_prefix(e.tokens, query)
            if common > deepest:
                deepest = common
                deepest_inside_prompt = common < e.prompt_len and common < last
            if e.trimmable:
                use = min(common, last)
            else:
                use = len(e.tokens) if common == len(e.tokens) and len(e.tokens) <= last else 0
            if use > best_use or (use == best_use and best is not None and _better(e, best)):
                best, best_use = e, use
        if deepest_inside_prompt:
            self.prompt_divergences += 1
        # Where this prompt leaves every stored one: a snapshot there serves the next prompt that
        # diverges at the same point (the caller takes it only for untrimmable models).
        checkpoints = [deepest] if best_use < deepest < last else []
        if best is None or best_use <= 0:
            return Hit(None, 0, checkpoints)
        cache = self._load(best)
        if cache is None:
            return Hit(None, 0, checkpoints)
        best.used = next(self._clock)
        if self._disk is not None and best.disk is not None:
            self._disk.touch(best.disk)
        cache = copy.deepcopy(cache)
        if best.trimmable and len(best.tokens) > best_use:
            trim_prompt_cache(cache, len(best.tokens) - best_use)
        self.hits += 1
        self.cached_tokens += best_use
        return Hit(cache, best_use, checkpoints)

    def unused(self, hit: Hit) -> None:
        """``hit`` was not used (a prompt that must be prefilled from position 0 after all, such as
        Gemma 4's images that attend both ways): it leaves the hit counts, which then say what the
        cache saved."""
        if hit.cache is not None:
            self.hits -= 1
            self.cached_tokens -= hit.cached

    def _load(self, e: _Entry) -> list[Any] | None:
        """The entry's state, read back from disk when only there."""
        if e.cache is not None:
            return e.cache
        assert self._disk is not None and e.disk is not None
        cache = self._disk.load(e.disk)
        if cache is None:  # unreadable: the store already warned and dropped the file
            self._entries.remove(e)
            return None
        self.disk_hits += 1
        e.cache = cache
        e.nbytes = _nbytes(cache)
        self._evict(keep=e)
        return cache

    # ----- insertion -----

    def insert(self, tokens: list[int], cache: list[Any], *, prompt_len: int, tier: int = TIER_PLAIN) -> None:
        """Remember ``cache``, which holds exactly ``tokens`` (the first ``prompt_len`` were prompt)."""
        if not self.enabled or not tokens or not cache:
            return
        nbytes = _nbytes(cache)
        if nbytes > self.max_bytes:
            return  # would evict everything and still not fit
        key = np.asarray(tokens, dtype=np.int32)
        trimmable = _trimmable(cache)
        for e in list(self._entries):
            if len(e.tokens) == len(key) and _common_prefix(e.tokens, key) == len(key):
                tier = max(tier, e.tier)
                self._drop(e)
            elif (
                trimmable
                and e.trimmable
                and len(e.tokens) < len(key)
                and _common_prefix(e.tokens, key) == len(e.tokens)
            ):
                # A trimmable entry serves every prefix of itself: shorter ones are redundant.
                tier = max(tier, e.tier)
                self._drop(e)
        entry = _Entry(key, prompt_len, cache, nbytes, trimmable, tier, next(self._clock), born=time.monotonic())
        self._entries.append(entry)
        if self._disk is not None and tier != TIER_BLOCK:
            self._pending.append(entry)
            while len(self._pending) > _MAX_PENDING_WRITES:
                self._pending.popleft()
        self._evict(keep=entry)

    def checkpoint(self, tokens: list[int], cache: list[Any], *, tier: int) -> None:
        """Snapshot a prefill in progress: ``cache`` is live and keeps changing, so keep a copy."""
        self.insert(tokens, copy.deepcopy(cache), prompt_len=len(tokens), tier=tier)

    def pin(self, tokens: list[int]) -> None:
        """Raise the entry holding exactly ``tokens`` to the pinned tier (a client's cache key)."""
        key = np.asarray(tokens, dtype=np.int32)
        for e in self._entries:
            if len(e.tokens) == len(key) and _common_prefix(e.tokens, key) == len(key):
                e.tier = TIER_PINNED

    def _drop(self, e: _Entry) -> None:
        self._entries.remove(e)
        if e in self._pending:
            self._pending.remove(e)
        if e.disk is not None and self._disk is not None:
            self._disk.remove(e.disk)

    def _evict(self, keep: _Entry) -> None:
        """Enforce the entry and byte bounds: lowest tier first, least recently used first."""
        order = sorted((e for e in self._entries if e is not keep), key=lambda e: (e.tier, e.used))
        memory = self.nbytes
        count = len(self._entries)
        for e in order:
            if memory <= self.max_bytes and count <= self.max_entries:
                break
            if e.cache is None:  # on disk only: costs no memory, counts as an entry
                if count > self.max_entries:
                    self._drop(e)
                    count -= 1
                continue
            memory -= e.nbytes
            if e.disk is not None and count <= self.max_entries:
                e.cache = None  # still findable on disk
                e.nbytes = 0
                continue
            self._drop(e)
            count -= 1

    # ----- disk -----

    def service(self, now: float) -> None:
        """Hand due entries to the disk writer and take in finished writes (MLX thread, each turn)."""
        disk = self._disk
        if disk is None:
            return
        for job in disk.completed():
            self._written(job)
        while self._pending and disk.in_flight < _MAX_IN_FLIGHT:
            e = self._pending[0]
            if now - e.born < _WRITE_DELAY_S:
                break
            self._pending.popleft()
            if e.cache is not None and e in self._entries:
                e.job = disk.submit(e.tokens.tolist(), e.prompt_len, e.trimmable, e.cache)

    def next_service_in(self, now: float) -> float | None:
        """Seconds until ``service`` has work (None: none), so an idle loop knows when to wake."""
        if self._disk is None:
            return None
        if self._disk.in_flight:
            return 0.05
        if self._pending:
            return max(0.0, _WRITE_DELAY_S - (now - self._pending[0].born))
        return None

    def _written(self, job: WriteJob) -> None:
        owner = next((e for e in self._entries if e.job is job), None)
        if owner is None:  # superseded or evicted while being written
            if job.entry is not None and self._disk is not None:
                self._disk.remove(job.entry)
            return
        owner.job = None
        owner.disk = job.entry
        if self._disk is None or job.entry is None:
            return
        for gone in self._disk.enforce_bound(keep=job.entry):
            for other in [x for x in self._entries if x.disk is gone]:
                other.disk = None
                if other.cache is None:
                    self._entries.remove(other)

    def flush_writes(self, timeout: float = 60.0) -> None:
        """Write every waiting entry now and wait for the writer (at shutdown)."""
        if self._disk is None:
            return
        while self._pending:
            e = self._pending.popleft()
            if e.cache is not None and e in self._entries:
                e.job = self._disk.submit(e.tokens.tolist(), e.prompt_len, e.trimmable, e.cache)
        for job in self._disk.wait(timeout):
            self._written(job)

    def release(self) -> None:
        """Drop what is held in memory (at shutdown); files on disk stay for the next start."""
        self._entries = []
        self._pending.clear()

    def clear(self) -> None:
        """Drop every entry, in memory and on disk."""
        for e in list(self._entries):
            self._drop(e)
        self._pending.clear()

    def stats(self) -> dict[str, Any]:
        return {
            "prefix_cache_bytes": self.nbytes,
            "prefix_cache_entries": len(self),
            "prefix_cache_disk_bytes": self.disk_bytes,
            "prefix_cache_hits": self.hits,
            "prefix_cache_queries": self.queries,
            "prefix_cache_disk_hits": self.disk_hits,
            "prefix_cache_cached_tokens": self.cached_tokens,
            "prefix_cache_prompt_divergences": self.prompt_divergences,
        }


def _better(a: _Entry, b: _Entry) -> bool:
    """Between two entries serving as much: one in memory, then the more recently used."""
    if (a.cache is not None) != (b.cache is not None):
        return a.cache is not None
    return a.used > b.used


def _nbytes(cache: list[Any]) -> int:
    return int(sum(c.nbytes for c in cache))
