"""Prompt-lookup speculation (#35): tokens/s with and without, on three workloads, one run.

The demo model (SmolLM2-135M-Instruct) in smgpy's MLX engine, in process, greedy; each workload's
requests are run with ``prompt_lookup_tokens=0`` and with each ``--k``, alternating engines per
round so drift on a shared machine hits both. Reported: decode tokens/s (tokens after each
request's first, over the time from the first token to the last: the prefill is the same with and
without speculation), the best of the rounds, the ratio to no speculation,
the acceptance rate (accepted / drafted tokens) and whether the outputs were identical.

- ``edit``: rewrite a 40-line function with one change (the answer repeats the prompt);
- ``summary``: summarise a document (an answer that quotes some of it);
- ``chat``: free chat (little repetition: speculation must back off and cost nothing).

    python benches/speculative.py --clients 1 --k 4 8
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from _blas import find_blas, preload_here

CODE = "\n".join(
    f"    total_{i} = compute_value(items[{i}], factor={i % 7}) + offset_{i % 5}  # step {i}" for i in range(40)
)
EDIT = (
    "Here is a Python function:\n\n```python\ndef process(items):\n" + CODE + "\n    return total_39\n```\n\n"
    "Rewrite the whole function, unchanged except that `compute_value` is renamed `calc_value`."
)
DOC = " ".join(
    f"The {w} river flows through the valley of {c}, where farmers grow {g} and trade it in the market."
    for w, c, g in [
        ("northern", "Arden", "barley"),
        ("eastern", "Bellmoor", "apples"),
        ("western", "Corvin", "wheat"),
        ("southern", "Dunmere", "grapes"),
        ("great", "Elmsworth", "rye"),
        ("old", "Fenwick", "oats"),
    ]
)
SUMMARY = f"Summarise this document, quoting its sentences where you can:\n\n{DOC}"
CHAT = [
    "Tell me a story about a dragon.",
    "Explain how a car engine works.",
    "What are the benefits of exercise?",
    "Write a poem about the sea.",
]
WORKLOADS = {"edit": [EDIT], "summary": [SUMMARY], "chat": CHAT}


def render(engine: Any, question: str) -> str:
    from smgpy import _native

    template = _native.ChatTemplate(engine.chat_template, engine.special_tokens)
    return template.render([{"role": "user", "content": question}], add_generation_prompt=True)


async def run(engine: Any, prompts: list[str], clients: int, max_tokens: int) -> tuple[list[list[int]], float]:
    """Every prompt ``clients`` times at once; the outputs, and the decode time: from the first
    token of the first request to the last token of the last (prefill, which speculation does not
    change, left out)."""
    firsts: list[float] = []

    async def one(i: int, text: str) -> list[int]:
        obj = SimpleNamespace(
            rid=f"b{i}-{time.monotonic_ns()}",
            text=text,
            input_ids=None,
            sampling_params={"temperature": 0, "max_new_tokens": max_tokens},
        )
        ids: list[int] = []
        async for out in engine.generate_request(obj):
            if not ids:
                firsts.append(time.perf_counter())
            ids += out["output_ids"]
        return ids

    total = 0.0
    outs: list[list[int]] = []
    for p in prompts:  # one prompt at a time (its clients together), so each prefill is left out
        firsts.clear()
        got = list(await asyncio.gather(*(one(i, p) for i in range(clients))))
        total += time.perf_counter() - min(firsts)
        outs += got
    return outs, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8], help="draft tokens per step to compare with 0")
    ap.add_argument("--clients", type=int, nargs="+", default=[1])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    ap.add_argument("--cpu-blas", default="auto", help="BLAS for MLX's CPU backend (see benches/_blas.py)")
    args = ap.parse_args()
    preload_here(find_blas(args.cpu_blas))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from conftest import demo_engine

    engines = {k: demo_engine(prompt_lookup_tokens=k) for k in [0, *args.k]}
    base = engines[0]
    for name in args.workloads:
        prompts = [render(base, q) for q in WORKLOADS[name]]
        for clients in args.clients:
            rate: dict[int, list[float]] = {k: [] for k in engines}
            outputs: dict[int, list[list[int]]] = {}
            drafted = {k: [0, 0] for k in engines}
            for _ in range(args.rounds):
                for k, engine in engines.items():
                    before = _lookup_totals(engine)
                    outs, secs = asyncio.run(run(engine, prompts, clients, args.max_tokens))
                    after = _lookup_totals(engine)
                    drafted[k][0] += after[0] - before[0]
                    drafted[k][1] += after[1] - before[1]
                    rate[k].append((sum(map(len, outs)) - len(outs)) / secs)
                    outputs[k] = outs
            tps0 = max(rate[0])
            line = f"{name:8s} {clients:2d} client(s), {sum(map(len, outputs[0]))} tokens: k=0 {tps0:6.1f} tok/s"
            for k in args.k:
                tps = max(rate[k])
                same = "same" if outputs[k] == outputs[0] else "DIFFERENT"
                proposed, accepted = drafted[k]
                acc = f"{accepted}/{proposed} accepted" if proposed else "no drafts"
                line += f" | k={k} {tps:6.1f} tok/s {tps / tps0:4.2f}x {same}, {acc}"
            print(line, flush=True)
    for engine in engines.values():
        engine.shutdown()


def _lookup_totals(engine: Any) -> tuple[int, int]:
    s = engine._sched
    return s.lookup_proposed, s.lookup_accepted


if __name__ == "__main__":
    main()
