"""smgpy: a fast, in-process serving layer for Python LLM engines."""

from smgpy import _native
from smgpy.engine import Engine, EngineOverloaded, EngineRequestError, GenerateReqInput
from smgpy.server import serve_oai, serve_oai_async

__version__: str = _native.__version__

__all__ = [
    "Engine",
    "EngineOverloaded",
    "EngineRequestError",
    "GenerateReqInput",
    "__version__",
    "serve_oai",
    "serve_oai_async",
]
