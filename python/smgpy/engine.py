"""The engine protocol: what smgpy needs from a Python LLM engine.

An engine is any object with

* ``async def generate_request(obj)`` returning an async iterator of output dicts, and
* ``def abort_request(rid: str) -> None``.

This is the interface of tokenspeed's and sglang's ``TokenizerManager``, so those engines are
served as they are.

The request object
------------------
smgpy builds ``obj`` with the attributes of sglang's / tokenspeed's ``GenerateReqInput`` that
matter for serving (see :class:`GenerateReqInput`): ``rid``, ``text`` (the rendered prompt) or
``input_ids``, ``sampling_params`` (a dict), ``stream``, ``return_logprob``,
``top_logprobs_num``, and the client's prompt-cache hints when it sent any
(``prompt_cache_key``; ``cache_breakpoints``, prompt token positions of Anthropic
``cache_control`` marks). ``serve_oai(..., request_class=X)`` builds ``X(**fields)`` instead and
sets ``rid`` after construction (as tokenspeed requires).

``sampling_params`` keys (only those the client set are present): ``max_new_tokens``,
``min_new_tokens``, ``temperature``, ``top_p``, ``top_k``, ``min_p``, ``repetition_penalty``,
``frequency_penalty``, ``presence_penalty``, ``stop`` (list of str), ``stop_token_ids``
(list of int), ``ignore_eos``, ``seed``, ``n``, ``logit_bias`` (dict token id str -> float),
``num_draft_tokens`` (the most tokens to draft per step for speculative decoding; 0: none),
and, when the client asked for structured output, one of SGLang's constraint keys:
``json_schema`` (a JSON Schema as JSON text), ``regex``, ``ebnf`` (a Lark grammar, llguidance's
dialect) or ``structural_tag`` (JSON text), plus ``response_format`` as the client sent it.
An engine that sets ``lark_grammars = True`` receives forced tool calls as a Lark grammar in
the model's own tool-call format; others receive a JSON Schema. An engine that declares
``vocabulary`` (a :class:`smgpy.Vocabulary` of its model's tokens) also receives the constraint
compiled, once, by the server: ``obj.grammar`` (a :class:`smgpy.Grammar`; ``grammar.matcher()``
gives each sequence its token masks), so it compiles nothing itself.

The outputs
-----------
Each yielded dict follows the sglang/tokenspeed output shape (typed as :class:`GenerateOutput`,
with :class:`MetaInfo` and :class:`FinishReason`; ``sampling_params`` as :class:`SamplingParamsDict`)::

    {"text": <cumulative text>,          # or "delta": <new text only>
     "output_ids": [...],                # new token ids of this step ("delta" mode) or all of them
     "meta_info": {"prompt_tokens": int, "completion_tokens": int, "cached_tokens": int,
                   "finish_reason": None | {"type": "stop" | "length" | "abort",
                                            "matched": str | int | None,
                                            "message": str (abort only, optional)},
                   "output_token_logprobs": [(logprob, token_id, token_text), ...],   # optional
                   "output_top_logprobs": [[(logprob, token_id, token_text), ...], ...]}}  # optional

An engine may yield ``"delta"`` (incremental text) instead of ``"text"``; smgpy accepts both.
Cumulative text costs O(n^2) copying on long outputs, so smgpy's own engines emit deltas.
In delta mode ``output_ids`` and the logprob lists hold only the new tokens of that step.
The last dict carries a non-null ``finish_reason``.

Optional attributes smgpy picks up when present (so ``serve_oai`` needs no extra arguments):
``model_name`` (str), ``context_length`` (int), ``chat_template`` (str),
``special_tokens`` (dict of ``bos_token``, ``eos_token``, ...), ``eos_token_ids`` (list of int),
``tokenizer`` (an object with ``encode(text) -> list[int]`` and ``decode(ids) -> str``), and
``get_load() -> dict`` (running / waiting requests and token usage, for ``/v1/loads``),
``accepts_images`` (bool: image parts of chat, Anthropic and Responses requests reach the engine
as ``image_data``, a list of strings as sglang's: ``data:image/...;base64`` URLs with the bytes, or
public ``http(s)`` URLs, undecoded; the prompt then comes as ``text`` rendered by the chat template,
holding the model's image placeholders, for the engine's processor to expand;
``accepts_local_images`` (bool) lets ``file://`` URLs through as well, which the engine must confine
to its operator's directory, as :func:`smgpy.images.load_images` does with ``local_path``;
:func:`smgpy.images.load_images` decodes them within bounds; without it images get a 400),
``vocab_size`` (int: token ids from clients are checked against it before the engine sees them)
and ``max_running_requests`` (int: a request with a larger ``n`` is refused with 400).

Two attributes move work from the engine to the server:

* ``accepts_input_ids = True``: when ``tokenizer`` is a native :class:`smgpy.Tokenizer` (the
  model's ``tokenizer.json``, tokenized in Rust off the event loop), the server sends prompts as
  ``input_ids`` instead of ``text``. Engines that tokenize themselves leave it unset.
* ``accepts_n = True``: a request for ``n > 1`` choices arrives as one request with
  ``sampling_params["n"]``, and each output dict carries ``"index"`` (0..n-1) naming its choice,
  so the engine can sample all of them from one prefill (as sglang does). Without it the server
  sends ``n`` requests (``rid-0``, ``rid-1``, ...; with a seed, choice ``i`` gets ``seed + i``).
  A group is aborted (``abort_request(rid)``) once every choice has finished or gone, if one of
  them went early (a client disconnect, a stop string).

Embeddings
----------
An engine that serves an embedding model defines ``async def embed_request(obj)``; ``/v1/embeddings``
is then on (without it that route answers 400, saying that the server serves no embedding model).
``obj`` is an :class:`EmbeddingReqInput`, with sglang's ``EmbeddingReqInput`` field names: ``rid``, and
``text`` (a list of str) or ``input_ids`` (a list of lists of int, without special tokens: the engine
adds its model's own), one item per input of the request. The coroutine returns one vector per
input, in order: a 2-D array (anything with ``shape``, ``astype`` and ``tobytes``, e.g. NumPy's) or a
list whose items are vectors or sglang-style dicts ``{"embedding": [...], "meta_info":
{"prompt_tokens": int}}``. Errors are raised as for ``generate_request`` (below). The server does
the rest: ``encoding_format``, ``dimensions``, ``usage`` and the response's shape.

Optional attributes of such an engine: ``embedding_model_name`` (default: ``model_name``; listed in
``/v1/models`` beside the chat model), ``embedding_dimensions`` (int: the vectors' size),
``embedding_max_tokens`` (int: most token ids one input may have, special tokens excluded; a longer
input is a 400 naming it before the engine sees it), ``embedding_tokenizer`` (a native
:class:`smgpy.Tokenizer`: the server tokenizes texts itself, off the event loop, and sends
``input_ids``) and ``matryoshka_dimensions`` (list of int: the shorter sizes the model was trained to
be cut to; a request's ``dimensions`` may name one of them or the full size, anything else is a 400,
because cutting an ordinary model's vectors loses meaning without telling anyone).
An engine that serves embeddings only needs no ``generate_request``: text requests are then answered
400.

An engine raises :class:`EngineOverloaded` when its waiting queue is full (smgpy answers 429 with
``Retry-After``, which clients and routers retry) and :class:`EngineRequestError` for a request it
refuses (smgpy answers 400 with the message, e.g. a prompt longer than the context). Any other
exception is logged with its traceback and answered 500 with a generic message and the request id:
exception text never reaches clients.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from smgpy._native import Grammar

__all__ = [
    "ContextLengthExceeded",
    "EmbeddingReqInput",
    "Engine",
    "EngineOverloaded",
    "EngineRequestError",
    "FinishReason",
    "GenerateOutput",
    "GenerateReqInput",
    "MetaInfo",
    "SamplingParamsDict",
    "TokenLogprob",
]

#: One token's logprob as sglang reports it: ``(logprob, token_id, token_text)``.
TokenLogprob = tuple[float, int, str | None]


class SamplingParamsDict(TypedDict, total=False):
    """``GenerateReqInput.sampling_params``: only the keys the client set are present (sglang's
    names; see the module docs for their meaning)."""

    max_new_tokens: int
    min_new_tokens: int
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    repetition_penalty: float
    frequency_penalty: float
    presence_penalty: float
    stop: list[str]
    stop_token_ids: list[int]
    ignore_eos: bool
    seed: int
    n: int
    logit_bias: dict[str, float]
    num_draft_tokens: int
    json_schema: str
    regex: str
    ebnf: str
    structural_tag: str
    response_format: dict[str, Any]


class _FinishReasonRequired(TypedDict):
    type: Literal["stop", "length", "abort"]


class FinishReason(_FinishReasonRequired, total=False):
    """Why a generation ended: the stop token id or string it ``matched``, or an abort's ``message``.

    An abort with a 4xx ``status_code`` (SGLang's ``FINISH_ABORT``: the engine refused the request
    itself, e.g. an input longer than its context) answers the client with that status and the
    message; any other abort answers 503, its message kept for the server log."""

    matched: str | int | None
    message: str
    status_code: int


class _MetaInfoRequired(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason | None


class MetaInfo(_MetaInfoRequired, total=False):
    """An output's ``meta_info``; the logprob lists only when the request asked for them."""

    cached_tokens: int
    output_token_logprobs: list[TokenLogprob]
    output_top_logprobs: list[list[TokenLogprob]]


class _GenerateOutputRequired(TypedDict):
    output_ids: list[int]
    meta_info: MetaInfo


class GenerateOutput(_GenerateOutputRequired, total=False):
    """One dict ``generate_request`` yields: ``text`` (cumulative) or ``delta`` (new text only),
    and with ``accepts_n`` the ``index`` of the choice it belongs to."""

    text: str
    delta: str
    index: int


@runtime_checkable
class Engine(Protocol):
    """What smgpy calls on an engine."""

    def generate_request(self, obj: Any) -> AsyncIterator[GenerateOutput]:
        """Start generating for ``obj``; yields output dicts (see the module docs)."""
        ...

    def abort_request(self, rid: str) -> None:
        """Stop generating for request ``rid`` and free its resources."""
        ...


class EngineRequestError(ValueError):
    """The engine refuses this request (bad input): smgpy answers HTTP 400 with the message."""


class ContextLengthExceeded(EngineRequestError):
    """The prompt (plus ``max_tokens``) does not fit the model's context: smgpy answers 400 with
    ``code: "context_length_exceeded"`` and ``param`` naming the prompt field, as OpenAI does."""


class EngineOverloaded(RuntimeError):
    """The engine's waiting queue is full: smgpy answers HTTP 429 (with ``Retry-After``) and the message."""


@dataclass
class GenerateReqInput:
    """The request object smgpy passes to ``generate_request`` by default.

    Attribute names and meanings follow sglang's / tokenspeed's ``GenerateReqInput``.
    """

    text: str | None = None
    input_ids: list[int] | None = None
    # Images of the prompt in order (URLs or data: URLs); only for engines with ``accepts_images``.
    image_data: list[str] | None = None
    sampling_params: SamplingParamsDict = field(default_factory=lambda: SamplingParamsDict())
    stream: bool = True
    return_logprob: bool = False
    top_logprobs_num: int = 0
    rid: str | None = None
    # Client prompt-cache hints (set only when the client sent them): OpenAI's
    # ``prompt_cache_key``, and Anthropic ``cache_control`` breakpoints as prompt token positions
    # (only when the server tokenized the prompt). An engine with a prefix cache may keep those
    # prefixes ahead of others; any engine may ignore them.
    prompt_cache_key: str | None = None
    cache_breakpoints: list[int] | None = None
    # The request's structured-output constraint, compiled by the server against the engine's
    # ``vocabulary`` (set only for engines that declare one); ``grammar.matcher()`` starts a sequence.
    grammar: Grammar | None = None


@dataclass
class EmbeddingReqInput:
    """The request object smgpy passes to ``embed_request``: one item per input, in order, as
    texts or as token ids without special tokens. Names follow sglang's ``EmbeddingReqInput``."""

    text: list[str] | None = None
    input_ids: list[list[int]] | None = None
    rid: str | None = None
