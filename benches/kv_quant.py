"""The quantized KV cache (``--kv-bits``): memory per cached token, what it costs in quality, and
what it does to tokens/s, against the unquantized cache in the same run.

The MLX engine in-process (no HTTP) on a real model (default: the demo model, SmolLM2-135M-Instruct),
once per setting (unquantized, then each ``--bits``), on the same ``--prompts`` chat prompts (100:
ten kinds of task over ten subjects), greedy, ``--max-tokens`` each, ``--clients`` at a time:

- **bytes per cached token**: the running batch's key and value buffers over their slots
  (rows x columns), as loaded (the demo model runs in float32 on a CPU, so its scales and biases
  are 32-bit too), and computed for a 16-bit model (the same widths, 16-bit scales and biases);
- **greedy agreement**: the share of prompts whose whole output equals the unquantized one, and the
  share of tokens generated before a prompt's first difference;
- **logprob difference**: the mean absolute difference of the chosen tokens' logprobs, over the
  positions before each prompt's first difference (there both caches saw the same context);
- **tokens/s** of each setting (one run each, so noisy; the engine is rebuilt between settings).

Run: ``python benches/kv_quant.py [--bits 8 4] [--group-size 64] [--cpu-blas auto]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _blas import add_cpu_blas_argument, find_blas, preload_here

TASKS = [
    "Explain in two sentences how {} works.",
    "Write a haiku about {}.",
    "List three facts about {}.",
    "Summarize the history of {} in one paragraph.",
    "Give a beginner one piece of advice about {}.",
    "Describe {} to a child.",
    "What are the pros and cons of {}?",
    "Write a short product description for {}.",
    "Ask me three quiz questions about {}.",
    "Compare {} with its most common alternative.",
]
SUBJECTS = [
    "photosynthesis",
    "the printing press",
    "bicycles",
    "volcanoes",
    "public libraries",
    "coffee",
    "the Roman Empire",
    "solar panels",
    "chess",
    "rainforests",
]


def prompts(n: int) -> list[str]:
    return [t.format(s) for t in TASKS for s in SUBJECTS][:n]


async def run_all(engine: Any, texts: list[str], max_tokens: int, clients: int) -> list[tuple[list[int], list[float]]]:
    from smgpy.engine import GenerateReqInput

    gate = asyncio.Semaphore(clients)

    async def one(text: str) -> tuple[list[int], list[float]]:
        async with gate:
            ids: list[int] = []
            lps: list[float] = []
            obj = GenerateReqInput(
                text=text,
                sampling_params={"temperature": 0, "max_new_tokens": max_tokens, "ignore_eos": True},
                return_logprob=True,
                stream=True,
            )
            async for out in engine.generate_request(obj):
                ids.extend(out["output_ids"])
                lps.extend(lp for lp, _, _ in out["meta_info"].get("output_token_logprobs") or [])
            return ids, lps

    return list(await asyncio.gather(*(one(t) for t in texts)))


def measure(model: str, bits: int | None, group: int, texts: list[str], args: argparse.Namespace) -> dict[str, Any]:
    from smgpy.mlx import MLXEngine

    engine = MLXEngine.from_pretrained(
        model, max_running=args.clients, prefix_cache_bytes=0, kv_bits=bits, kv_group_size=group
    )
    try:
        rendered = [
            engine._hf.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True, tokenize=False)
            for t in texts
        ]
        asyncio.run(run_all(engine, rendered[:2], 4, args.clients))  # warm-up
        t0 = time.perf_counter()
        outs = asyncio.run(run_all(engine, rendered, args.max_tokens, args.clients))
        wall = time.perf_counter() - t0
        batch = engine._sched.batch
        first = batch.caches[0]._k[0]
        per_token = batch.nbytes / (first.shape[0] * first.shape[2])
        # Heads x channels of every layer's keys and values (meaningful unquantized only).
        widths = sum(p[0].shape[1] * p[0].shape[3] for c in batch.caches for p in (c._k, c._v))
        return {
            "bits": bits,
            "outs": outs,
            "tok_s": sum(len(i) for i, _ in outs) / wall,
            "bytes_per_token": per_token,
            "bytes_per_token_16bit": widths * 2,
        }
    finally:
        engine.shutdown()


def compare(base: dict[str, Any], other: dict[str, Any]) -> dict[str, float]:
    same = 0
    before = 0
    total = 0
    diffs: list[float] = []
    for (ids_a, lp_a), (ids_b, lp_b) in zip(base["outs"], other["outs"], strict=True):
        total += len(ids_a)
        k = next((i for i, (a, b) in enumerate(zip(ids_a, ids_b, strict=True)) if a != b), len(ids_a))
        same += k == len(ids_a)
        before += k
        # Positions up to and including the first difference saw the same context on both sides.
        diffs.extend(abs(lp_a[i] - lp_b[i]) for i in range(min(k + 1, len(ids_a))) if ids_a[i] == ids_b[i])
    return {
        "identical_outputs": same / len(base["outs"]),
        "tokens_before_first_difference": before / total,
        "mean_abs_logprob_diff": statistics.fmean(diffs) if diffs else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model directory or .gguf (default: the demo model)")
    ap.add_argument("--bits", type=int, nargs="+", default=[8, 4])
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=100)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--clients", type=int, default=8)
    add_cpu_blas_argument(ap, default="auto", used_by="MLX's CPU backend")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    preload_here(find_blas(args.cpu_blas))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    model = args.model
    if model is None:
        from smgpy.mlx.demo import demo_gguf_path

        model = str(demo_gguf_path())
    texts = prompts(args.prompts)
    base = measure(model, None, args.group_size, texts, args)
    rows = []
    for bits in args.bits:
        r = measure(model, bits, args.group_size, texts, args)
        # The same layout with 16-bit scales and biases (a 16-bit model's), from the element count.
        elements = base["bytes_per_token_16bit"] / 2
        at_16 = elements * (bits / 8 + 2 * 2 / args.group_size)
        rows.append(
            {
                "bits": bits,
                **compare(base, r),
                "tok_s": r["tok_s"],
                "bytes_per_token": r["bytes_per_token"],
                "bytes_per_token_16bit": at_16,
            }
        )
    print(f"model {model}: {len(texts)} prompts, {args.max_tokens} greedy tokens each, {args.clients} at a time")
    print(
        f"unquantized: {base['bytes_per_token']:,.0f} B/token as loaded, "
        f"{base['bytes_per_token_16bit']:,.0f} at 16-bit; {base['tok_s']:.1f} tok/s"
    )
    print(
        "| kv bits | B/token as loaded (less) | B/token, 16-bit model (less) | identical outputs "
        "| tokens before 1st diff | mean abs logprob diff | tok/s | vs unquantized |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        loaded = f"{r['bytes_per_token']:,.0f} ({base['bytes_per_token'] / r['bytes_per_token']:.2f}x)"
        at_16 = f"{r['bytes_per_token_16bit']:,.0f} ({base['bytes_per_token_16bit'] / r['bytes_per_token_16bit']:.2f}x)"
        print(
            f"| {r['bits']}, groups of {args.group_size} | {loaded} | {at_16} "
            f"| {r['identical_outputs']:.0%} | {r['tokens_before_first_difference']:.1%} "
            f"| {r['mean_abs_logprob_diff']:.4f} | {r['tok_s']:.1f} | {r['tok_s'] / base['tok_s']:.2f}x |"
        )
    if args.out:
        args.out.write_text(json.dumps({"base_tok_s": base["tok_s"], "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
