"""Tool-call parsing throughput: smgpy against a peer's pure-Python parsers.

The peer is vllm-mlx (``vllm_mlx/tool_parsers``, Apache-2.0). Its code is imported from a checkout
given by ``--peer-src DIR`` (the directory that contains ``vllm_mlx/``), never copied. Only the
``tool_parsers`` subpackage is loaded: a stub ``vllm_mlx`` package keeps its top-level imports
(MLX, which needs Apple silicon) out. Without ``--peer-src`` only smgpy is measured.

Each format parses the same response complete, and streamed the way a server sees it: pieces of
about 4 characters, except that the format's markers (``<tool_call>``, ``<｜tool▁call▁end｜>``,
``[TOOL_CALLS]``, ``<arg_key>``...) are single special tokens, so each arrives whole, as one
piece. The peer's streaming API takes ``previous_text``, ``current_text`` and ``delta_text``
per piece.

Results are checked, not only timed: each side's streamed calls (accumulated per index: a delta
with a name starts the call, or replaces it when the parser re-sends whole calls; argument
fragments are appended) must equal that side's complete parse (same names, same arguments as
JSON). A ratio is printed only when both sides stream correctly.

smgpy is measured twice: through its Python API (one ``feed`` call and one result dict per
piece), and natively (``rust/parsers/examples/parse_loop.rs`` on the same pieces, written to a
JSON file), which is how smgpy's own server runs it: in Rust, with no Python objects per piece.
The native numbers need that example built (``--native`` builds it with cargo).

    python benches/tool_parser_python.py --peer-src /path/to/vllm-mlx-checkout [--native]
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import smgpy._native as native

NOTE = (
    "The forecast should cover the next three days, including wind speed, humidity and the chance of rain in "
    "the afternoon; the user is planning a cycling trip along the river and wants to know whether to pack a "
    "rain jacket. Please also mention sunrise and sunset times and any weather warnings."
)
A1 = '{"city": "Paris", "days": 3, "note": "' + NOTE + '"}'
A2 = '{"query": "' + NOTE + '", "limit": 5, "filters": {"lang": "en", "safe": true}}'
PRE = "Let me look that up for you.\n"
ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "target" / "release" / "examples" / "parse_loop"

# smgpy parser, peer module, peer class, response
CORPUS: list[tuple[str, str, str, str]] = [
    (
        "hermes",
        "hermes_tool_parser",
        "HermesToolParser",
        f'{PRE}<tool_call>\n{{"name": "get_weather", "arguments": {A1}}}\n</tool_call>\n'
        f'<tool_call>\n{{"name": "search", "arguments": {A2}}}\n</tool_call>',
    ),
    (
        "mistral",
        "mistral_tool_parser",
        "MistralToolParser",
        f'[TOOL_CALLS][{{"name": "get_weather", "arguments": {A1}}}, {{"name": "search", "arguments": {A2}}}]',
    ),
    (
        "deepseek_v3",
        "deepseek_tool_parser",
        "DeepSeekToolParser",
        f"{PRE}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{A1}\n```"
        f"<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```json\n{A2}\n```"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    ),
    (
        "kimi_k2",
        "kimi_tool_parser",
        "KimiToolParser",
        f"{PRE}<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        f"{A1}<|tool_call_end|><|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{A2}"
        "<|tool_call_end|><|tool_calls_section_end|>",
    ),
    (
        "qwen3_coder",
        "qwen3_xml_tool_parser",
        "Qwen3XMLToolParser",
        f"{PRE}<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
        f"</parameter>\n<parameter=note>\n{NOTE}\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
        f"<function=search>\n<parameter=query>\n{NOTE}\n</parameter>\n</function>\n</tool_call>",
    ),
    (
        "glm47",
        "glm47_tool_parser",
        "Glm47ToolParser",
        f"{PRE}<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>note</arg_key>"
        f"<arg_value>{NOTE}</arg_value></tool_call><tool_call>search<arg_key>query</arg_key><arg_value>{NOTE}"
        "</arg_value></tool_call>",
    ),
    (
        "minimax_m2",
        "minimax_tool_parser",
        "MiniMaxToolParser",
        f'{PRE}<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n'
        f'<parameter name="note">{NOTE}</parameter>\n</invoke>\n<invoke name="search">\n'
        f'<parameter name="query">{NOTE}</parameter>\n</invoke>\n</minimax:tool_call>',
    ),
]


# Markers that are one special token in the format's tokenizer: each streams as one piece.
MARKERS: dict[str, list[str]] = {
    "hermes": ["<tool_call>", "</tool_call>"],
    "mistral": ["[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"],
    "deepseek_v3": [
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁calls▁end｜>",
        "<｜tool▁call▁begin｜>",
        "<｜tool▁call▁end｜>",
        "<｜tool▁sep｜>",
    ],
    "kimi_k2": [
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
    ],
    "qwen3_coder": ["<tool_call>", "</tool_call>"],
    "glm47": ["<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"],
    "minimax_m2": ["<minimax:tool_call>", "</minimax:tool_call>"],
}


def chunks(text: str, markers: list[str], size: int = 4) -> list[str]:
    """Pieces of ``size`` characters, each marker a piece of its own (as a tokenizer emits it)."""
    by_length = sorted(markers, key=len, reverse=True)
    out: list[str] = []
    cur, i = "", 0
    while i < len(text):
        marker = next((m for m in by_length if text.startswith(m, i)), None)
        if marker is not None:
            if cur:
                out.append(cur)
                cur = ""
            out.append(marker)
            i += len(marker)
            continue
        cur += text[i]
        i += 1
        if len(cur) >= size:
            out.append(cur)
            cur = ""
    if cur:
        out.append(cur)
    assert "".join(out) == text
    return out


def rate(fn: Callable[[], object], nbytes: int, min_seconds: float = 0.5, windows: int = 5) -> float:
    """MB/s of ``fn``: the best of ``windows`` windows of ``min_seconds / windows`` each. The best
    window is the one least disturbed by other work on the machine."""
    fn()
    best = 0.0
    for _ in range(windows):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds / windows:
                best = max(best, nbytes * n / elapsed / 1e6)
                break
    return best


Calls = list[tuple[str, Any]]


def normal(calls: list[tuple[str, str]]) -> Calls:
    """Calls with their arguments parsed, so formatting differences do not count."""
    out: Calls = []
    for name, args in calls:
        try:
            out.append((name, json.loads(args) if isinstance(args, str) else args))
        except ValueError:
            out.append((name, args))
    return out


def smgpy_stream(parser: str, pieces: list[str]) -> int:
    """Timed: feed every piece, looking at what each returns."""
    s = native.ToolCallStream(parser)
    n = sum(len(s.feed(p)["calls"]) for p in pieces)
    return n + len(s.finish()["calls"])


def smgpy_streamed_calls(parser: str, pieces: list[str]) -> list[tuple[str, str]]:
    s = native.ToolCallStream(parser)
    calls: dict[int, list[str]] = {}
    for d in [s.feed(p) for p in pieces] + [s.finish()]:
        for c in d["calls"]:
            if c["index"] in calls:
                calls[c["index"]][1] += c["arguments"]
            else:
                calls[c["index"]] = [c["name"], c["arguments"]]
    return [(n, a) for n, a in (calls[i] for i in sorted(calls))]


def load_peer(src: Path) -> Callable[[str, str], Any]:
    pkg = types.ModuleType("vllm_mlx")
    pkg.__path__ = [str(src / "vllm_mlx")]
    sys.modules["vllm_mlx"] = pkg

    def make(module: str, cls: str) -> Any:
        return getattr(importlib.import_module(f"vllm_mlx.tool_parsers.{module}"), cls)(None)

    return make


def peer_stream(parser: Any, pieces: list[str]) -> list[Any]:
    """Timed: one ``extract_tool_calls_streaming`` call per piece; returns what each gave."""
    parser.reset()
    previous, results = "", []
    for p in pieces:
        current = previous + p
        results.append(parser.extract_tool_calls_streaming(previous, current, p))
        previous = current
    return results


def peer_streamed_calls(results: list[Any]) -> tuple[list[tuple[str, str]], int]:
    """The peer's streamed calls, and how many times it re-sent a call it had already sent."""
    calls: dict[int, list[str]] = {}
    resent = 0
    for r in results:
        for tc in (r or {}).get("tool_calls") or []:
            f = tc.get("function") or {}
            i = tc.get("index", len(calls))
            if f.get("name") is not None:
                resent += i in calls
                calls[i] = [f["name"], f.get("arguments") or ""]
            elif i in calls:
                calls[i][1] += f.get("arguments") or ""
    return [(n, a) for n, a in (calls[i] for i in sorted(calls))], resent


def run_native(parser: str, pieces: list[str], workdir: Path) -> dict[str, Any] | None:
    """The Rust parser on the same pieces (and the whole text), via the ``parse_loop`` example."""
    if not NATIVE.exists():
        return None
    spec = workdir / f"{parser}.json"
    spec.write_text(json.dumps({"format": parser, "chunks": pieces}))
    out = subprocess.run([str(NATIVE), "chunks", str(spec)], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def ratio(a: float, b: float, ok: bool) -> str:
    if not ok or b != b:
        return "—"
    return f"{a / b:.0f}x" if a / b >= 10 else f"{a / b:.1f}x"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer-src", type=Path, help="checkout of waybarrios/vllm-mlx (contains vllm_mlx/)")
    ap.add_argument("--native", action="store_true", help="build the native parse_loop example first (cargo)")
    ap.add_argument("--seconds", type=float, default=1.0, help="time per measurement (best of 5 windows)")
    args = ap.parse_args()
    if args.native:
        cmd = ["cargo", "build", "--release", "-p", "smgpy-parsers", "--example", "parse_loop"]
        subprocess.run(cmd, cwd=ROOT, check=True)
    make = load_peer(args.peer_src) if args.peer_src else None
    complete_rows, stream_rows, notes = [], [], []
    workdir = Path(tempfile.mkdtemp(prefix="smgpy-tool-bench-"))
    for parser, module, cls, text in CORPUS:
        nbytes = len(text.encode())
        pieces = chunks(text, MARKERS[parser])
        ours = native.parse_tool_call_complete(text, parser)
        ours_calls = [(c["name"], c["arguments"]) for c in ours["tool_calls"]]
        assert ours_calls, parser
        streamed = smgpy_streamed_calls(parser, pieces)
        ours_ok = streamed == ours_calls
        oc = rate(lambda: native.parse_tool_call_complete(text, parser), nbytes, args.seconds)  # noqa: B023
        os_ = rate(lambda: smgpy_stream(parser, pieces), nbytes, args.seconds)  # noqa: B023
        nat = run_native(parser, pieces, workdir)
        nc = ns = nr = float("nan")
        native_ok = False
        if nat is not None:
            ns, nc, nr = nat["mb_per_s"], nat["complete_mb_per_s"], nat["reused_mb_per_s"]
            native_ok = [(c["name"], c["arguments"]) for c in nat["calls"]] == ours_calls
        pc = ps = float("nan")
        peer_ok, peer_note = False, "—"
        if make is not None:
            peer = make(module, cls)
            found = peer.extract_tool_calls(text)
            peer_calls = [(c["name"], c["arguments"]) for c in found.tool_calls]
            if normal(peer_calls) != normal(ours_calls):
                notes.append(f"{parser}: the peer's complete parse differs from smgpy's: {peer_calls!r}")
            pc = rate(lambda: peer.extract_tool_calls(text), nbytes, args.seconds)  # noqa: B023
            ps = rate(lambda: peer_stream(peer, pieces), nbytes, args.seconds)  # noqa: B023
            peer_streamed, resent = peer_streamed_calls(peer_stream(peer, pieces))
            peer_ok = bool(peer_calls) and normal(peer_streamed) == normal(peer_calls)
            if peer_ok:
                peer_note = "yes" + (f" (re-sends whole calls, {resent}x)" if resent else "")
            elif not peer_streamed:
                peer_note = "no: no calls"
            else:
                names = ", ".join(n for n, _ in peer_streamed)
                peer_note = f"no: {len(peer_streamed)} call(s) ({names}), {len(peer_calls)} when complete"
        both = ours_ok and peer_ok
        complete_rows.append(
            f"| {parser} | {oc:.1f} | {nc:.0f} | {pc:.2f} | {ratio(oc, pc, pc == pc)} | {ratio(nc, pc, pc == pc)} |"
        )
        ours_note = ("yes" if ours_ok else "NO") + ("" if nat is None else " / " + ("yes" if native_ok else "NO"))
        stream_rows.append(
            f"| {parser} | {len(pieces)} | {os_:.1f} | {ns:.0f} | {nr:.0f} | {ps:.2f} | {ratio(os_, ps, both)} | "
            f"{ratio(ns, ps, both and native_ok)} | {ratio(nr, ps, both and native_ok)} | {ours_note} | {peer_note} |"
        )
    print("Complete parse, MB/s:\n")
    print("| format | smgpy (Python) | smgpy (native) | vllm-mlx | ratio (Python) | ratio (native) |")
    print("|---|---:|---:|---:|---:|---:|")
    print("\n".join(complete_rows))
    print("\nStreamed, ~4-character pieces with markers whole, MB/s:\n")
    print(
        "| format | pieces | smgpy (Python) | smgpy (native) | smgpy (native, reused delta) | vllm-mlx "
        "| ratio (Python) | ratio (native) | ratio (native, reused) "
        "| smgpy streamed = complete (Python / native) | vllm-mlx streamed = complete |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    print("\n".join(stream_rows))
    for n in notes:
        print(f"\nnote: {n}")


if __name__ == "__main__":
    main()
