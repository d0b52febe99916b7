"""Keeping the user's environment: mlx-lm, mlx-vlm and mlx-audio write ``TRANSFORMERS_*``
variables into ``os.environ`` when imported or while loading a model. smgpy must not change the
process it is imported into, so every such call runs inside :func:`environment_kept`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["environment_kept"]


@contextlib.contextmanager
def environment_kept() -> Iterator[None]:
    """Run the block, then put ``os.environ`` back as it was if the block changed it."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        if dict(os.environ) != saved:
            os.environ.clear()
            os.environ.update(saved)
