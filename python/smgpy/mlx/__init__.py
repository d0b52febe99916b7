"""An MLX engine for smgpy: continuous batching, prefix cache and per-request sampling on mlx-lm.

Install with ``pip install 'smgpy[mlx]'`` (``'smgpy[demo]'`` is the same; the demo model is
fetched on first use, see :mod:`smgpy.mlx.demo`).

Importing this package changes nothing in the process: it loads no library and imports neither
MLX nor mlx-lm until one of its names is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from smgpy.mlx.demo import DEMO_MODEL_NAME, DemoModelMissing, demo_gguf_path
    from smgpy.mlx.engine import MLXEngine, resolve_model
    from smgpy.mlx.gguf import GGUFConversionError, convert_gguf

__all__ = [
    "DEMO_MODEL_NAME",
    "DemoModelMissing",
    "GGUFConversionError",
    "MLXEngine",
    "convert_gguf",
    "demo_gguf_path",
    "resolve_model",
]

_WHERE = {
    "DEMO_MODEL_NAME": "smgpy.mlx.demo",
    "DemoModelMissing": "smgpy.mlx.demo",
    "demo_gguf_path": "smgpy.mlx.demo",
    "GGUFConversionError": "smgpy.mlx.gguf",
    "convert_gguf": "smgpy.mlx.gguf",
    "MLXEngine": "smgpy.mlx.engine",
    "resolve_model": "smgpy.mlx.engine",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'smgpy.mlx' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
