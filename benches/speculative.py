"""Prompt-lookup speculation (#35): tokens/s with and without, on three workloads, one run.

The demo model (SmolLM2-135M-Instruct) in smgpy's MLX engine, in process, greedy (or sampled at
``--temperature``, where outputs differ by design and sampled speculation's accept/reject rule is
what is measured); each workload's
requests are run with ``prompt_lookup_tokens=0`` and with each ``--k``, alternating engines per
round so drift on a shared machine hits both. Reported: decode tokens/s (tokens after each
request's first, over the time from the first token to the last: the prefill is the same with and
without speculation), the best of the rounds, the ratio to no speculation,
the acceptance rate (accepted / drafted tokens) and whether the outputs were identical.

- ``edit``: rewrite a 60-line file with one change (a parameter renamed; the answer repeats the prompt).
  SmolLM2-135M rewrites parts of the file its own way and does not rename: ``benches/lookup_drafts.py``
  replays what a model that does the edit exactly would write;
- ``alike``: rewrite 40 lines that differ only in their numbers, one call renamed (the model writes
  ``total_0 = 0`` and so on instead: lines a lookup drafts all but the number of);
- ``summary``: summarise a document (an answer that quotes some of it);
- ``chat``: free chat (little repetition: speculation must back off and cost nothing);
- ``json``: return five records as JSON under a JSON schema (structured output; a tool call echoing
  its arguments), each drafted position masked by the constraint.

    python benches/speculative.py --clients 1 --k 4 8
    python benches/speculative.py --clients 1 --k 8 --temperature 0.7
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from _blas import add_cpu_blas_argument, find_blas, preload_here

FILE = '''def fetch_records(client, table, since, limit=100, retries=3):
    """Fetch the rows of a table changed since a timestamp, page by page."""
    records = []
    cursor = None
    while True:
        params = {"table": table, "since": since, "limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        for attempt in range(retries):
            try:
                response = client.get("/records", params=params)
                break
            except TimeoutError:
                if attempt == retries - 1:
                    raise
                time.sleep(2 ** attempt)
        if response.status != 200:
            raise RuntimeError(f"fetch failed: {response.status}")
        page = response.json()
        for row in page["rows"]:
            if row.get("deleted"):
                continue
            record = {
                "id": row["id"],
                "name": row["name"].strip(),
                "updated": parse_time(row["updated_at"]),
                "tags": sorted(set(row.get("tags", []))),
            }
            records.append(record)
        cursor = page.get("next")
        if not cursor:
            break
    records.sort(key=lambda r: r["updated"])
    return records


def summarize(records, window=7):
    """Count the records updated in each window of days, and the tags seen in each."""
    if not records:
        return []
    start = records[0]["updated"]
    buckets = []
    current = {"start": start, "count": 0, "tags": set()}
    for record in records:
        while record["updated"] - current["start"] >= window * 86400:
            buckets.append(current)
            current = {"start": current["start"] + window * 86400, "count": 0, "tags": set()}
        current["count"] += 1
        current["tags"].update(record["tags"])
    buckets.append(current)
    return [
        {"start": b["start"], "count": b["count"], "tags": sorted(b["tags"])}
        for b in buckets
    ]


def parse_time(text):
    """Seconds since the epoch of an ISO-8601 timestamp such as 2024-05-01T12:00:00Z."""
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(moment.timestamp())
'''
EDIT = (
    "Rename `retries` to `attempts` in the following code. Reply with the complete updated code."
    f"\n\n```python\n{FILE}```"
)
# What an exact editor answers (``benches/lookup_drafts.py``).
EDITED = f"```python\n{FILE.replace('retries', 'attempts')}```"
CODE = "\n".join(
    f"    total_{i} = compute_value(items[{i}], factor={i % 7}) + offset_{i % 5}  # step {i}" for i in range(40)
)
ALIKE = (
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
RECORDS = [
    {"id": i, "name": n, "city": c, "active": i % 2 == 0}
    for i, (n, c) in enumerate(
        [("Alice", "Arden"), ("Bob", "Bellmoor"), ("Carol", "Corvin"), ("Dan", "Dunmere"), ("Eve", "Elmsworth")]
    )
]
TOOL_ECHO = f"Return these records as a JSON object with the key records, unchanged:\n{json.dumps(RECORDS)}"
RECORDS_SCHEMA = {
    "type": "object",
    "properties": {
        "records": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "name": {"type": "string"},
                    "city": {"type": "string"},
                    "active": {"type": "boolean"},
                },
                "required": ["id", "name", "city", "active"],
            },
        }
    },
    "required": ["records"],
}
WORKLOADS = {"edit": [EDIT], "alike": [ALIKE], "summary": [SUMMARY], "chat": CHAT, "json": [TOOL_ECHO]}
# Extra sampling parameters per workload: ``json`` is constrained by a JSON schema (structured output).
PARAMS: dict[str, dict[str, Any]] = {"json": {"json_schema": json.dumps(RECORDS_SCHEMA)}}


def render(engine: Any, question: str) -> str:
    from smgpy import _native

    template = _native.ChatTemplate(engine.chat_template, engine.special_tokens)
    return template.render([{"role": "user", "content": question}], add_generation_prompt=True)


async def run(
    engine: Any, prompts: list[str], clients: int, max_tokens: int, temperature: float, extra: dict[str, Any]
) -> tuple[list[list[int]], float]:
    """Every prompt ``clients`` times at once; the outputs, and the decode time: from the first
    token of the first request to the last token of the last (prefill, which speculation does not
    change, left out)."""
    firsts: list[float] = []

    async def one(i: int, text: str) -> list[int]:
        obj = SimpleNamespace(
            rid=f"b{i}-{time.monotonic_ns()}",
            text=text,
            input_ids=None,
            sampling_params={"temperature": temperature, "max_new_tokens": max_tokens, **extra},
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
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy (outputs compared); else sampled")
    ap.add_argument(
        "--draft-layers",
        type=int,
        nargs="*",
        default=[],
        help="also a draft model made of the demo model's first N layers (early exit), per N",
    )
    ap.add_argument("--num-draft-tokens", type=int, default=3, help="tokens per step of the draft models")
    ap.add_argument(
        "--model",
        default=None,
        help="the model (a GGUF file or an MLX model directory); default: the demo model, fetched once. "
        "On a device machine, which has no model hub, the demo GGUF carried there (benches/gpu_speculative.sh)",
    )
    add_cpu_blas_argument(ap, default="auto", used_by="MLX's CPU backend")
    args = ap.parse_args()
    preload_here(find_blas(args.cpu_blas))
    from smgpy.mlx import MLXEngine, demo_gguf_path

    model = args.model or str(demo_gguf_path())

    def demo_engine(**options: Any) -> Any:  # no test helpers here: a device machine has no pytest
        return MLXEngine.from_pretrained(model, **options)

    engines: dict[str, Any] = {f"k={k}": demo_engine(prompt_lookup_tokens=k) for k in [0, *args.k]}
    base = engines["k=0"]
    tmp = tempfile.TemporaryDirectory()
    for n in args.draft_layers:
        draft = first_layers(Path(base.model_path), n, Path(tmp.name) / f"draft{n}")
        label = f"draft {n}L k={args.num_draft_tokens}"
        engines[label] = demo_engine(draft_model=str(draft), num_draft_tokens=args.num_draft_tokens)
    for name in args.workloads:
        prompts = [render(base, q) for q in WORKLOADS[name]]
        for clients in args.clients:
            rate: dict[str, list[float]] = {k: [] for k in engines}
            outputs: dict[str, list[list[int]]] = {}
            drafted = {k: [0, 0] for k in engines}
            for _ in range(args.rounds):
                for k, engine in engines.items():
                    before = _lookup_totals(engine)
                    outs, secs = asyncio.run(
                        run(engine, prompts, clients, args.max_tokens, args.temperature, PARAMS.get(name, {}))
                    )
                    after = _lookup_totals(engine)
                    drafted[k][0] += after[0] - before[0]
                    drafted[k][1] += after[1] - before[1]
                    rate[k].append((sum(map(len, outs)) - len(outs)) / secs)
                    outputs[k] = outs
            tps0 = max(rate["k=0"])
            line = f"{name:8s} {clients:2d} client(s), {sum(map(len, outputs['k=0']))} tokens: k=0 {tps0:6.1f} tok/s"
            for k in list(engines)[1:]:
                tps = max(rate[k])
                same = "sampled" if args.temperature else "same" if outputs[k] == outputs["k=0"] else "DIFFERENT"
                proposed, accepted = drafted[k]
                acc = f"{accepted}/{proposed} accepted" if proposed else "no drafts"
                line += f" | {k} {tps:6.1f} tok/s {tps / tps0:4.2f}x {same}, {acc}"
            print(line, flush=True)
    for engine in engines.values():
        engine.shutdown()
    tmp.cleanup()


def first_layers(model_dir: Path, n: int, out: Path) -> Path:
    """An early-exit draft: the model's first ``n`` layers, with its own final norm and head."""
    import mlx.core as mx

    out.mkdir(parents=True)
    for f in model_dir.iterdir():
        if f.is_file() and "safetensors" not in f.name:
            shutil.copy(f, out / f.name)
    config = json.loads((model_dir / "config.json").read_text())
    config["num_hidden_layers"] = n
    (out / "config.json").write_text(json.dumps(config))
    weights: dict[str, Any] = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        weights.update(mx.load(str(f)))
    kept = {k: v for k, v in weights.items() if not k.startswith("model.layers.") or int(k.split(".")[2]) < n}
    mx.save_safetensors(str(out / "model.safetensors"), kept, metadata={"format": "mlx"})
    return out


def _lookup_totals(engine: Any) -> tuple[int, int]:
    s = engine._sched
    return s.drafts_proposed, s.drafts_accepted


if __name__ == "__main__":
    main()
