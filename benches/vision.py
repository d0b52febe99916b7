"""Image requests, smgpy vs ``mlx_vlm.server``, on the same tiny vision-language model.

Both servers run in one invocation on the same model directory (a tiny random-weight Qwen2.5-VL
built from mlx-vlm's classes by ``tests/tiny_vlms.py``, or ``--model DIR``). Each client sends a
streamed chat completion with one 1024x768 picture (a PNG data URL) and a question, greedy, 64
tokens, back to back; a different picture per client and round, so neither server's image or
prefix cache answers. Reported per concurrency: tokens/s over the run and mean time to first token.

    python benches/vision.py            # 1 and 8 clients, 3 rounds each
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from _servers import free_port, running
from mlx_serve import chat
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

MAX_TOKENS = 64


def picture(seed: int) -> str:
    """A 1024x768 PNG of smooth random colour (compresses as photos do, unlike noise)."""
    rng = np.random.RandomState(seed)
    small = (rng.rand(12, 16, 3) * 255).astype("uint8")
    img = Image.fromarray(small).resize((1024, 768), Image.Resampling.BICUBIC)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


async def one(client: httpx.AsyncClient, base: str, model: str, image: str) -> tuple[int, float]:
    content = [{"type": "image_url", "image_url": {"url": image}}, {"type": "text", "text": "Describe this picture."}]
    r = await chat(client, base, model, [{"role": "user", "content": content}], MAX_TOKENS)
    return r.tokens, r.ttft


async def load(base: str, model: str, clients: int, rounds: int, images: list[str]) -> dict[str, float]:
    async with httpx.AsyncClient() as client:
        await one(client, base, model, images[-1])  # warm-up
        t0 = time.perf_counter()

        async def worker(c: int) -> list[tuple[int, float]]:
            return [await one(client, base, model, images[(c * rounds + i) % (len(images) - 1)]) for i in range(rounds)]

        results = [x for xs in await asyncio.gather(*(worker(c) for c in range(clients))) for x in xs]
        wall = time.perf_counter() - t0
    return {
        "tokens_per_s": sum(t for t, _ in results) / wall,
        "ttft_s": statistics.mean(f for _, f in results),
        "requests": len(results),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a vision-language model directory (default: a tiny Qwen2.5-VL)")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--rounds", type=int, default=3, help="requests per client")
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    model_dir = args.model
    if model_dir is None:
        import tiny_vlms

        model_dir = str(tiny_vlms.build_qwen25_vl(Path(tmp.name) / "qwen25vl"))
    images = [picture(s) for s in range(max(args.clients) * args.rounds + 1)]
    sides = {
        "smgpy": lambda port: [sys.executable, "-m", "smgpy", "serve", "--model", model_dir, "--port", str(port)],
        "mlx_vlm.server": lambda port: [
            sys.executable,
            "-m",
            "mlx_vlm.server",
            "--model",
            model_dir,
            "--port",
            str(port),
            "--max-num-seqs",
            str(max(args.clients)),
        ],
    }
    table: dict[str, dict[int, dict[str, float]]] = {}
    for name, cmd in sides.items():
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        log = str(Path(tmp.name) / f"{name}.log")
        with running(cmd(port), base + "/health", name=name, log_path=log):
            model = httpx.get(base + "/v1/models").json()["data"][0]["id"] if name == "smgpy" else model_dir
            table[name] = {c: asyncio.run(load(base, model, c, args.rounds, images)) for c in args.clients}
        for c, r in table[name].items():
            print(f"{name:16s} {c:2d} clients: {r['tokens_per_s']:7.1f} tok/s  TTFT {r['ttft_s'] * 1000:7.0f} ms")
    for c in args.clients:
        a, b = table["smgpy"][c], table["mlx_vlm.server"][c]
        print(
            f"{c} clients: smgpy / mlx_vlm.server = {a['tokens_per_s'] / b['tokens_per_s']:.2f}x tokens/s, "
            f"TTFT {a['ttft_s'] * 1000:.0f} / {b['ttft_s'] * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
