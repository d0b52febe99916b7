"""A scripted smgpy worker process for the SMG router tests (tests/test_smg.py).

Run: ``python tests/smg_worker.py --port P --name W [--delay SECONDS]``. It serves an engine that
answers with reasoning (``<think>``), a Hermes tool call when the request declares tools, and
otherwise text naming the worker, a token every ``delay`` seconds; SIGTERM drains it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import smgpy

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if tools %}<|tools|>{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class WorkerEngine:
    model_name = "scripted"
    chat_template = TEMPLATE
    context_length = 4096
    vocab_size = 50_000
    max_running_requests = 64

    def __init__(self, name: str, delay: float) -> None:
        self.name = name
        self.delay = delay
        self.running = 0

    def _script(self, obj: Any) -> list[str]:
        text = obj.text or ""
        if "<|tools|>" in text:
            call = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})
            return ["<think>", "the user", " wants weather", "</think>", "<tool_call>", call, "</tool_call>"]
        words = [f" w{i}" for i in range(int(obj.sampling_params.get("max_new_tokens") or 12))]
        return ["<think>", "thinking", "</think>", "Hello", " from", f" {self.name}", *words]

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        script = self._script(obj)
        limit = obj.sampling_params.get("max_new_tokens")
        if limit is not None and "<|tools|>" not in (obj.text or ""):
            script = script[: int(limit)]
        self.running += 1
        try:
            for i, tok in enumerate(script):
                await asyncio.sleep(self.delay)
                last = i == len(script) - 1
                finish = None
                if last:
                    finish = {"type": "length"} if limit is not None and len(script) == limit else {"type": "stop"}
                yield {
                    "delta": tok,
                    "output_ids": [i],
                    "meta_info": {"prompt_tokens": 9, "completion_tokens": i + 1, "finish_reason": finish},
                }
        finally:
            self.running -= 1

    def abort_request(self, rid: str) -> None:
        pass

    def get_load(self) -> dict[str, Any]:
        return {"num_running_reqs": self.running, "num_waiting_reqs": 0, "token_usage": 0.0}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--delay", type=float, default=0.005)
    p.add_argument("--shutdown-timeout", type=float, default=20.0)
    args = p.parse_args()
    smgpy.serve_oai(
        WorkerEngine(args.name, args.delay),
        port=args.port,
        tool_parser="hermes",
        reasoning_parser="qwen3",
        worker_id=args.name,
        shutdown_timeout=args.shutdown_timeout,
        log_level="warn",
    )


if __name__ == "__main__":
    main()
