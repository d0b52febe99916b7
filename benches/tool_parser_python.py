"""Tool-call parsing throughput: smgpy's Python API against a peer's pure-Python parsers.

The peer is vllm-mlx (``vllm_mlx/tool_parsers``, Apache-2.0). Its code is imported from a checkout
given by ``--peer-src DIR`` (the directory that contains ``vllm_mlx/``), never copied. Only the
``tool_parsers`` subpackage is loaded: a stub ``vllm_mlx`` package keeps its top-level imports
(MLX, which needs Apple silicon) out. Without ``--peer-src`` only smgpy is measured.

Each format parses the same response complete, and streamed in ~4-character chunks (the peer's
streaming API takes ``previous_text``, ``current_text`` and ``delta_text`` per chunk).

    python benches/tool_parser_python.py --peer-src /path/to/vllm-mlx-checkout
"""

from __future__ import annotations

import argparse
import importlib
import sys
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


def chunks(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def rate(fn: Callable[[], object], nbytes: int, min_seconds: float = 0.5) -> float:
    """MB/s of ``fn`` over at least ``min_seconds``."""
    fn()
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return nbytes * n / elapsed / 1e6


def smgpy_stream(parser: str, pieces: list[str]) -> int:
    s = native.ToolCallStream(parser)
    n = sum(len(s.feed(p)["calls"]) for p in pieces)
    return n + len(s.finish()["calls"])


def load_peer(src: Path) -> Callable[[str, str], Any]:
    pkg = types.ModuleType("vllm_mlx")
    pkg.__path__ = [str(src / "vllm_mlx")]
    sys.modules["vllm_mlx"] = pkg

    def make(module: str, cls: str) -> Any:
        return getattr(importlib.import_module(f"vllm_mlx.tool_parsers.{module}"), cls)(None)

    return make


def peer_stream(parser: Any, pieces: list[str]) -> int:
    parser.reset()
    previous, n = "", 0
    for p in pieces:
        current = previous + p
        if parser.extract_tool_calls_streaming(previous, current, p) is not None:
            n += 1
        previous = current
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer-src", type=Path, help="checkout of waybarrios/vllm-mlx (contains vllm_mlx/)")
    args = ap.parse_args()
    make = load_peer(args.peer_src) if args.peer_src else None
    print(
        "| format | smgpy complete MB/s | peer complete MB/s | ratio | smgpy stream MB/s | peer stream MB/s | ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    for parser, module, cls, text in CORPUS:
        nbytes = len(text.encode())
        pieces = chunks(text)
        ours = native.parse_tool_call_complete(text, parser)
        assert len(ours["tool_calls"]) >= 1, parser
        oc = rate(lambda: native.parse_tool_call_complete(text, parser), nbytes)  # noqa: B023
        os_ = rate(lambda: smgpy_stream(parser, pieces), nbytes)  # noqa: B023
        pc = ps = float("nan")
        if make is not None:
            peer = make(module, cls)
            found = peer.extract_tool_calls(text)
            if len(found.tool_calls) != len(ours["tool_calls"]):
                print(f"note: {parser}: peer found {len(found.tool_calls)} calls, smgpy {len(ours['tool_calls'])}")
            pc = rate(lambda: peer.extract_tool_calls(text), nbytes)  # noqa: B023
            ps = rate(lambda: peer_stream(peer, pieces), nbytes)  # noqa: B023
        print(f"| {parser} | {oc:.1f} | {pc:.2f} | {oc / pc:.0f}x | {os_:.1f} | {ps:.2f} | {os_ / ps:.0f}x |")


if __name__ == "__main__":
    main()
