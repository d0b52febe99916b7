"""Cost of structured output (``response_format: json_object``) on the MLX engine.

Two numbers: the time to compute one step's token mask over the demo model's 49,152-token
vocabulary in typical states (``smgpy._native.JsonMatcher.mask``), and decode throughput of the
served demo model with and without ``json_object`` on the same prompts (greedy), in one process,
alternating, so the ratio is read on the same machine state. None of the MLX peers constrains
its output (``mlx_lm.server`` accepts ``response_format`` and ignores it), so there is no peer column.

    python benches/structured.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from smgpy.mlx import MLXEngine, demo_gguf_path  # noqa: E402
from smgpy.mlx.structured import build_vocab  # noqa: E402

PROMPTS = [
    'Return a JSON object with keys "name" and "age" for a person called Ann who is 30.',
    "Describe a cat as a JSON object with a name, a color and three favourite foods.",
    'What is the capital of France? Answer in JSON with the key "capital".',
]
STATES = {
    "start": "",
    "inside a string": '{"name": "Fe',
    "after a key": '{"a": 1, "b"',
    "inside an array of numbers": '{"a": [1, 2',
    "complete": '{"a": 1}',
}


SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array"}},
        "required": ["name", "age", "tags"],
        "additionalProperties": False,
    }
)
SCHEMA_STATES = {
    "start": "",
    "inside a key": '{"na',
    "inside a string": '{"name": "Fe',
    "integer": '{"name": "Ann", "age": 3',
    "free array": '{"name": "Ann", "age": 3, "tags": [1, ',
}

# What `tool_choice: "required"` sends for two tools: a list of calls tagged by name.
CALLS_SCHEMA = json.dumps(
    {
        "type": "array",
        "minItems": 1,
        "items": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "name": {"const": name},
                        "parameters": {"type": "object", "properties": props, "required": list(props)},
                    },
                    "required": ["name", "parameters"],
                }
                for name, props in (
                    ("get_weather", {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}}),
                    ("get_time", {"timezone": {"type": "string"}, "offset": {"type": "integer"}}),
                )
            ]
        },
    }
)
CALLS_STATES = {
    "start": "",
    "inside the tag": '[{"name": "get_',
    "parameters of the tagged tool": '[{"name": "get_time", "parameters": {"time',
    "inside a string argument": '[{"name": "get_weather", "parameters": {"city": "Pa',
}


def mask_times(engine: MLXEngine) -> None:
    hf = engine._hf
    t = time.perf_counter()
    vocab = build_vocab(hf, engine.eos_token_ids)
    print(f"vocabulary of {len(vocab)} tokens read as bytes in {(time.perf_counter() - t) * 1e3:.0f} ms\n")
    print("| matcher | state | allowed tokens | mask time (ms) |\n|---|---|---:|---:|")
    for name, states, make in (
        ("json_object", STATES, lambda: vocab.matcher()),
        ("json_schema", SCHEMA_STATES, lambda: vocab.matcher(schema=SCHEMA)),
        ("tool calls (required)", CALLS_STATES, lambda: vocab.matcher(schema=CALLS_SCHEMA)),
    ):
        for label, prefix in states.items():
            m = make()
            for token in hf.encode(prefix) if prefix else []:
                m.accept(token)
            runs = []
            for _ in range(20):
                t = time.perf_counter()
                mask = m.mask(engine.vocab_size)
                runs.append(time.perf_counter() - t)
            print(f"| {name} | {label} | {sum(mask)} | {min(runs) * 1e3:.2f} |")


def throughput(engine: MLXEngine, rounds: int) -> None:
    import openai
    from conftest import serve_in_thread

    with serve_in_thread(engine) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300)

        def run(json_mode: bool) -> float:
            tokens, elapsed = 0, 0.0
            for p in PROMPTS:
                extra = {"response_format": {"type": "json_object"}} if json_mode else {}
                t = time.perf_counter()
                r = client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": p}], max_tokens=64, temperature=0, **extra
                )
                elapsed += time.perf_counter() - t
                tokens += r.usage.completion_tokens if r.usage else 0
            return tokens / elapsed

        run(True)  # builds the vocabulary once, warms both paths
        plain, constrained = [], []
        for _ in range(rounds):
            plain.append(run(False))
            constrained.append(run(True))
        p, c = statistics.median(plain), statistics.median(constrained)
        print("\n| mode | tokens/s (median of rounds) |\n|---|---:|")
        print(f"| plain | {p:.1f} |\n| json_object | {c:.1f} |\n\njson_object / plain: {c / p:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--masks-only", action="store_true", help="only the mask times")
    args = ap.parse_args()
    engine = MLXEngine.from_pretrained(str(demo_gguf_path()), max_running=4)
    try:
        mask_times(engine)
        if not args.masks_only:
            throughput(engine, args.rounds)
    finally:
        engine.shutdown()


if __name__ == "__main__":
    main()
