"""smgpy: a fast, in-process serving layer for Python LLM engines."""

from smgpy import _native

__version__: str = _native.__version__

__all__ = ["__version__"]
