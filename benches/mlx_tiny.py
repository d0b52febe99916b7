"""Engine and serving overhead where the model costs little: `smgpy serve` vs `mlx_lm.server`.

On an Apple GPU a small model's forward pass takes a few milliseconds, so what a server does per
token in Python (scheduling, detokenizing, handing each token to the HTTP side) decides its
throughput. This bench makes that case on a CPU with a tiny random-weight model: the demo model's
config (SmolLM2-135M, llama) cut to 2 layers, hidden size 64, 2 heads, 1 KV head, head dim 32,
FFN 128, with the demo model's tokenizer (~3M parameters, most of them the 49,152 x 64 embedding).

Both servers load the same directory and are driven one at a time, in alternating order: streaming
greedy chat completions of ``--max-tokens`` (64) tokens at 1, 8 and 32 concurrent clients, each
client sending its requests back to back. Reported per server: aggregate tokens/s (tokens actually
received: ``usage.completion_tokens``, else the content chunks), mean time to first token and the
errors; then the ratio, median of rounds. A request that fails (a refused connection, a 5xx, a
broken stream) is counted and reported, not raised.

Every token the model can emit is an ordinary one: the embedding rows of the tokenizer's special
tokens (EOS, padding, chat markers) are zero, so with tied embeddings their logit is 0 while the
largest of ~49k random logits is positive, and greedy decoding never stops early. Neither server
is asked to ignore EOS (``mlx_lm.server`` has no such option); the bench checks the token counts.

The model's own cost is measured too, in this process: the bare model's decode step (``model(x)``
+ argmax) at each batch size, one step at a time and pipelined (the next step queued before the
current one is read, as mlx-lm's generators do). The pipelined rate bounds any server's tokens/s,
so ``bare / mlx_lm.server`` is the largest ratio any server could reach against it here.
With the CPU as it is installed (``--cpu-blas off``, the default) the 49,152-wide output product
runs on the reference BLAS the Linux ``mlx[cpu]`` wheel links and costs more than the rest of a
step; ``--cpu-blas auto`` runs both servers (through ``LD_PRELOAD``) and the bare-step measurement
(preloaded in this process) on OpenBLAS (or BLIS, MKL; see ``benches/_blas.py``), which makes the
step cheap enough for the servers' own overhead to show.

``--shape tiny|135m|1.7b`` and ``--dtype`` pick the random-weight llama (the tiny one above, or one of
SmolLM2-135M's or SmolLM2-1.7B's sizes), ``--tokenizer DIR`` the tokenizer files where the demo model
cannot be fetched (a device machine: ``benches/gpu_table.sh`` runs issue #32's GPU table there), and
``--per-client`` how many requests each client sends back to back (a steady state, not the ramp).

Run: ``python benches/mlx_tiny.py [--rounds 3] [--cpu-blas off|auto] [--max-running N] [--shape S --dtype D]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _blas import add_cpu_blas_argument, child_env, find_blas, preload_here
from _servers import QUESTIONS, free_port, mlx_lm_server_cmd, running, smgpy_serve_cmd, streamed_chat

CONCURRENCY = (1, 8, 32)
TINY = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "intermediate_size": 128,
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
REQUEST_TIMEOUT = 300.0
STARTUP_TIMEOUT = 300.0


# ----- the model -----


SHAPES: dict[str, dict[str, Any]] = {
    "tiny": TINY,
    # SmolLM2-135M's own sizes.
    "135m": {
        "num_hidden_layers": 30,
        "hidden_size": 576,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "head_dim": 64,
        "intermediate_size": 1536,
    },
    # SmolLM2-1.7B's sizes.
    "1.7b": {
        "num_hidden_layers": 24,
        "hidden_size": 2048,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 64,
        "intermediate_size": 8192,
    },
}


def build_model(out: Path, shape: str, dtype: str, tokenizer: Path | None, seed: int = 0) -> Path:
    """A random-weight llama of ``shape`` with the demo model's tokenizer (special tokens' rows
    zeroed, so greedy decoding never ends early)."""
    if tokenizer is None:
        from smgpy.mlx import demo_gguf_path, resolve_model

        tokenizer = Path(resolve_model(str(demo_gguf_path()), dtype="float32")[0])
    config: dict[str, Any] = {
        "model_type": "llama",
        "vocab_size": 49152,
        "rms_norm_eps": 1e-5,
        "rope_theta": 100000.0,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
        "torch_dtype": dtype,
    }
    config.update(SHAPES[shape])
    return write_random_llama(out, config, tokenizer, seed, dtype)


def write_random_llama(out: Path, config: dict[str, Any], tokenizer: Path, seed: int, dtype: str = "float32") -> Path:
    """Write an mlx-lm llama of ``config`` with random weights of ``dtype`` to ``out``, with the tokenizer
    files of the directory ``tokenizer``, the embedding rows of its special tokens zeroed (so greedy
    decoding never ends early)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten, tree_map
    from mlx_lm.models.llama import Model, ModelArgs

    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (tokenizer / name).exists():
            shutil.copy(tokenizer / name, out / name)
    mx.random.seed(seed)
    model = Model(ModelArgs.from_dict(config))
    mx_dtype = getattr(mx, dtype)
    model.update(tree_map(lambda p: p.astype(mx_dtype), model.parameters()))
    weights = dict(tree_flatten(model.parameters()))
    added = json.loads((tokenizer / "tokenizer.json").read_text()).get("added_tokens", [])
    special = sorted(t["id"] for t in added if t.get("special"))
    embed = weights["model.embed_tokens.weight"]
    keep = mx.ones((embed.shape[0], 1), dtype=embed.dtype)
    if special:
        keep[mx.array(special)] = 0.0
    weights["model.embed_tokens.weight"] = embed * keep
    mx.eval(weights)
    # mlx-lm's loader reads config.json and model*.safetensors (utils.load_model).
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def forward_step_rates(
    model_dir: Path, batch_sizes: tuple[int, ...], steps: int = 40, host_us: dict[int, float] | None = None
) -> dict[int, tuple[float, float]]:
    """Tokens/s of the bare model's decode step (forward + argmax) at each batch size: evaluated
    one step at a time, and pipelined (the next step queued with ``mx.async_eval`` before the
    current one is read, as mlx-lm's generators do), which bounds any server's tokens/s.
    ``host_us`` receives the calling thread's CPU time per pipelined step (building and queueing
    the model's graph), when given."""
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.models.cache import make_prompt_cache

    model, _ = load(str(model_dir))
    rates = {}
    for b in batch_sizes:
        cache = make_prompt_cache(model)
        mx.eval(model(mx.full((b, 24), 5, dtype=mx.int32), cache=cache))

        def step(y: Any, cache: Any = cache) -> Any:
            return mx.argmax(model(y, cache=cache)[:, -1], axis=-1)[:, None]

        y = mx.full((b, 1), 7, dtype=mx.int32)
        for _ in range(5):
            y = step(y)
            mx.eval(y)
        t0 = time.perf_counter()
        for _ in range(steps):
            y = step(y)
            mx.eval(y)
        synchronous = b * steps / (time.perf_counter() - t0)
        mx.async_eval(y)
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(steps):
            nxt = step(y)
            mx.async_eval(nxt)
            y.tolist()
            y = nxt
        rates[b] = (synchronous, b * steps / (time.perf_counter() - t0))
        if host_us is not None:
            host_us[b] = (time.thread_time() - c0) / steps * 1e6
    return rates


# ----- the servers -----


@contextmanager
def server(cmd: list[str], port: int, log_path: str, env: dict[str, str] | None = None) -> Iterator[int]:
    """Start a server subprocess and wait (bounded) until ``/v1/models`` answers; yields its pid."""
    url = f"http://127.0.0.1:{port}/v1/models"
    with running(cmd, url, name=cmd[2], log_path=log_path, env=env, startup_timeout=STARTUP_TIMEOUT) as proc:
        yield proc.pid


# ----- the client: plain asyncio streams, so the load generator costs little per token -----


@dataclass
class Reply:
    tokens: int = 0  # usage.completion_tokens, else content chunks
    chunks: int = 0  # SSE events with non-empty content
    ttft: float = 0.0
    text: str = ""
    error: str | None = None


async def _read_body(reader: asyncio.StreamReader, chunked: bool) -> Any:
    """Yield the body's bytes as they arrive (HTTP/1.1 chunked, or until the server closes)."""
    if not chunked:
        while data := await reader.read(65536):
            yield data
        return
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            return
        data = await reader.readexactly(size + 2)
        yield data[:-2]


async def chat(port: int, model: str, prompt: str, max_tokens: int) -> Reply:
    body = json.dumps(streamed_chat(model, [{"role": "user", "content": prompt}], max_tokens)).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    reply = Reply()
    t0 = time.perf_counter()
    usage: int | None = None
    parts: list[str] = []
    writer = None
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head + body)
        status_line, *headers = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        chunked = any(h.lower().startswith("transfer-encoding:") and "chunked" in h.lower() for h in headers)
        if status != 200:
            text = b"".join([d async for d in _read_body(reader, chunked)]).decode(errors="replace")
            reply.error = f"HTTP {status}: {text[:120]}"
            return reply
        buf = b""
        async for data in _read_body(reader, chunked):
            buf += data
            *events, buf = buf.split(b"\n\n")
            for event in events:
                if not event.startswith(b"data: ") or event == b"data: [DONE]":
                    continue
                msg = json.loads(event[6:])
                if msg.get("usage"):
                    usage = msg["usage"].get("completion_tokens")
                for choice in msg.get("choices") or ():
                    content = (choice.get("delta") or {}).get("content")
                    if content:
                        if not reply.chunks:
                            reply.ttft = time.perf_counter() - t0
                        reply.chunks += 1
                        parts.append(content)
                if msg.get("error"):
                    reply.error = f"stream error: {str(msg['error'])[:120]}"
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
        reply.error = f"{type(e).__name__}: {str(e)[:120]}"
    finally:
        if writer is not None:
            writer.close()
    reply.tokens = usage if usage is not None else reply.chunks
    reply.text = "".join(parts)
    return reply


@dataclass
class Load:
    tokens_per_s: float
    ttft_s: float
    requests: int
    tokens: int
    short: int  # requests that received fewer than max_tokens tokens (errors excluded)
    errors: list[str] = field(default_factory=list)
    client_cpu_us_per_token: float = 0.0


async def drive(port: int, model: str, clients: int, per_client: int, max_tokens: int, tag: str) -> Load:
    """``clients`` concurrent clients, each sending ``per_client`` requests back to back."""

    async def client(i: int) -> list[Reply]:
        out = []
        for j in range(per_client):
            prompt = f"[{tag} {i}.{j}] {QUESTIONS[(i + j) % len(QUESTIONS)]}"
            try:
                out.append(await asyncio.wait_for(chat(port, model, prompt, max_tokens), REQUEST_TIMEOUT))
            except asyncio.TimeoutError:
                out.append(Reply(error=f"no answer in {REQUEST_TIMEOUT:.0f}s"))
        return out

    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    replies = [r for rs in await asyncio.gather(*(client(i) for i in range(clients))) for r in rs]
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    ok = [r for r in replies if r.error is None]
    tokens = sum(r.tokens for r in replies)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return Load(
        tokens_per_s=tokens / wall,
        ttft_s=statistics.mean(r.ttft for r in ok) if ok else float("nan"),
        requests=len(replies),
        tokens=tokens,
        short=sum(r.tokens < max_tokens for r in ok),
        errors=[r.error for r in replies if r.error is not None],
        client_cpu_us_per_token=cpu / max(tokens, 1) * 1e6,
    )


# ----- main -----


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (median kept)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--requests", type=int, default=16, help="at least this many requests per measurement (2 per client at least)"
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCY))
    parser.add_argument(
        "--per-client",
        type=int,
        help="requests each client sends per measurement (default: enough for --requests, 2 at least); "
        "a steady state on an accelerator wants 6 or more",
    )
    parser.add_argument("--model-dir", help="where to write the model (default: a temporary directory)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument(
        "--shape", choices=sorted(SHAPES), default="tiny", help="the random-weight llama's sizes (default: tiny)"
    )
    parser.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32")
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=os.environ.get("SMGPY_GPU_TOKENIZER"),
        help="a directory with the demo model's tokenizer files, where the demo model cannot be fetched "
        "(a device machine; default: $SMGPY_GPU_TOKENIZER, else the demo model)",
    )
    add_cpu_blas_argument(parser, default="off", used_by="both servers and the bare step")
    parser.add_argument("--max-running", type=int, help="smgpy serve --max-running (default: smgpy's own)")
    parser.add_argument("--decode-concurrency", type=int, help="mlx_lm.server --decode-concurrency (default: its own)")
    parser.add_argument("--only", choices=("smgpy", "mlx_lm"), help="drive one server only")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    blas = find_blas(args.cpu_blas)
    preload_here(blas)  # before mlx is imported: the model-step rates use it
    tmp = tempfile.TemporaryDirectory(prefix="smgpy-tiny-")
    model_dir = Path(args.model_dir or tmp.name).resolve()
    build_model(model_dir, args.shape, args.dtype, args.tokenizer, args.seed)
    print(
        f"{args.shape} model ({args.dtype}) in {model_dir}; BLAS: {blas or 'bundled reference'} (both servers)",
        flush=True,
    )
    load_before = os.getloadavg()

    steps = forward_step_rates(model_dir, tuple(sorted(set(args.concurrency) | {8})))
    print(
        "bare model decode step (one at a time / pipelined): "
        + ", ".join(f"batch {b}: {r[0]:.0f} / {r[1]:.0f} tok/s" for b, r in steps.items()),
        flush=True,
    )

    server_env = child_env(blas)  # the same BLAS for both servers
    ports = {"smgpy": free_port(), "mlx_lm": free_port()}
    max_running = ["--max-running", str(args.max_running)] if args.max_running else []
    decode_concurrency = ["--decode-concurrency", str(args.decode_concurrency)] if args.decode_concurrency else []
    cmds = {
        "smgpy": smgpy_serve_cmd(str(model_dir), "tiny", ports["smgpy"], *max_running),
        "mlx_lm": mlx_lm_server_cmd(str(model_dir), ports["mlx_lm"], *decode_concurrency),
    }
    keys = [args.only] if args.only else list(cmds)
    models = {"smgpy": "tiny", "mlx_lm": str(model_dir)}
    runs: dict[str, dict[int, list[Load]]] = {k: {c: [] for c in args.concurrency} for k in keys}
    log_dir = os.environ.get("TMPDIR", "/tmp")
    logs = {k: os.path.join(log_dir, f"bench-tiny-{k}.log") for k in cmds}
    with server(cmds["smgpy"], ports["smgpy"], logs["smgpy"], server_env) as pid_s:
        with server(cmds["mlx_lm"], ports["mlx_lm"], logs["mlx_lm"], server_env) as pid_m:
            print(f"pids: smgpy {pid_s}, mlx_lm.server {pid_m}", flush=True)
            # Warm-up (the first MLX calls compile kernels), and both servers must give the same greedy text.
            texts = {}
            for key in keys:
                asyncio.run(drive(ports[key], models[key], 4, 1, args.max_tokens, "warm"))
                texts[key] = asyncio.run(chat(ports[key], models[key], QUESTIONS[0], args.max_tokens))
                r = texts[key]
                print(f"{key}: {r.tokens} tokens, {r.chunks} chunks, error {r.error}: {r.text[:60]!r}", flush=True)
            if len(texts) == 2 and texts["smgpy"].text != texts["mlx_lm"].text:
                print("warning: the two servers' greedy texts differ", flush=True)
            for rnd in range(args.rounds):
                for c in args.concurrency:
                    per_client = args.per_client or max(2, -(-args.requests // c))
                    for key in keys if rnd % 2 == 0 else list(reversed(keys)):
                        r = asyncio.run(drive(ports[key], models[key], c, per_client, args.max_tokens, f"{rnd}"))
                        runs[key][c].append(r)
                        print(
                            f"round {rnd} c={c} {key}: {r.tokens_per_s:.1f} tok/s, ttft {r.ttft_s * 1000:.0f} ms, "
                            f"{r.tokens} tokens in {r.requests} requests, {r.short} short, {len(r.errors)} errors, "
                            f"client {r.client_cpu_us_per_token:.0f} us/token",
                            flush=True,
                        )
                        for e in sorted(set(r.errors))[:3]:
                            print(f"    error: {e}", flush=True)

    # The machine's speed drifts (shared hosts): measure the bound again and keep the faster reading.
    again = forward_step_rates(model_dir, tuple(steps))
    steps = {b: (max(r[0], again[b][0]), max(r[1], again[b][1])) for b, r in steps.items()}
    results: dict[str, Any] = {
        "blas": blas,
        "max_tokens": args.max_tokens,
        "bare_model_tokens_per_s": {str(b): {"one_at_a_time": r[0], "pipelined": r[1]} for b, r in steps.items()},
        "loadavg_1m": {"before": load_before[0], "after": os.getloadavg()[0]},
    }
    for key in keys:
        results[key] = {
            str(c): {
                "tokens_per_s": statistics.median(r.tokens_per_s for r in rs),
                "ttft_s": statistics.median(r.ttft_s for r in rs),
                "rounds_tokens_per_s": [r.tokens_per_s for r in rs],
                "requests": sum(r.requests for r in rs),
                "short": sum(r.short for r in rs),
                "errors": sum(len(r.errors) for r in rs),
                "error_kinds": sorted({e.split(":")[0] for r in rs for e in r.errors}),
            }
            for c, rs in runs[key].items()
        }
    print(json.dumps(results, indent=2))
    if len(keys) == 2:
        print()
        print(
            "| clients | bare model tok/s (pipelined) | smgpy tok/s | mlx_lm.server tok/s | ratio (range) "
            "| ratio bound (bare / mlx_lm) | errors smgpy / mlx_lm |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for c in args.concurrency:
            s, m = results["smgpy"][str(c)], results["mlx_lm"][str(c)]
            ratios = [
                a.tokens_per_s / b.tokens_per_s
                for a, b in zip(runs["smgpy"][c], runs["mlx_lm"][c], strict=True)
                if b.tokens
            ]
            ratio = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})" if ratios else "-"
            bound = steps[c][1] / m["tokens_per_s"] if m["tokens_per_s"] else float("nan")
            print(
                f"| {c} | {steps[c][1]:.0f} | {s['tokens_per_s']:.1f} | {m['tokens_per_s']:.1f} | {ratio} "
                f"| {bound:.2f}x | {s['errors']} / {m['errors']} of {s['requests']} |"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    tmp.cleanup()


if __name__ == "__main__":
    main()
