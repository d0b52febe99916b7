"""The draft model's prefix cache (#35, item 2): a conversation's second turn with and without it.

A draft-model engine (the target drafting for itself, so every row drafts) answers a long first
prompt; the second turn resends it with the answer and a new message. With the draft's prefix
cache, the row's draft cache joins from what the first turn's row left there and the draft model
prefills only the rest; without it (the cache replaced by an empty one), the draft model prefills
the whole context again when the row first drafts. The target's own prefix cache is on in both,
so the difference is the draft's alone. Reported per engine (alternating, ``--rounds`` each): the
draft tokens prefilled for turn 2, its time to first token and its whole time.

A tiny random-weight llama (``tests/tiny_models.py``), in process, greedy.

    python benches/draft_cache.py [--prompt 1900] [--rounds 2] [--cpu-blas auto]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _blas import add_cpu_blas_argument, find_blas, preload_here


def _turn(engine: Any, ids: list[int], max_tokens: int) -> tuple[list[int], float, float]:
    from smgpy.engine import GenerateReqInput

    async def main() -> tuple[list[int], float, float]:
        out: list[int] = []
        t0 = time.perf_counter()
        first = 0.0
        params = {"temperature": 0, "max_new_tokens": max_tokens, "ignore_eos": True}
        async for o in engine.generate_request(GenerateReqInput(input_ids=ids, sampling_params=params)):
            first = first or time.perf_counter() - t0
            out += o["output_ids"]
        return out, first, time.perf_counter() - t0

    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompt", type=int, default=1900, help="first prompt's tokens")
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    add_cpu_blas_argument(ap, default="off", used_by="MLX's CPU backend")
    args = ap.parse_args()
    preload_here(find_blas(args.cpu_blas))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import tiny_models
    from smgpy.mlx import MLXEngine
    from smgpy.mlx.pacing import StepCost
    from smgpy.mlx.prefix_cache import PrefixCache

    model = tiny_models.build("llama", Path(tempfile.mkdtemp(prefix="smgpy-draft-cache-")), seed=0)
    rng = random.Random(0)
    first = [rng.randrange(1000, 40000) for _ in range(args.prompt)]
    new_message = [rng.randrange(1000, 40000) for _ in range(20)]
    runs: dict[bool, list[tuple[int, float, float]]] = {False: [], True: []}
    for i in range(args.rounds):
        for with_cache in (False, True) if i % 2 == 0 else (True, False):
            engine = MLXEngine(
                str(model), max_running=4, prefix_cache_bytes=256 << 20, draft_model=str(model), num_draft_tokens=3
            )
            engine._sched.cost = StepCost(learn=False)  # verify whenever a row drafts (see tests)
            draft = engine._sched.draft_batch
            if not with_cache:
                draft.cache = PrefixCache(0)
            answer, _, _ = _turn(engine, first, args.max_tokens)
            time.sleep(0.2)  # the first turn's row is freed on the MLX thread's next turn
            before = draft.prefilled
            _, ttft, total = _turn(engine, first + answer + new_message, args.max_tokens)
            runs[with_cache].append((draft.prefilled - before, ttft, total))
            engine.shutdown()
    print(f"turn 2 of {args.prompt + args.max_tokens + 20} tokens, median of {args.rounds}")
    print("| draft prefix cache | draft tokens prefilled | TTFT ms | turn ms |")
    print("|---|---:|---:|---:|")
    for with_cache, r in runs.items():
        med = [statistics.median(x[j] for x in r) for j in range(3)]
        print(f"| {'on' if with_cache else 'off'} | {med[0]:.0f} | {med[1] * 1e3:.0f} | {med[2] * 1e3:.0f} |")


if __name__ == "__main__":
    main()
