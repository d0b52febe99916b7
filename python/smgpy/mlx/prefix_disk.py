"""The prefix cache's disk tier: model states that survive a restart (``--prefix-cache-dir``).

Each entry is two files in a directory named after the model's identity:

* ``<key>.safetensors``: the state, in mlx-lm's prompt-cache format (what ``save_prompt_cache``
  writes and ``load_prompt_cache`` reads, as ``mlx_lm.cache_prompt`` does);
* ``<key>.json``: the tokens the state covers, how many were prompt, the format version and
  the model identity. It is written last, so an entry without it is an interrupted write.

The identity hashes the model's config and the names and sizes of its weight and tokenizer
files, so a state is never loaded into another model, another quantization or another
tokenizer. A file that is corrupt, of another format version or of another model is skipped with
a warning (and removed when it sits in this model's directory). The directory's size is bounded
(least recently used files go first; a hit refreshes a file's time, so the order holds across
restarts).

Writes never stall the MLX thread: it only takes zero-copy numpy views of the state's evaluated
arrays (MLX arrays are immutable once evaluated, and a view keeps its buffer alive), and a writer
thread serialises them. That thread makes no MLX call, so it writes the safetensors container
itself (a JSON header and the raw buffers) rather than through ``mx.save_safetensors``: a 260 MB
state (SmolLM2-135M, 5.6k tokens, float32) took 0.5 s to write on the MLX thread, the time an
agent's next turn would have waited.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

from smgpy.mlx.mlx_lm_api import load_prompt_cache

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


@dataclass(eq=False)
class WriteJob:
    key: str
    tokens: list[int]
    prompt_len: int
    trimmable: bool
    tensors: tuple[dict[str, np.ndarray], dict[str, str]] | None
    info: dict[str, Any]
    entry: DiskEntry | None = field(default=None)


class DiskStore:
    """A byte-bounded directory of model states for one model."""

    def __init__(self, root: str | os.PathLike[str], model_id: str, max_bytes: int) -> None:
        self.model_id = model_id
        self.dir = Path(root) / model_id[:16]
        self.dir.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self._entries: dict[str, DiskEntry] = {}
        self._jobs: queue.SimpleQueue[WriteJob] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[WriteJob] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self.in_flight = 0
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

    def submit(self, tokens: list[int], prompt_len: int, trimmable: bool, cache: list[Any]) -> WriteJob:
        """Queue one state for the writer thread (call on the MLX thread: it evaluates the state)."""
        key = hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:32]
        info = {"version": FORMAT_VERSION, "model": self.model_id, "prompt_len": prompt_len, "trimmable": trimmable}
        job = WriteJob(key, list(tokens), prompt_len, trimmable, _container(cache), {**info, "tokens": list(tokens)})
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_loop, name="smgpy-prefix-disk", daemon=True)
            self._writer.start()
        self._jobs.put(job)
        self.in_flight += 1
        return job

    def completed(self) -> list[WriteJob]:
        """Jobs the writer finished since the last call; each has ``entry`` set, or None on failure."""
        done: list[WriteJob] = []
        while True:
            try:
                job = self._done.get_nowait()
            except queue.Empty:
                return done
            self.in_flight -= 1
            if job.entry is not None:
                self._entries[job.key] = job.entry
            done.append(job)

    def wait(self, timeout: float) -> list[WriteJob]:
        """Block until every queued job is written (at shutdown), at most ``timeout`` seconds."""
        done: list[WriteJob] = []
        while self.in_flight:
            try:
                job = self._done.get(timeout=timeout)
            except queue.Empty:
                log.warning("prefix cache: %d disk writes still running at shutdown", self.in_flight)
                break
            self._done.put(job)
            done += self.completed()
        return done

    def _write_loop(self) -> None:
        while True:
            job = self._jobs.get()
            job.entry = self._write(job)
            job.tensors = None  # release the buffers
            self._done.put(job)

    def _write(self, job: WriteJob) -> DiskEntry | None:
        data = self.dir / f"{job.key}.safetensors"
        meta = self.dir / f"{job.key}.json"
        tmp_data = self.dir / f"{job.key}.tmp.safetensors"
        tmp_meta = self.dir / f"{job.key}.tmp.json"
        try:
            assert job.tensors is not None
            _write_safetensors(tmp_data, *job.tensors)
            os.replace(tmp_data, data)
            tmp_meta.write_text(json.dumps(job.info))
            os.replace(tmp_meta, meta)
            st = data.stat()
        except OSError as e:
            log.warning("prefix cache: could not write to %s (%s)", self.dir, e)
            self._unlink(job.key)
            tmp_data.unlink(missing_ok=True)
            tmp_meta.unlink(missing_ok=True)
            return None
        return DiskEntry(job.key, job.tokens, job.prompt_len, job.trimmable, st.st_size, st.st_mtime)

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


# safetensors' names for the dtypes a model state holds.
_DTYPES = {
    mx.bool_: "BOOL",
    mx.uint8: "U8",
    mx.int8: "I8",
    mx.uint16: "U16",
    mx.int16: "I16",
    mx.uint32: "U32",
    mx.int32: "I32",
    mx.uint64: "U64",
    mx.int64: "I64",
    mx.float16: "F16",
    mx.bfloat16: "BF16",
    mx.float32: "F32",
}


def _container(cache: list[Any]) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The state as mlx-lm's ``save_prompt_cache`` lays it out, as zero-copy numpy views.

    Tensors are the flattened ``state`` of each layer's cache; scalars, strings and ``None`` in
    a state become small arrays and are listed in the metadata, with the cache class names.
    """
    scalars: list[Any] = [""]
    arrays: dict[str, mx.array] = {}
    flat = tree_flatten([c.state for c in cache])
    assert isinstance(flat, list)
    for name, value in flat:
        if isinstance(value, mx.array):
            arrays[name] = value
        elif isinstance(value, (bool, int, float)):
            scalars.append((name, "scalar"))
            arrays[name] = mx.array(value)
        elif isinstance(value, str):
            scalars.append((name, "string"))
            arrays[name] = mx.array([ord(ch) for ch in value])
        elif value is None:
            scalars.append((name, "none"))
            arrays[name] = mx.array([])
        else:
            raise ValueError(f"a {type(value).__name__} in a cache state cannot be stored")
    meta_flat = tree_flatten([{}, [type(c).__name__ for c in cache], scalars])
    assert isinstance(meta_flat, list)
    metadata = {str(k): str(v) for k, v in meta_flat}
    tensors: dict[str, np.ndarray] = {}
    dtypes: dict[str, str] = {}
    for name, a in arrays.items():
        if a.dtype not in _DTYPES:
            raise ValueError(f"cache dtype {a.dtype} cannot be stored")
        dtypes[name] = _DTYPES[a.dtype]
        raw = a.view(mx.uint16) if a.dtype == mx.bfloat16 else a  # numpy has no bfloat16
        tensors[name] = np.array(raw, copy=False)
    return tensors, {"__dtypes__": json.dumps(dtypes), **metadata}


def _write_safetensors(path: Path, tensors: dict[str, np.ndarray], meta: dict[str, str]) -> None:
    """Write a safetensors file: an 8-byte little-endian header size, a JSON header, the buffers."""
    dtypes = json.loads(meta["__dtypes__"])
    metadata = {k: v for k, v in meta.items() if k != "__dtypes__"}
    header: dict[str, Any] = {"__metadata__": metadata}
    offset = 0
    for name, t in tensors.items():
        header[name] = {"dtype": dtypes[name], "shape": list(t.shape), "data_offsets": [offset, offset + t.nbytes]}
        offset += t.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for t in tensors.values():
            f.write(np.ascontiguousarray(t).data)
