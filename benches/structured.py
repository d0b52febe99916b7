"""Structured output: mask time per decoding step, side by side, and the batch cost on the MLX engine.

In one run, for the demo model's 49,152-token vocabulary and a synthetic ~150k one (the 49k tokens
plus deterministic concatenations of pairs of them, up to 24 bytes), each implementation follows
the same JSON Schema through the same token sequence (the demo tokenizer's tokens of a valid
document) and the time of every step's mask is recorded:

- smgpy (llguidance, ``GrammarMatcher.step``: accept the previous token, compute the mask, as a
  bitmask like the peers'),
- smgpy's previous hand-written recognizer (``JsonVocab`` / ``JsonMatcher``, one byte per logit),
  from an old build of ``smgpy._native`` given with ``--old-native PATH`` (skipped otherwise),
- xgrammar (``fill_next_token_bitmask``; ``torch`` / ``transformers`` are stubbed when missing, the
  mask is a numpy bitmask),
- outlines-core (``Guide.write_mask_into``; its ``Index`` is built per vocabulary, before timing).

A peer that is not installed is skipped. Then the batch: decode tokens/s of 4 sequences on the
demo model with no constraint, and with one of the 4 constrained (rounds alternate; medians).

    python benches/structured.py [--old-native PATH] [--rounds 5] [--no-batch]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import random
import statistics
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

from smgpy import _native  # noqa: E402
from smgpy.mlx import MLXEngine, demo_gguf_path  # noqa: E402
from smgpy.mlx.engine import resolve_model  # noqa: E402
from smgpy.mlx.structured import special_ids, token_bytes  # noqa: E402

# A schema the old recognizer could enforce too (no pattern / format / bounds), so every
# implementation does the same work.
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "city": {"enum": ["Paris", "Rome", "Tokyo"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age", "city", "tags"],
    "additionalProperties": False,
}
DOC = '{"name": "Ferdinand the Bull", "age": 31, "city": "Rome", "tags": ["calm", "flowers", "cork trees of Spain"]}'


def synthetic(tokens: list[bytes | None], n: int) -> list[bytes | None]:
    """``tokens`` extended to ``n`` with unseen concatenations of two tokens (fixed seed)."""
    out = list(tokens)
    seen = {t for t in out if t}
    pool = [t for t in tokens if t and b"\n" not in t]
    rnd = random.Random(0)
    while len(out) < n:
        t = rnd.choice(pool) + rnd.choice(pool)
        if t not in seen and len(t) <= 24:
            seen.add(t)
            out.append(t)
    return out


def stats(times: list[float]) -> dict[str, float]:
    a = np.array(times) * 1e6
    return {"mean": float(a.mean()), "p50": float(np.median(a)), "p99": float(np.percentile(a, 99))}


def run_smgpy(tokens: list[bytes | None], specials: list[int], eos: int, ids: list[int], reps: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    vocab = _native.Vocabulary(tokens, specials, [eos], len(tokens))
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    grammar = vocab.compile("json_schema", json.dumps(SCHEMA))
    compile_s = time.perf_counter() - t0
    times: list[float] = []
    for _ in range(reps):
        m = grammar.matcher()
        prev: int | None = None
        for t in ids:
            s = time.perf_counter()
            mask = m.step(prev)
            times.append(time.perf_counter() - s)
            assert mask is not None and (mask[t >> 3] >> (t & 7)) & 1, t
            prev = t
        last = m.step(prev)
        assert last is not None and (last[eos >> 3] >> (eos & 7)) & 1
    return {"build_ms": build * 1e3, "compile_ms": compile_s * 1e3, **stats(times)}


def load_old(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("_native", path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_old(old: Any, tokens: list[bytes | None], specials: list[int], eos: int, ids: list[int], reps: int) -> Any:
    plain = [None if i in specials else t for i, t in enumerate(tokens)]
    t0 = time.perf_counter()
    vocab = old.JsonVocab(plain, [eos])
    build = time.perf_counter() - t0
    times: list[float] = []
    for _ in range(reps):
        m = vocab.matcher(schema=json.dumps(SCHEMA))
        for t in ids:
            s = time.perf_counter()
            mask = m.mask(len(tokens))
            times.append(time.perf_counter() - s)
            assert mask[t], t
            m.accept(t)
        assert m.mask(len(tokens))[eos]
    return {"build_ms": build * 1e3, "compile_ms": float("nan"), **stats(times)}


def import_xgrammar() -> Any:
    """xgrammar imports torch and transformers at import time; stub them when missing (only the
    CPU bitmask path is used here)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        torch_stub = types.ModuleType("torch")

        class _Dtype:
            def __init__(self, name: str) -> None:
                self.name = name

        torch_stub.Tensor = type("Tensor", (), {})  # type: ignore[attr-defined]
        torch_stub.cuda = types.SimpleNamespace(is_available=lambda: False)  # type: ignore[attr-defined]
        torch_stub.__version__ = "0.0.0"  # type: ignore[attr-defined]

        def attr(name: str) -> Any:
            if name.startswith("__"):
                raise AttributeError(name)
            if name in ("tensor", "full", "zeros", "ones", "empty", "device", "compile", "no_grad"):
                return lambda *a, **k: None
            return _Dtype(name)

        torch_stub.__getattr__ = attr  # type: ignore[attr-defined,method-assign]
        sys.modules["torch"] = torch_stub
    try:
        import transformers  # noqa: F401
    except ImportError:
        tf = types.ModuleType("transformers")
        tf.PreTrainedTokenizerBase = type("PreTrainedTokenizerBase", (), {})  # type: ignore[attr-defined]
        tf.PreTrainedTokenizerFast = type("PreTrainedTokenizerFast", (), {})  # type: ignore[attr-defined]
        tf.LogitsProcessor = type("LogitsProcessor", (), {})  # type: ignore[attr-defined]
        sys.modules["transformers"] = tf
    import xgrammar

    return xgrammar


def run_xgrammar(tokens: list[bytes | None], specials: list[int], eos: int, ids: list[int], reps: int) -> Any:
    xgr = import_xgrammar()
    n = len(tokens)
    vocab = [b"" if t is None or i in specials else t for i, t in enumerate(tokens)]
    t0 = time.perf_counter()
    info = xgr.TokenizerInfo(vocab, xgr.VocabType.RAW, vocab_size=n, stop_token_ids=[eos], add_prefix_space=False)
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    compiled = compiler.compile_json_schema(json.dumps(SCHEMA), any_whitespace=True)
    compile_s = time.perf_counter() - t0
    bm = np.full((1, (n + 31) // 32), -1, dtype=np.int32)
    times: list[float] = []
    for _ in range(reps):
        m = xgr.GrammarMatcher(compiled)
        for t in ids:
            s = time.perf_counter()
            m.fill_next_token_bitmask(bm, 0)
            times.append(time.perf_counter() - s)
            assert (bm[0, t >> 5] >> (t & 31)) & 1, t
            assert m.accept_token(t), t
    return {"build_ms": build * 1e3, "compile_ms": compile_s * 1e3, **stats(times)}


def run_outlines(tokens: list[bytes | None], specials: list[int], eos: int, ids: list[int], reps: int) -> Any:
    import outlines_core as oc

    n = len(tokens)
    vmap: dict[bytes, list[int]] = {}
    for i, t in enumerate(tokens):
        if t and i != eos and i not in specials:
            vmap.setdefault(t, []).append(i)
    t0 = time.perf_counter()
    vocab = oc.Vocabulary(eos, vmap)
    regex = oc.json_schema.build_regex_from_schema(json.dumps(SCHEMA))
    index = oc.Index(regex, vocab)
    compile_s = time.perf_counter() - t0
    mask = np.zeros((1, (n + 31) // 32), dtype=np.int32)
    times: list[float] = []
    for _ in range(reps):
        g = oc.Guide(index)
        for t in ids:
            s = time.perf_counter()
            g.write_mask_into(mask.ctypes.data, mask.size, 4)
            times.append(time.perf_counter() - s)
            assert (mask[0, t >> 5] >> (t & 31)) & 1, t
            g.advance(t, return_tokens=False)
    return {"build_ms": float("nan"), "compile_ms": compile_s * 1e3, **stats(times)}


def masks(old_native: str | None, reps: int) -> list[tuple[str, int, dict[str, Any] | str]]:
    from transformers import AutoTokenizer

    path, _ = resolve_model(str(demo_gguf_path()))
    hf = AutoTokenizer.from_pretrained(path)
    base = token_bytes(hf)
    specials = sorted(special_ids(hf))
    eos = int(hf.eos_token_id)
    ids = list(hf.encode(DOC, add_special_tokens=False))
    old = load_old(old_native) if old_native else None
    runners: list[tuple[str, Callable[..., Any] | None]] = [
        ("smgpy (llguidance)", run_smgpy),
        ("smgpy before (hand-written)", None if old is None else lambda *a: run_old(old, *a)),
        ("xgrammar", run_xgrammar),
        ("outlines-core", run_outlines),
    ]
    out: list[tuple[str, int, dict[str, Any] | str]] = []
    for size in (len(base), 151_936):
        tokens = base if size == len(base) else synthetic(base, size)
        for name, fn in runners:
            if fn is None:
                out.append((name, size, "skipped (no --old-native)"))
                continue
            try:
                out.append((name, size, fn(tokens, specials, eos, ids, reps)))
            except ImportError as e:
                out.append((name, size, f"skipped ({e})"))
            print(name, size, out[-1][2], flush=True)
    return out


async def batch_round(engine: Any, constrained: bool, tokens: int) -> float:
    """Decode tokens/s of 4 sequences; with ``constrained`` one of them is held to a regex."""
    prompts = ["Tell me a story about a dog.", "Describe Paris.", "Why is the sky blue?", "List some fruits."]

    async def one(i: int) -> int:
        sp: dict[str, Any] = {"max_new_tokens": tokens, "temperature": 0, "ignore_eos": True}
        if constrained and i == 0:
            sp["regex"] = "[a-z ,.]*"
        obj = types.SimpleNamespace(rid=f"b{i}-{time.monotonic_ns()}", text=prompts[i], sampling_params=sp)
        n = 0
        async for out in engine.generate_request(obj):
            n = out["meta_info"]["completion_tokens"]
        return int(n)

    await asyncio.gather(*(one(i) for i in range(4)))  # warm the prefix cache and the graph
    t0 = time.perf_counter()
    counts = await asyncio.gather(*(one(i) for i in range(4)))
    return sum(counts) / (time.perf_counter() - t0)


def batch(rounds: int, tokens: int) -> tuple[float, float]:
    engine = MLXEngine.from_pretrained(str(demo_gguf_path()), max_running=4)
    plain: list[float] = []
    held: list[float] = []
    try:
        for _ in range(rounds):
            plain.append(asyncio.run(batch_round(engine, False, tokens)))
            held.append(asyncio.run(batch_round(engine, True, tokens)))
            print(f"batch: plain {plain[-1]:.1f} tok/s, one constrained {held[-1]:.1f} tok/s", flush=True)
    finally:
        engine.shutdown()
    pairs = statistics.median(h / p for p, h in zip(plain, held, strict=True))
    print(f"median of per-round ratios: {pairs:.3f}", flush=True)
    return statistics.median(plain), statistics.median(held)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old-native", help="path of an old smgpy _native extension (with JsonVocab)")
    ap.add_argument("--reps", type=int, default=20, help="passes over the document per implementation")
    ap.add_argument("--rounds", type=int, default=5, help="alternating batch rounds")
    ap.add_argument("--tokens", type=int, default=96, help="tokens per sequence in the batch rounds")
    ap.add_argument("--no-batch", action="store_true")
    args = ap.parse_args()
    rows = masks(args.old_native, args.reps)
    print("\n| implementation | vocabulary | mask mean (µs) | p50 | p99 | vocab build (ms) | compile (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, size, r in rows:
        if isinstance(r, str):
            print(f"| {name} | {size:,} | {r} | | | | |")
        else:
            print(
                f"| {name} | {size:,} | {r['mean']:.1f} | {r['p50']:.1f} | {r['p99']:.1f} | "
                f"{r['build_ms']:.0f} | {r['compile_ms']:.2f} |"
            )
    if not args.no_batch:
        plain, held = batch(args.rounds, args.tokens)
        print(f"\nbatch of 4: plain {plain:.1f} tok/s, one constrained {held:.1f} tok/s, ratio {held / plain:.3f}")


if __name__ == "__main__":
    main()
