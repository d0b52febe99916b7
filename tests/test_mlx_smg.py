"""Two real-model workers (`smgpy serve` on the demo model) behind the SMG router."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from conftest import demo_gguf
from test_smg import Router, free_port, stop_process, wait_until

demo_gguf()

import openai  # noqa: E402


class ServeWorker:
    """`smgpy serve` as its own process (what a deployment runs)."""

    def __init__(self, name: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "smgpy", "serve", "--port", str(self.port), "--worker-id", name]
        self.proc = subprocess.Popen([*cmd, "--max-running", "2", "--log-level", "warning"])
        wait_until(lambda: httpx.get(self.url + "/health").status_code == 200, 240, f"worker {name}")

    def stop(self) -> None:
        stop_process(self.proc, 30)


@pytest.fixture(scope="module")
def router() -> Iterator[Router]:
    workers = [ServeWorker("w1"), ServeWorker("w2")]
    r = Router(workers, "round_robin")
    try:
        yield r
    finally:
        r.stop()
        for w in workers:
            w.stop()


def test_the_demo_model_answers_through_the_router_from_both_workers(router: Router) -> None:
    client = openai.OpenAI(base_url=router.url + "/v1", api_key="x", max_retries=0, timeout=240)
    seen = set()
    for _ in range(2):
        raw = client.chat.completions.with_raw_response.create(
            model="SmolLM2-135M-Instruct",
            messages=[{"role": "user", "content": "What is the capital of France?"}],
            max_tokens=12,
        )
        seen.add(raw.headers.get("x-smg-routed-worker-id"))
        assert "Paris" in (raw.parse().choices[0].message.content or "")
    assert len(seen) == 2
    metrics = httpx.get(next(iter(seen)) + "/metrics").text  # type: ignore[operator]
    assert 'worker_id="w' in metrics
