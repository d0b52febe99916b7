"""Another client's stream while huge request bodies arrive (#38, item 2).

A scripted engine streams a token every 5 ms to one client. Meanwhile ``--senders`` clients each
post a chat body of ``--messages`` empty messages (a million: 33 MB). Reported per round: the
longest gap between the stream's reads while the bodies are sent and answered (goal <= 100 ms),
when in the round it fell, and how long the round took.

Every party is its own process: the server, the stream's reader and each sender. A reader that
shares a process with the senders measures its own pauses instead (starting the senders, its GIL):
that once put the longest gap of a first round at 130-143 ms that the server did not cause.

``--invalid`` sends a body that fails validation after parsing (``max_tokens: -5``), so the
template and the engine are left out and what remains is reading and parsing.

Run: ``python benches/heavy_bodies.py [--rounds 5] [--messages 1000000] [--senders 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _servers import free_port, running, stream_read_times  # noqa: E402

TOKEN_EVERY_S = 0.005


class StreamEngine:
    """A text engine that yields one token every 5 ms, up to the request's ``max_new_tokens``."""

    model_name = "stream"
    context_length = 1 << 30
    chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        import asyncio

        limit = obj.sampling_params.get("max_new_tokens") or 100_000
        for i in range(limit):
            await asyncio.sleep(TOKEN_EVERY_S)
            done = i + 1 == limit
            yield {
                "delta": "t",
                "meta_info": {
                    "prompt_tokens": 1,
                    "completion_tokens": i + 1,
                    "finish_reason": {"type": "length", "length": limit} if done else None,
                },
            }

    def abort_request(self, rid: str) -> None:
        return None


def serve(port: int) -> None:
    import smgpy

    smgpy.serve_oai(StreamEngine(), port=port, log_level="error", max_body_bytes=64 << 20)


def read_stream(port: int, seconds: float) -> None:
    """Stream one chat completion until stdin has a line (at most ``seconds``); print the monotonic
    time of every read (JSON)."""
    body = {"messages": [{"role": "user", "content": "hi"}], "stream": True}
    print(json.dumps(stream_read_times(port, body, seconds)))


def send_body(port: int, path: str) -> None:
    """Post the file at ``path`` as a chat body; print the status line's code."""
    size = os.path.getsize(path)
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
        b"connection: close\r\ncontent-length: %d\r\n\r\n" % size
    )
    with socket.create_connection(("127.0.0.1", port)) as s, open(path, "rb") as f:
        s.sendall(head)
        s.sendfile(f)
        answer = b""
        while chunk := s.recv(1 << 16):
            answer += chunk
    print(answer.split(b" ", 2)[1].decode() if answer else "none")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--senders", type=int, default=4)
    ap.add_argument("--invalid", action="store_true", help="bodies that fail validation after parsing")
    ap.add_argument("--role", choices=["serve", "read", "send"], help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.role == "serve":
        return serve(a.port)
    if a.role == "read":
        return read_stream(a.port, a.seconds)
    if a.role == "send":
        return send_body(a.port, a.path)

    me = [sys.executable, os.path.abspath(__file__)]
    port = free_port()
    body: dict[str, Any] = {"messages": [{"role": "user", "content": ""}] * a.messages, "max_tokens": 1}
    if a.invalid:
        body["max_tokens"] = -5
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "body.json")
        with open(path, "w") as f:
            json.dump(body, f)
        mb = os.path.getsize(path) / 1e6
        print(f"{a.senders} senders x {mb:.1f} MB ({a.messages} messages), {a.rounds} rounds, one server process")
        url = f"http://127.0.0.1:{port}"
        with running([*me, "--role", "serve", "--port", str(port)], url + "/health", name="server"):
            for rnd in range(a.rounds):
                reader = subprocess.Popen(
                    [*me, "--role", "read", "--port", str(port), "--seconds", "120"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
                time.sleep(1.0)  # the stream is running
                start = time.monotonic()
                send = [*me, "--role", "send", "--port", str(port), "--path", path]
                senders = [subprocess.Popen(send, stdout=subprocess.PIPE) for _ in range(a.senders)]
                codes = sorted({s.communicate()[0].decode().strip() for s in senders})
                end = time.monotonic()
                time.sleep(0.1)
                reads = json.loads(reader.communicate(b"stop\n")[0])
                if not reads or reads[-1] < end:
                    raise SystemExit(f"the stream ended before the senders were answered ({len(reads)} reads)")
                gaps = [(b - x, x) for x, b in zip(reads, reads[1:], strict=False) if b >= start and x <= end]
                gap, at = max(gaps)
                print(
                    f"round {rnd + 1}: longest gap {gap * 1e3:.1f} ms at +{at - start:.2f} s; "
                    f"round {end - start:.2f} s; status {','.join(codes)}"
                )


if __name__ == "__main__":
    main()
