"""The peer for benches/bridge.py: a minimal pure-Python OpenAI streaming server
(Starlette + uvicorn + orjson), same engine, same SSE framing as smgpy."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).parent))
from fast_engine import make_engine  # noqa: E402

engine = make_engine(sys.argv[2] if len(sys.argv) > 2 else "fast")


class Req:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


async def chat(request: Request) -> StreamingResponse | JSONResponse:
    body = orjson.loads(await request.body())
    rid = f"chatcmpl-{uuid.uuid4().hex}"
    prompt = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in body["messages"])
    sp = {"max_new_tokens": body["max_tokens"]} if body.get("max_tokens") else {}
    obj = Req(rid=rid, text=prompt + "<|im_start|>assistant\n", sampling_params=sp, stream=True)
    created = int(time.time())
    base = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": "fast",
        "system_fingerprint": "fp_py",
    }

    async def gen() -> AsyncIterator[bytes]:
        first = {
            **base,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            ],
        }
        yield b"data: " + orjson.dumps(first) + b"\n\n"
        finish = None
        async for out in engine.generate_request(obj):
            chunk = {
                **base,
                "choices": [{"index": 0, "delta": {"content": out["delta"]}, "logprobs": None, "finish_reason": None}],
            }
            yield b"data: " + orjson.dumps(chunk) + b"\n\n"
            fr = out["meta_info"]["finish_reason"]
            if fr:
                finish = fr["type"]
        last = {**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}]}
        yield b"data: " + orjson.dumps(last) + b"\n\n"
        yield b"data: [DONE]\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream")


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/health", health)])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
