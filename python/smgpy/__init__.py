"""smgpy: a fast, in-process serving layer for Python LLM engines."""

from smgpy import _native
from smgpy._native import (
    ChatTemplate,
    ReasoningStream,
    ResponseStoreError,
    StopMatcher,
    TemplateError,
    TemplateSyntaxError,
    Tokenizer,
    ToolCallStream,
    list_reasoning_parsers,
    list_tool_parsers,
    normalize_messages,
    normalize_tools,
    parse_reasoning_complete,
    parse_tool_call_complete,
    reasoning_parser_for_model,
    tool_parser_for_model,
)
from smgpy.engine import (
    ContextLengthExceeded,
    EmbeddingReqInput,
    Engine,
    EngineOverloaded,
    EngineRequestError,
    FinishReason,
    GenerateOutput,
    GenerateReqInput,
    MetaInfo,
    SamplingParamsDict,
)
from smgpy.options import ServerOptions
from smgpy.server import serve_oai, serve_oai_async

__version__: str = _native.__version__

__all__ = [
    "ChatTemplate",
    "ContextLengthExceeded",
    "EmbeddingReqInput",
    "Engine",
    "EngineOverloaded",
    "EngineRequestError",
    "FinishReason",
    "GenerateOutput",
    "GenerateReqInput",
    "MetaInfo",
    "ReasoningStream",
    "ResponseStoreError",
    "SamplingParamsDict",
    "ServerOptions",
    "StopMatcher",
    "TemplateError",
    "TemplateSyntaxError",
    "Tokenizer",
    "ToolCallStream",
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
