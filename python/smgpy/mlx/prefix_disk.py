"""The prefix cache's disk tier: model states that survive a restart (``--prefix-cache-dir``).

Each entry is two files in a directory named after the model's identity:

* ``<key>.safetensors``: the state, in mlx-lm's prompt-cache format (``save_prompt_cache`` /
  ``load_prompt_cache``, the format ``mlx_lm.cache_prompt`` writes);
* ``<key>.json``: the tokens the state covers, how many were prompt, the format version and
  the model identity. It is written last, so an entry without it is an interrupted write.

The identity hashes the model's config and the names and sizes of its weight and tokenizer
files, so a state is never loaded into another model, another quantization or another
tokenizer. A file that is corrupt, of another format version or of another model is skipped with
a warning (and removed when it sits in this model's directory). The directory's size is bounded
(least recently used files go first; a hit refreshes a file's time, so the order holds across
restarts).

Writes happen on the MLX thread when it has nothing to run (see ``PrefixCache.write_pending``),
never between two decode steps.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from smgpy.mlx.mlx_lm_api import load_prompt_cache, save_prompt_cache

__all__ = ["DiskEntry", "DiskStore", "model_identity"]

log = logging.getLogger("smgpy.mlx")

FORMAT_VERSION = 1
_WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".npz", ".bin")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "chat_template.jinja")


def model_identity(model_path: str) -> str:
    """A hex digest naming the model: its config, and its weight and tokenizer files' names and sizes."""
    path = Path(model_path)
    h = hashlib.sha256(f"smgpy-prefix-cache-v{FORMAT_VERSION}\n".encode())
    if path.is_file():  # a single-file model (GGUF)
        st = path.stat()
        h.update(f"{path.name}:{st.st_size}\n".encode())
        return h.hexdigest()
    config = path / "config.json"
    if config.is_file():
        h.update(config.read_bytes())
    for f in sorted(path.iterdir()):
        if f.is_file() and (f.suffix in _WEIGHT_SUFFIXES or f.name in _TOKENIZER_FILES):
            h.update(f"{f.name}:{f.stat().st_size}\n".encode())
    return h.hexdigest()


@dataclass(eq=False)
class DiskEntry:
    key: str
    tokens: list[int]
    prompt_len: int
    trimmable: bool
    nbytes: int
    mtime: float


class DiskStore:
    """A byte-bounded directory of model states for one model."""

    def __init__(self, root: str | os.PathLike[str], model_id: str, max_bytes: int) -> None:
        self.model_id = model_id
        self.dir = Path(root) / model_id[:16]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self._entries: dict[str, DiskEntry] = {}
        self._scan()

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def entries(self) -> list[DiskEntry]:
        """Entries found, least recently used first."""
        return sorted(self._entries.values(), key=lambda e: e.mtime)

    def _scan(self) -> None:
        for meta in sorted(self.dir.glob("*.json")):
            key = meta.stem
            data = self.dir / f"{key}.safetensors"
            try:
                info = json.loads(meta.read_text())
                if info.get("version") != FORMAT_VERSION or info.get("model") != self.model_id:
                    raise ValueError("another format version or another model")
                tokens = [int(t) for t in info["tokens"]]
                entry = DiskEntry(
                    key,
                    tokens,
                    int(info["prompt_len"]),
                    bool(info["trimmable"]),
                    data.stat().st_size,
                    data.stat().st_mtime,
                )
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("prefix cache: skipping %s (%s); it is removed", meta.name, e)
                self._unlink(key)
                continue
            self._entries[key] = entry
        for stray in self.dir.glob("*.safetensors"):  # interrupted writes
            if stray.stem not in self._entries and not stray.name.endswith(".tmp.safetensors"):
                stray.unlink(missing_ok=True)
        for tmp in self.dir.glob("*.tmp.*"):
            tmp.unlink(missing_ok=True)
        if self.nbytes > self.max_bytes:
            self.enforce_bound()

    def write(self, tokens: list[int], prompt_len: int, trimmable: bool, cache: list[Any]) -> DiskEntry | None:
        """Write one state; None (with a warning) when the disk refuses it."""
        key = hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:32]
        data = self.dir / f"{key}.safetensors"
        meta = self.dir / f"{key}.json"
        tmp_data = self.dir / f"{key}.tmp.safetensors"
        tmp_meta = self.dir / f"{key}.tmp.json"
        try:
            save_prompt_cache(str(tmp_data), cache)
            os.replace(tmp_data, data)
            info = {"version": FORMAT_VERSION, "model": self.model_id, "prompt_len": prompt_len, "trimmable": trimmable}
            tmp_meta.write_text(json.dumps({**info, "tokens": tokens}))
            os.replace(tmp_meta, meta)
            st = data.stat()
        except (OSError, ValueError) as e:
            log.warning("prefix cache: could not write to %s (%s)", self.dir, e)
            self._unlink(key)
            return None
        entry = DiskEntry(key, list(tokens), prompt_len, trimmable, st.st_size, st.st_mtime)
        self._entries[key] = entry
        return entry

    def load(self, entry: DiskEntry) -> list[Any] | None:
        """The entry's state; None (the entry removed, with a warning) when it cannot be read."""
        try:
            return list(load_prompt_cache(str(self.dir / f"{entry.key}.safetensors")))
        except Exception as e:  # any failure to parse is a bad file, never a crashed engine
            log.warning("prefix cache: skipping unreadable %s.safetensors (%s); it is removed", entry.key, e)
            self.remove(entry)
            return None

    def touch(self, entry: DiskEntry) -> None:
        try:
            os.utime(self.dir / f"{entry.key}.safetensors")
            entry.mtime = (self.dir / f"{entry.key}.safetensors").stat().st_mtime
        except OSError:
            pass

    def remove(self, entry: DiskEntry) -> None:
        self._entries.pop(entry.key, None)
        self._unlink(entry.key)

    def enforce_bound(self, keep: DiskEntry | None = None) -> list[DiskEntry]:
        """Remove least recently used entries until the directory fits; returns those removed."""
        gone = []
        total = self.nbytes
        for e in self.entries():
            if total <= self.max_bytes:
                break
            if e is keep:
                continue
            total -= e.nbytes
            self.remove(e)
            gone.append(e)
        return gone

    def _unlink(self, key: str) -> None:
        for suffix in (".json", ".safetensors"):
            (self.dir / f"{key}{suffix}").unlink(missing_ok=True)
