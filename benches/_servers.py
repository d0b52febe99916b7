"""Running a server for a bench: a free port, the commands of the two MLX servers compared, and a
subprocess that is waited for until it answers; and the questions the MLX serving benches ask.

Benches run as scripts (``python benches/<name>.py``), so this folder is on ``sys.path`` and they
import this module as ``_servers``.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# The prompts the MLX serving benches cycle through.
QUESTIONS = [
    "Tell me a long story about a dragon.",
    "Explain how a car engine works.",
    "Describe the city of Paris in detail.",
    "Write a poem about the sea.",
    "Explain photosynthesis step by step.",
    "What are the benefits of exercise?",
    "Describe a day in the life of a farmer.",
    "How do computers store data?",
]


def streamed_chat(model: str, messages: list[dict[str, Any]], max_tokens: int, **extra: Any) -> dict[str, Any]:
    """The body of a greedy, streamed chat completion whose last chunk carries the usage."""
    return {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


def sse_chunk(line: str) -> dict[str, Any] | None:
    """The chunk that a line of a chat completion's event stream carries: None for other lines and
    for the closing ``[DONE]``."""
    if not line.startswith("data: ") or line == "data: [DONE]":
        return None
    return dict(json.loads(line[6:]))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def smgpy_serve_cmd(model: str, name: str, port: int, *extra: str) -> list[str]:
    """``smgpy serve`` of ``model`` as ``name`` on ``port``, logging warnings only, with ``extra`` flags."""
    serve = [sys.executable, "-m", "smgpy", "serve", "--model", model, "--served-model-name", name]
    return [*serve, "--port", str(port), "--log-level", "warning", *extra]


def mlx_lm_server_cmd(model: str, port: int, *extra: str) -> list[str]:
    """``mlx_lm.server`` of ``model`` on ``port``, logging warnings only, with ``extra`` flags: the peer
    the MLX serving benches compare ``smgpy serve`` with."""
    return [
        sys.executable,
        "-m",
        "mlx_lm.server",
        "--model",
        model,
        "--port",
        str(port),
        "--log-level",
        "WARNING",
        *extra,
    ]


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether ``GET url`` returns 200 within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200
    except OSError:
        return False


def stream_read_times(port: int, body: dict[str, object], seconds: float | None = None) -> list[float]:
    """Post ``body`` (a streamed chat completion) to 127.0.0.1:``port`` and return the monotonic time
    of every read from the socket, until a line arrives on stdin, the stream ends or ``seconds``
    pass. Run in a process of its own, so that no load in the caller's process delays the reads."""
    data = json.dumps(body).encode()
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % len(data)
    )
    reads: list[float] = []
    end = None if seconds is None else time.monotonic() + seconds
    with socket.create_connection(("127.0.0.1", port)) as s, selectors.DefaultSelector() as sel:
        s.sendall(head + data)
        sel.register(s, selectors.EVENT_READ)
        sel.register(sys.stdin, selectors.EVENT_READ)
        while end is None or time.monotonic() < end:
            ready = {key.fileobj for key, _ in sel.select(None if end is None else end - time.monotonic())}
            if sys.stdin in ready:
                break
            if s in ready:
                if not s.recv(1 << 16):
                    break
                reads.append(time.monotonic())
    return reads


@contextmanager
def running(
    cmd: list[str],
    ready_url: str,
    *,
    name: str,
    log_path: str | None = None,
    env: dict[str, str] | None = None,
    startup_timeout: float = 300.0,
    poll: float = 0.5,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``cmd`` for the duration of the block, entering it once ``GET ready_url`` answers 200.

    Output goes to ``log_path``, or is discarded. Raises ``RuntimeError`` if the process exits before
    it answers and ``TimeoutError`` if it has not answered after ``startup_timeout`` seconds. On
    leaving, the process is terminated (and killed if it has not stopped 30 s later).
    """
    see = f"; see {log_path}" if log_path else ""
    with open(log_path or os.devnull, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + startup_timeout
            while not answers(ready_url):
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}{see}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} did not start in {startup_timeout}s{see}")
                time.sleep(poll)
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
