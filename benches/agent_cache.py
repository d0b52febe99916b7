"""An agent's conversation, turn after turn: how much of each prompt is served from the prefix cache.

An agent (a coding assistant, a tool loop) resends its whole conversation every turn. This bench
plays one: a ~4,000-token system prompt with two tools, then eight turns, each resending the
history with the previous answer and a new tool-output-sized user message. It reports, per turn,
the prompt length, the share served from cache (``usage.prompt_tokens_details.cached_tokens``)
and the time to first token; then it restarts the server and plays a ninth turn.

The servers, one after the other, each on a fresh process and model directory:

* ``smgpy serve`` with ``--prefix-cache-dir`` (so turn 9 can come from disk);
* ``mlx_lm.server`` on the same model (it reports ``cached_tokens`` too; it keeps no cache on disk).

Models: the demo model (SmolLM2-135M-Instruct, dense, float32) and, with ``--hybrid``, a tiny
random-weight ``qwen3_next`` (GatedDeltaNet and attention layers) built with mlx-lm's classes by
``tests/tiny_models.py``: its answers are noise, but its cache behaves as a real hybrid's.

BLAS: as ``benches/mlx_serve.py``, ``--cpu-blas auto`` (the default here: a 4,000-token prompt on the
reference BLAS of the Linux ``mlx[cpu]`` wheel takes minutes) preloads OpenBLAS (or BLIS, MKL) into
both servers (``LD_PRELOAD``, see ``benches/_blas.py``); ``--cpu-blas off`` runs them as installed.

With ``--strip-answers`` the client sends each answer back cut to its second half, so every turn
diverges inside the previous answer, as when a template drops the last turn's reasoning: an
attention cache is cut back to that point, an untrimmable state needs a snapshot before it.

Run: ``python benches/agent_cache.py [--hybrid] [--strip-answers] [--turns 8] [--cpu-blas auto|off]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _blas import add_cpu_blas_argument, child_env, find_blas
from _servers import free_port, mlx_lm_server_cmd, running, smgpy_serve_cmd, sse_chunk, streamed_chat

ANSWER_TOKENS = 32
REQUEST_TIMEOUT = 900.0

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "description": "Run the test suite and return its output.",
            "parameters": {"type": "object", "properties": {"filter": {"type": "string"}}},
        },
    },
]


def system_prompt() -> str:
    rules = " ".join(
        f"Rule {i}: when the module {i} changes, check item {i * 7 % 13} and report its value {i * 3 % 11}."
        for i in range(150)
    )
    return f"You are a careful coding agent working in a repository. {rules}"


def tool_output(turn: int) -> str:
    lines = "\n".join(f"test_{turn}_{i} ... {'ok' if (i + turn) % 5 else 'FAILED'}" for i in range(20))
    return f"Output of run_tests (turn {turn}):\n{lines}\nWhat should be fixed next?"


def turn(client: httpx.Client, base: str, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = streamed_chat(model, messages, ANSWER_TOKENS, tools=TOOLS)
    t0 = time.perf_counter()
    first = 0.0
    text = ""
    usage: dict[str, Any] = {}
    with client.stream("POST", base + "/v1/chat/completions", json=body, timeout=REQUEST_TIMEOUT) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            data = sse_chunk(line)
            if data is None:
                continue
            if data.get("usage"):
                usage = data["usage"]
            for choice in data.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content") or delta.get("tool_calls") or delta.get("reasoning_content"):
                    first = first or time.perf_counter()
                text += delta.get("content") or ""
    prompt = int(usage.get("prompt_tokens") or 0)
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return {
        "text": text,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "cached_share": cached / prompt if prompt else 0.0,
        "ttft_s": (first or time.perf_counter()) - t0,
    }


def play(
    base: str, model: str, messages: list[dict[str, Any]], turns: range, label: str, strip: bool
) -> list[dict[str, Any]]:
    out = []
    with httpx.Client() as client:
        for t in turns:
            messages.append({"role": "user", "content": tool_output(t)})
            r = turn(client, base, model, messages)
            answer = r["text"] or "(no answer)"
            if strip:  # the history keeps only the answer's second half, as templates drop reasoning
                answer = answer[len(answer) // 2 :] or "(no answer)"
            messages.append({"role": "assistant", "content": answer})
            r.pop("text")
            r["turn"] = t
            print(
                f"{label} turn {t}: prompt {r['prompt_tokens']}, cached {r['cached_tokens']} "
                f"({100 * r['cached_share']:.1f} %), ttft {r['ttft_s']:.3f} s",
                flush=True,
            )
            out.append(r)
    return out


def serve_cmd(kind: str, model_dir: str, name: str, port: int, cache_dir: str) -> list[str]:
    if kind == "smgpy":
        # The tiny models' configs say 2,048 positions; the conversation outgrows it.
        return smgpy_serve_cmd(model_dir, name, port, "--prefix-cache-dir", cache_dir, "--max-model-len", "32768")
    return mlx_lm_server_cmd(model_dir, port)


def run_server(
    kind: str, model_dir: str, name: str, turns: int, log_dir: str, env: dict[str, str], strip: bool
) -> dict[str, Any]:
    cache_dir = tempfile.mkdtemp(prefix="agent-cache-")
    model = name if kind == "smgpy" else model_dir
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt()}]
    result: dict[str, Any] = {}
    for phase, span in (("live", range(1, turns + 1)), ("restarted", range(turns + 1, turns + 2))):
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = os.path.join(log_dir, f"agent-cache-{kind}.log")
        cmd = serve_cmd(kind, model_dir, name, port, cache_dir)
        with running(cmd, base + "/v1/models", name=kind, log_path=log, env=env):
            result[phase] = play(base, model, messages, span, f"{kind} ({phase})", strip)
    return result


def summary(result: dict[str, Any]) -> dict[str, float]:
    live = result["live"]
    later = live[1:]
    return {
        "turns_2_on_min_cached_share": min(r["cached_share"] for r in later),
        "turns_2_on_cached_share": sum(r["cached_tokens"] for r in later) / sum(r["prompt_tokens"] for r in later),
        "ttft_last_over_turn2": live[-1]["ttft_s"] / live[1]["ttft_s"],
        "restart_cached_share": result["restarted"][0]["cached_share"],
        "restart_ttft_s": result["restarted"][0]["ttft_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--hybrid", action="store_true", help="a tiny random-weight qwen3_next instead of the demo")
    parser.add_argument(
        "--strip-answers",
        action="store_true",
        help="send each answer back cut to its second half, so every turn diverges inside the previous answer "
        "(what templates that drop the last turn's reasoning do)",
    )
    parser.add_argument("--peers", default="smgpy,mlx_lm", help="comma-separated: smgpy, mlx_lm")
    parser.add_argument("--json", help="also write the results here")
    add_cpu_blas_argument(parser, default="auto", used_by="both servers (LD_PRELOAD)")
    args = parser.parse_args()

    blas = find_blas(args.cpu_blas)
    server_env = child_env(blas)
    print("BLAS:", blas or "the mlx wheel's own", "for both servers", flush=True)

    from smgpy.mlx import demo_gguf_path, resolve_model

    if args.hybrid:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        import tiny_models

        model_dir = str(tiny_models.build("qwen3_next", Path(tempfile.mkdtemp(prefix="agent-cache-model-"))))
        name = "tiny-qwen3_next"
    else:
        model_dir, name = resolve_model(str(demo_gguf_path()), dtype="float32")
    log_dir = os.environ.get("TMPDIR", "/tmp")
    results = {
        kind: run_server(kind, model_dir, name, args.turns, log_dir, server_env, args.strip_answers)
        for kind in args.peers.split(",")
    }
    print()
    print(f"model: {name}; turns 2-{args.turns}, then a restart and turn {args.turns + 1}")
    print("| server | cached, turns 2+ (min / all) | TTFT last / turn 2 | after restart: cached, TTFT |")
    print("|---|---:|---:|---:|")
    for kind, res in results.items():
        s = summary(res)
        res["summary"] = s
        print(
            f"| {kind} | {100 * s['turns_2_on_min_cached_share']:.1f} % / {100 * s['turns_2_on_cached_share']:.1f} % "
            f"| {s['ttft_last_over_turn2']:.2f}x "
            f"| {100 * s['restart_cached_share']:.1f} %, {s['restart_ttft_s']:.3f} s |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
