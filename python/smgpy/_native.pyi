"""Type stubs for the Rust extension module ``smgpy._native``.

Each area keeps its own section; keep the sections in this order.
"""

import datetime
import os
from typing import Any, final

__all__ = [
    "ChatTemplate",
    "Decoder",
    "Doorbell",
    "EmbedSink",
    "FailKind",
    "Grammar",
    "GrammarError",
    "GrammarMatcher",
    "OutputSink",
    "ReasoningStream",
    "ResponseStoreError",
    "Server",
    "StopMatcher",
    "TemplateError",
    "TemplateSyntaxError",
    "ToolCallStream",
    "Tokenizer",
    "Vocabulary",
    "__version__",
    "check_sampling_params",
    "init_logging",
    "list_reasoning_parsers",
    "list_tool_parsers",
    "normalize_messages",
    "normalize_tools",
    "parse_reasoning_complete",
    "parse_tool_call_complete",
    "reasoning_parser_for_model",
    "server_defaults",
    "tool_parser_for_model",
]

__version__: str

# ---- errors ----

# ---- tool parsers ----

def parse_tool_call_complete(
    text: str,
    parser: str,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Parse a complete model output into normal text and tool calls.

    `parser` is a tool-call parser name (see `list_tool_parsers()`; SMG/SGLang aliases are
    accepted). When `tools` is given (OpenAI or flat form), calls to undeclared names stay in
    `normal_text`, and parameter schemas type XML-style values. Returns
    `{"normal_text": str, "tool_calls": [{"name": str, "arguments": str}]}`, with an `"id"` key
    when the format carries one. Raises `ValueError` for an unknown parser. `tool_choice`: as for
    `ToolCallStream`.
    """

def list_tool_parsers() -> list[str]:
    """Canonical tool-call parser names (vLLM's `--tool-call-parser` names where vLLM has the format)."""

def tool_parser_for_model(model: str) -> str | None:
    """The tool-call parser for a model id or path (case-insensitive, most specific pattern wins),
    or `None` when the model is unknown."""

@final
class ToolCallStream:
    """Streaming tool-call parser for one response.

    `ToolCallStream(parser, tools=None)`. `feed(delta)` returns what can be emitted now:
    `{"normal_text": str, "calls": [{"index", "id", "name", "arguments"}]}`. A call's first entry
    carries its `name` (and `id` when the format gives one); later entries with the same index
    carry argument fragments, whose concatenation is the call's JSON arguments. Text that could
    begin a marker is held back, never emitted and retracted; `finish()` flushes the rest.

    Where the format names the call before a JSON-object argument list (Hermes/Qwen, Llama JSON,
    Mistral `[ARGS]`, DeepSeek, Kimi K2, Harmony, ...), the call starts as soon as its name and
    the `{` of its arguments are seen and the arguments stream as compact JSON while the model
    writes them. Such a call cannot be taken back: if its arguments break or the output ends
    inside them (e.g. at `max_tokens`), its fragments stop where the valid text stopped (never
    closed up as if whole) and the call is listed in `abandoned`; a complete parse of the same
    output reports the same partial call. Whitespace-only text before, between or after calls is
    not text.
    XML-parameter calls stream too (Qwen XML, GLM, Hy3, MiniMax M2, DeepSeek DSML, Step-3): each
    parameter is written when its name is complete, a value whose schema type is `string` (or
    marked `string="true"`) streams character by character, other values when they close. Kimi K3
    and Python-literal formats (pythonic, Gemma) report each call whole when its block closes.

    `tool_choice="required"` or `{"type": "function", "function": {"name": N}}`: the output was
    held to JSON of the calls (a list of `{"name", "parameters"}` objects, or N's arguments
    object), as an engine does for a forced tool choice; that JSON is read as the calls. Output
    that does not open with it is read in `parser`'s format.
    """

    def __new__(
        cls,
        parser: str,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> ToolCallStream: ...
    def feed(self, delta: str) -> dict[str, Any]:
        """Feed the next piece of output; returns `{"normal_text", "calls"}` to emit now."""
    def finish(self) -> dict[str, Any]:
        """End of output: flush everything held back."""
    @property
    def parser(self) -> str:
        """The canonical name of this stream's parser."""
    @property
    def abandoned(self) -> dict[str, Any]:
        """Calls this stream started that never completed (their arguments broke, or the output
        ended inside them); a complete parse reports them as the same partial calls:
        `{"calls": [index, ...], "text": [(offset, text), ...]}`, where each text is the text of
        such a call's region, at that byte offset of the normal text streamed so far."""

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

@final
class ReasoningStream:
    """Streaming reasoning parser for one response.

    `ReasoningStream(parser, *, prompt=None, prompt_opened_reasoning=None, thinking_disabled=False,
    keep_tool_calls=False)`. Given the rendered `prompt`, its tail decides whether the output
    starts inside reasoning or thinking was switched off; explicit keywords win.
    `keep_tool_calls=True`: a tool-call parser reads `normal_text` next, so gpt-oss tool-call
    messages stay in it (without, they are shown to no one). `feed(delta)` returns what can be emitted
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
        keep_tool_calls: bool = False,
    ) -> ReasoningStream: ...
    def feed(self, delta: str) -> dict[str, str]:
        """Feed the next piece of output; returns `{"reasoning_text", "normal_text"}` to emit now."""
    def finish(self) -> dict[str, str]:
        """End of output: flush everything held back."""
    @property
    def in_reasoning(self) -> bool:
        """Whether the stream is currently inside a reasoning block."""

# ---- template ----

class TemplateError(ValueError):
    """A chat template refused its input (``raise_exception``) or failed to render."""

class ResponseStoreError(OSError):
    """The Responses store file (``response_store=``, ``--response-store``) cannot be used: another
    program's database, a newer smgpy's store, a damaged file, or one that cannot be opened. The
    message names the file and what to do."""

class TemplateSyntaxError(ValueError):
    """A chat template does not compile; ``file``, ``line`` and ``reason`` say where and why."""

    file: str
    line: int
    reason: str

@final
class ChatTemplate:
    """A HuggingFace chat template, compiled once and rendered exactly like transformers'
    ``apply_chat_template(..., tokenize=False)``.

    ``source`` is the template text or a path to a ``.jinja`` file; ``special_tokens`` maps ``bos_token``,
    ``eos_token``, ... to strings; ``now`` (a ``datetime``) freezes ``strftime_now``.
    """

    def __new__(
        cls, source: str, special_tokens: dict[str, str] | None = None, *, now: datetime.datetime | None = None
    ) -> ChatTemplate: ...
    @staticmethod
    def from_model_dir(path: str | os.PathLike[str], *, now: datetime.datetime | None = None) -> ChatTemplate:
        """Load the template and special tokens of a model directory, in transformers' order:
        ``chat_template.jinja``, ``chat_template.json``, then ``tokenizer_config.json``."""
    @property
    def source(self) -> str:
        """The template source."""
    @property
    def special_tokens(self) -> dict[str, Any]:
        """The special tokens the template is rendered with."""
    @property
    def supports_tools(self) -> bool:
        """Whether the template renders tool definitions."""
    @property
    def generation_prompt(self) -> str | None:
        """The text ``add_generation_prompt=True`` appends after a user turn, or None if it cannot be found."""
    def render(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        *,
        documents: list[dict[str, Any]] | None = None,
        continue_final_message: bool = False,
        normalize: bool = False,
        **kwargs: Any,
    ) -> str:
        """Render ``messages`` (and ``tools``, ``documents``, extra template variables) to the prompt text.
        With ``normalize=True``, client-shaped input is first normalised (see ``normalize_messages``)."""

def normalize_messages(messages: list[dict[str, Any]], template: ChatTemplate | None = None) -> list[dict[str, Any]]:
    """Normalise client-shaped messages for a template (string tool arguments to objects, content parts
    flattened for string-only templates, ``content`` on tool-call turns). Without a template every rule
    applies as for a string-only template that serialises arguments."""

def normalize_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nest Responses-API flat function tools as ``{"type": "function", "function": {...}}``."""

# ---- structured output ----

class GrammarError(ValueError):
    """A structured-output constraint that cannot be enforced (the message names the keyword,
    the regex position or the grammar line), or a token the constraint does not allow."""

@final
class Vocabulary:
    """A model's vocabulary as bytes, ready for structured-output masks (llguidance).

    ``tokens[id]`` is the bytes token ``id`` adds to the decoded text (``None`` for tokens that
    never belong in constrained output); ``special_ids`` are kept out of text, except tool-call
    and reasoning markers (a Lark grammar names the others as ``<|name|>``); ``end_ids`` end the
    output once the constraint is complete; ``size`` is the number of logits.
    """

    def __new__(
        cls, tokens: list[bytes | None], special_ids: list[int], end_ids: list[int], size: int
    ) -> Vocabulary: ...
    def compile(self, key: str, text: str) -> Grammar:
        """Compile the constraint an engine received under ``key`` (``json_schema``, ``regex``,
        ``ebnf`` or ``structural_tag``), or take it from this vocabulary's cache.
        ``GrammarError`` when it cannot be enforced."""
    def __len__(self) -> int: ...

@final
class Grammar:
    """A compiled constraint; ``matcher()`` starts one sequence."""

    def matcher(self) -> GrammarMatcher:
        """A matcher at the start of the output."""

@final
class GrammarMatcher:
    """One sequence's constrained state."""

    def step(self, token: int | None) -> bytes | None:
        """Accept ``token`` (the one sampled at the step before; ``None`` at the first step), then
        return the mask of the next step as a bitmask: little-endian 32-bit words, bit ``i % 32``
        of word ``i // 32`` set where token ``i`` may come next. ``None`` when no token may come
        next (complete, and no end token). The GIL is released meanwhile. ``GrammarError`` when
        ``token`` was not allowed."""
    def copy(self) -> GrammarMatcher:
        """An independent copy of this state (to walk through drafted tokens)."""
    def accept(self, token: int) -> None:
        """Advance past a sampled token; ``GrammarError`` when it was not allowed."""
    def mask(self) -> bytes:
        """The tokens allowed next, one byte per logit (GIL released)."""
    @property
    def is_accepting(self) -> bool:
        """Whether the output may end here."""
    @property
    def is_stopped(self) -> bool:
        """Whether the constraint is complete and only an end token may follow."""

# ---- stop ----

@final
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

def init_logging(level: str = "info") -> None:
    """Route Rust `tracing` logs (access log, errors) to stderr at `level`. Only the first call takes effect."""

@final
class OutputSink:
    """Receives one request's outputs from its Python pump task (created by the server, not by users)."""

    def push(self, out: dict[str, Any]) -> int:
        """Forward one engine output dict: 0 taken, 1 buffer full (await, then `flush`), 2 client gone."""
    def wait_for_room(self) -> None:
        """After `push` returned 1: report this request's rid in `Server.take_work()`'s third list once
        the channel has room again (the pump awaits that instead of polling)."""
    def flush(self) -> int:
        """Hand held outputs over now: 0 none left, 1 a channel is full (await `wait_for_room`), 2 client gone."""
    def fail(self, kind: FailKind, message: str) -> int:
        """Report that the engine raised; `kind` says how the client is answered."""
    @property
    def closed(self) -> bool:
        """Whether the HTTP side of this request is gone."""

@final
class EmbedSink:
    """Receives one embedding request's vectors from its Python pump task (created by the server)."""

    def done(self, data: bytes, rows: int, dim: int, prompt_tokens: int | None = None) -> None:
        """The vectors: `rows * dim` little-endian f32 values in `data`, row after row; `prompt_tokens`
        is the engine's own count of the tokens it read, if it keeps one."""
    def fail(self, kind: FailKind, message: str) -> None:
        """The request failed: `kind` picks the answer (400, 429 or 500), `message` is shown."""

@final
class Doorbell:
    """Wakes an asyncio loop from another thread without releasing the GIL: the loop watches
    `fileno()`; a producer queues its work, then calls `ring()`; the reader calls `take()`, then
    reads the work."""

    def __new__(cls) -> Doorbell: ...
    def fileno(self) -> int:
        """The file descriptor to watch; readable once rung."""
    def ring(self) -> None:
        """Wake the watcher, unless a wake-up is already pending. Keeps the GIL."""
    def take(self) -> None:
        """Clear the wake-up (the watcher, before it reads the work it announces)."""

@final
class Tokenizer:
    """A model's tokenizer from its tokenizer.json, in Rust (ids as the `tokenizers` package gives them)."""

    @staticmethod
    def from_file(path: str | os.PathLike[str], bos: str | None = None) -> Tokenizer:
        """Load `path`; `bos` is the BOS token's text, if any (see `encode_prompt`)."""
    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Ids of `text`; `add_special_tokens` applies the tokenizer's post-processing."""
    def encode_prompt(self, text: str) -> list[int]:
        """Ids of a prompt: special tokens are added unless it starts with the BOS token."""
    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        """Text of `ids`."""
    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included."""
    def decoder(self, drop: list[int] = ...) -> Decoder:
        """An incremental decoder for one sequence; ids in `drop` leave no text."""

@final
class Decoder:
    """Generated ids to text deltas, never splitting a character."""

    def push(self, id: int) -> str:
        """Add one id; the text it completes (empty while a character is still partial)."""
    def flush(self) -> str:
        """Text still held back at the end (an incomplete character as U+FFFD)."""

@final
class FailKind:
    """Why an engine request failed, as the pump reports it to `OutputSink.fail`."""

    BAD_REQUEST: FailKind
    CONTEXT_LENGTH: FailKind
    OVERLOADED: FailKind
    INTERNAL: FailKind
    def __eq__(self, value: object, /) -> bool: ...
    def __int__(self) -> int: ...

def check_sampling_params(params: dict[str, Any]) -> None:
    """Check an engine's `sampling_params` (sglang's names) with the server's rules; `ValueError`
    naming the key otherwise."""

def server_defaults() -> dict[str, Any]:
    """The server's defaults (`ServerConfig::default()`) in seconds, bytes and `None`: the one set
    `smgpy.ServerOptions` starts from."""

@final
class Server:
    """An HTTP server bound to one engine; `smgpy.serve_oai_async` drives it."""

    def __new__(
        cls,
        *,
        host: str,
        port: int,
        model_name: str,
        chat_template: str | ChatTemplate | None = None,
        special_tokens: dict[str, Any] | None = None,
        tool_parser: str | None = None,
        reasoning_parser: str | None = None,
        api_key: str | None = None,
        allowed_origins: list[str] | None = None,
        max_body_bytes: int,
        request_timeout: float | None,
        context_length: int | None = None,
        keep_alive: float,
        shutdown_timeout: float,
        tokenizer: Any | None = None,
        get_load: Any | None = None,
        header_read_timeout: float,
        body_read_timeout: float,
        max_connections: int,
        engine_stall_timeout: float,
        vocab_size: int | None = None,
        max_running_requests: int | None = None,
        response_store_bytes: int,
        response_store: str | os.PathLike[str] | None = None,
        response_store_ttl: float | None,
        flush_cache: Any | None = None,
        worker_id: str | None = None,
        model_path: str | None = None,
        max_total_num_tokens: int | None = None,
        accepts_images: bool = False,
        local_images: bool = False,
        lark_grammars: bool = False,
        prompt_ids: bool = False,
        accepts_n: bool = False,
        http_threads: int = 1,
        default_max_tokens: int | None,
        max_connections_per_client: int,
        embedding_model_name: str | None = None,
        embedding_dimensions: int | None = None,
        embedding_max_tokens: int | None = None,
        embedding_tokenizer: Any | None = None,
        matryoshka_dimensions: list[int] = ...,
        vocabulary: Vocabulary | None = None,
    ) -> Server: ...
    @property
    def parsers(self) -> tuple[str | None, str | None]:
        """Names of the tool and reasoning parsers in effect (after `"auto"` resolution)."""
    def wake_fd(self) -> int:
        """File descriptor to watch with `loop.add_reader`; readable when work is queued."""
    def bind_loop(self, call_soon: Any) -> None:
        """Hand engine outputs to the HTTP side once per turn of the loop whose `call_soon` this is."""
    def take_work(self) -> tuple[list[tuple[str, dict[str, Any], OutputSink]], list[str], list[str]]:
        """Queued work: new requests `(rid, fields, sink)`, cancelled rids, rids whose full sink has room."""
    def take_embeds(self) -> list[tuple[str, dict[str, Any], EmbedSink]]:
        """Queued embedding requests `(rid, fields, sink)` (call right after `take_work`)."""
    def start(self) -> tuple[str, int]:
        """Bind and start serving in the background; returns the bound `(host, port)`."""
    @property
    def address(self) -> tuple[str, int] | None:
        """The bound `(host, port)` once started."""
    def heartbeat(self) -> None:
        """The engine's event loop turned over; `/health` fails when these stop for `engine_stall_timeout`."""
    def shutdown(self) -> None:
        """Begin a graceful shutdown: `/health` and new requests answer 503, running requests finish."""
    @property
    def stopped(self) -> bool:
        """Whether the server has stopped; `wake_fd` becomes readable when this turns true."""
