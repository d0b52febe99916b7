"""Reasoning parsers: smgpy (through its Python API) vs vllm-mlx's pure-Python parsers.

The peer is not vendored: point ``--peer-src`` at a checkout of waybarrios/vllm-mlx (tested at
``4b654c0``); its ``vllm_mlx/reasoning`` package is imported directly, because importing
``vllm_mlx`` itself needs MLX (Apple silicon). Its streaming API is vLLM's
``extract_reasoning_streaming(previous_text, current_text, delta_text)``, driven here the way vLLM's
server drives it. Same corpus and ~4-byte chunks as ``rust/parsers/smg-peer/benches/reasoning.rs``.

    python benches/reasoning_python_peer.py --peer-src /path/to/vllm-mlx
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from smgpy import _native as native

# (parser name in smgpy, name in vllm-mlx, opening, closing)
CASES = [
    ("qwen3", "qwen3", "<think>\n", "\n</think>\n\n"),
    ("deepseek_r1", "deepseek_r1", "", "\n</think>\n\n"),
    ("mistral", "mistral", "[THINK]", "[/THINK]"),
    ("gemma4", "gemma4", "<|channel>thought\n", "<channel|>"),
]


def corpus(open_: str, close: str) -> str:
    reasoning = (
        "Let me think about this step by step. If x < 10 and y > 3, then the sum is bounded; "
        "the user wrote 計算 (calculation) and asked for <b>bold</b> output. "
    )
    answer = "The answer is 42. Here is why: each term is positive, so the series converges — done. "
    s = open_
    while len(s.encode()) < 6000:
        s += reasoning
    s += close
    start = len(s.encode())
    while len(s.encode()) - start < 2000:
        s += answer
    return s


def load_peer(src: Path) -> Callable[[str], object]:
    pkg_dir = src / "vllm_mlx" / "reasoning"
    spec = importlib.util.spec_from_file_location(
        "peer_reasoning", pkg_dir / "__init__.py", submodule_search_locations=[str(pkg_dir)]
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {pkg_dir}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["peer_reasoning"] = module
    spec.loader.exec_module(module)
    return module.get_parser  # type: ignore[no-any-return]


def rate(fn: Callable[[], object], nbytes: int, min_time: float = 0.5) -> float:
    """MB/s of the best of several timed batches."""
    fn()
    best = float("inf")
    deadline = time.perf_counter() + min_time * 3
    while time.perf_counter() < deadline:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < min_time / 3:
            fn()
            n += 1
        best = min(best, (time.perf_counter() - t0) / n)
    return nbytes / best / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--peer-src", type=Path, required=True, help="checkout of waybarrios/vllm-mlx")
    args = ap.parse_args()
    get_parser = load_peer(args.peer_src)

    print("| format | mode | smgpy (Python API) MB/s | vllm-mlx MB/s | ratio |")
    print("|---|---|---:|---:|---:|")
    for ours, theirs, open_, close in CASES:
        text = corpus(open_, close)
        nbytes = len(text.encode())
        chunks = [text[i : i + 4] for i in range(0, len(text), 4)]
        peer_cls = get_parser(theirs)

        def ours_complete(text: str = text, ours: str = ours) -> object:
            return native.parse_reasoning_complete(text, ours)

        def peer_complete(text: str = text, peer_cls: Any = peer_cls) -> object:
            return peer_cls().extract_reasoning(text)

        def ours_stream(chunks: list[str] = chunks, ours: str = ours) -> None:
            s = native.ReasoningStream(ours)
            for c in chunks:
                s.feed(c)
            s.finish()

        def peer_stream(chunks: list[str] = chunks, peer_cls: Any = peer_cls) -> None:
            p = peer_cls()
            if hasattr(p, "reset_state"):
                p.reset_state()
            prev = ""
            for c in chunks:
                cur = prev + c
                p.extract_reasoning_streaming(prev, cur, c)
                prev = cur

        for mode, a, b in (("complete", ours_complete, peer_complete), ("stream4", ours_stream, peer_stream)):
            ra, rb = rate(a, nbytes), rate(b, nbytes)
            print(f"| {ours} | {mode} | {ra:.1f} | {rb:.2f} | {ra / rb:.0f}x |")


if __name__ == "__main__":
    main()
