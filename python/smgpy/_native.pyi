"""Type stubs for the Rust extension module ``smgpy._native``.

Each area keeps its own section; keep the sections in this order.
"""

from typing import Any

__version__: str

# ---- errors ----

# ---- tool parsers ----

def parse_tool_call_complete(text: str, parser: str, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Parse a complete model output into normal text and tool calls.

    `parser` is a tool-call parser name (see `list_tool_parsers()`; SMG/SGLang aliases are
    accepted). When `tools` is given (OpenAI or flat form), calls to undeclared names stay in
    `normal_text`, and parameter schemas type XML-style values. Returns
    `{"normal_text": str, "tool_calls": [{"name": str, "arguments": str}]}`, with an `"id"` key
    when the format carries one. Raises `ValueError` for an unknown parser.
    """

def list_tool_parsers() -> list[str]:
    """Canonical tool-call parser names (vLLM's `--tool-call-parser` names where vLLM has the format)."""

def tool_parser_for_model(model: str) -> str | None:
    """The tool-call parser for a model id or path (case-insensitive, most specific pattern wins),
    or `None` when the model is unknown."""

class ToolCallStream:
    """Streaming tool-call parser for one response.

    `ToolCallStream(parser, tools=None)`. `feed(delta)` returns what can be emitted now:
    `{"normal_text": str, "calls": [{"index", "id", "name", "arguments"}]}`. A call's first entry
    carries its `name` (and `id` when the format gives one); later entries with the same index
    carry argument fragments, whose concatenation is the call's JSON arguments. Text that could
    begin a marker is held back, never emitted and retracted; `finish()` flushes the rest.
    """

    def __new__(cls, parser: str, tools: list[dict[str, Any]] | None = None) -> ToolCallStream: ...
    def feed(self, delta: str) -> dict[str, Any]:
        """Feed the next piece of output; returns `{"normal_text", "calls"}` to emit now."""
    def finish(self) -> dict[str, Any]:
        """End of output: flush everything held back."""
    @property
    def parser(self) -> str:
        """The canonical name of this stream's parser."""

# ---- reasoning parsers ----

def parse_reasoning_complete(
    text: str, parser: str, *, prompt_opened_reasoning: bool | None = None, thinking_disabled: bool = False
) -> dict[str, str]:
    """Split a complete model output into reasoning and visible text.

    `parser` is a reasoning parser name (see `list_reasoning_parsers()`; SMG/SGLang aliases are
    accepted). `prompt_opened_reasoning=True` says the prompt already opened the reasoning block;
    `thinking_disabled=True` makes everything visible text. Returns
    `{"reasoning_text": str, "normal_text": str}`. Raises `ValueError` for an unknown parser.
    """

def list_reasoning_parsers() -> list[str]:
    """Canonical reasoning parser names (vLLM's `--reasoning-parser` names where vLLM has the format)."""

def reasoning_parser_for_model(model: str) -> str | None:
    """The reasoning parser for a model id or path (case-insensitive, most specific pattern wins),
    or `None` when the model is unknown or does not reason."""

class ReasoningStream:
    """Streaming reasoning parser for one response.

    `ReasoningStream(parser, *, prompt=None, prompt_opened_reasoning=None, thinking_disabled=False)`.
    Given the rendered `prompt`, its tail decides whether the output starts inside reasoning or
    thinking was switched off; explicit keywords win. `feed(delta)` returns what can be emitted
    now (text that may start a marker is held back); `finish()` flushes the rest. Both return
    `{"reasoning_text": str, "normal_text": str}`.
    """

    def __new__(
        cls,
        parser: str,
        *,
        prompt: str | None = None,
        prompt_opened_reasoning: bool | None = None,
        thinking_disabled: bool = False,
    ) -> ReasoningStream: ...
    def feed(self, delta: str) -> dict[str, str]:
        """Feed the next piece of output; returns `{"reasoning_text", "normal_text"}` to emit now."""
    def finish(self) -> dict[str, str]:
        """End of output: flush everything held back."""
    @property
    def in_reasoning(self) -> bool:
        """Whether the stream is currently inside a reasoning block."""

# ---- template ----

# ---- stop ----

class StopMatcher:
    """Streaming stop-sequence matcher on decoded text.

    ``feed`` returns only text that is certain to be output: a suffix that could begin a stop
    string is held back until it is known not to be one. The match is the stop string with the
    earliest start in the whole text (ties go to the shortest), so the concatenated output is
    the same for any chunking. After a stop, ``feed`` returns "".

    Raises ``ValueError`` for an empty stop string, more than 64 stop strings, or one longer
    than 1024 bytes.
    """

    def __new__(cls, stops: list[str] | str, include_stop: bool = False) -> StopMatcher: ...
    def feed(self, text: str) -> str:
        """Feed one text delta; returns the text that is safe to emit now."""
    def finish(self) -> str:
        """End of the stream: returns the text still held back (a pending match becomes final)."""
    @property
    def stopped(self) -> bool:
        """Whether a stop string ended the stream."""
    @property
    def matched(self) -> str | None:
        """The stop string that ended the stream, as given, or None."""
    @property
    def matched_index(self) -> int | None:
        """Index in the stop list of the stop string that ended the stream, or None."""
    @property
    def stops(self) -> list[str]:
        """The stop strings, in the order given."""
    @property
    def include_stop(self) -> bool:
        """Whether the stop string itself is part of the output."""

# ---- server ----
