"""smgpy: a fast, in-process serving layer for Python LLM engines."""

from smgpy import _native, engine
from smgpy._native import (
    ChatTemplate,
    Grammar,
    GrammarError,
    GrammarMatcher,
    ReasoningStream,
    ResponseStoreError,
    StopMatcher,
    TemplateError,
    TemplateSyntaxError,
    Tokenizer,
    ToolCallStream,
    Vocabulary,
    list_reasoning_parsers,
    list_tool_parsers,
    normalize_messages,
    normalize_tools,
    parse_reasoning_complete,
    parse_tool_call_complete,
    reasoning_parser_for_model,
    tool_parser_for_model,
)
from smgpy.engine import *  # noqa: F403 - the engine contract, exported whole (its __all__)
from smgpy.options import ServerOptions
from smgpy.server import serve_oai, serve_oai_async

__version__: str = _native.__version__

__all__ = [
    "ChatTemplate",
    "Grammar",
    "GrammarError",
    "GrammarMatcher",
    "ReasoningStream",
    "ResponseStoreError",
    "ServerOptions",
    "StopMatcher",
    "TemplateError",
    "TemplateSyntaxError",
    "Tokenizer",
    "ToolCallStream",
    "Vocabulary",
    "__version__",
    "list_reasoning_parsers",
    "list_tool_parsers",
    "normalize_messages",
    "normalize_tools",
    "parse_reasoning_complete",
    "parse_tool_call_complete",
    "reasoning_parser_for_model",
    "serve_oai",
    "serve_oai_async",
    "tool_parser_for_model",
]
__all__ += engine.__all__
