"""The HTTP server's options: one object, one set of defaults.

:class:`ServerOptions` is what :func:`smgpy.serve_oai` takes (as ``options=`` or as keyword
arguments that override it) and what ``smgpy serve`` builds from its flags. The numeric limits'
defaults are not written here: they are read from the Rust server's own
``ServerConfig::default()`` (``smgpy._native.server_defaults()``), and ``_native.Server`` has no
defaults for them, so the library, the CLI and the server cannot disagree. ``smgpy serve``
departs from them in one place only, on purpose: :data:`CLI_DEFAULT_MAX_TOKENS`.

:data:`MLX_DEFAULTS` holds the MLX engine's own defaults, read by both ``MLXEngine`` and
``smgpy serve``'s flags. They live here, not in :mod:`smgpy.mlx`, because the CLI builds its
parser (``--help`` included) without importing MLX.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

from smgpy import _native

__all__ = ["CLI_DEFAULT_MAX_TOKENS", "KV_BITS", "KV_GROUP_SIZES", "MLX_DEFAULTS", "MLXEngineDefaults", "ServerOptions"]

_D: dict[str, Any] = _native.server_defaults()

# `smgpy serve --default-max-tokens`: an operator's server caps what one request may generate;
# a library user's `serve_oai` leaves that to its engine and the context length (no cap).
CLI_DEFAULT_MAX_TOKENS = 8192

#: Bit widths ``--kv-bits`` accepts (MLX's affine quantization).
KV_BITS = (2, 3, 4, 5, 6, 8)
#: Group sizes ``--kv-group-size`` accepts.
KV_GROUP_SIZES = (32, 64, 128)


@dataclass(frozen=True)
class MLXEngineDefaults:
    """The MLX engine's defaults (``MLXEngine``'s keyword arguments, ``smgpy serve``'s flags)."""

    #: Sequences decoded together (as ``mlx_lm.server``).
    max_running: int = 32
    #: Requests queued beyond ``max_running`` before the engine answers 429.
    max_waiting: int = 64
    #: Prompt tokens prefilled per step between two decode steps (as ``mlx_lm.server``).
    prefill_step_size: int = 512
    #: Channels sharing one scale and bias of a quantized KV cache (as mlx-lm).
    kv_group_size: int = 64
    #: Prefix KV cache budget in memory.
    prefix_cache_bytes: int = 2 << 30
    #: Size bound of the prefix cache's directory.
    prefix_cache_disk_bytes: int = 8 << 30
    #: Compile the batch's decode step once per shape (where a check at load passes).
    compile_step: bool = True
    #: Prompt-lookup speculation: draft tokens verified per step while one greedy sequence runs
    #: (0: off). On by default: measured faster on edit, summary and chat workloads (benches/speculative.py).
    prompt_lookup_tokens: int = 8
    #: Draft-model speculation (``--draft-model``): tokens the draft proposes per step (mlx_lm's default).
    num_draft_tokens: int = 3


MLX_DEFAULTS = MLXEngineDefaults()


@dataclass(frozen=True, kw_only=True)
class ServerOptions:
    """How the server answers: names, parsers, limits and stores (not the engine's own settings).

    Fields left ``None`` where the engine can say (``model_name``, ``chat_template``,
    ``special_tokens``, ``context_length``) are taken from the engine's attributes.
    """

    #: Name reported by ``/v1/models`` and in responses (default: the engine's ``model_name``).
    model_name: str | None = None
    #: A Jinja chat template, a file holding one, or a ``ChatTemplate`` (default: the engine's).
    chat_template: Any = None
    #: ``bos_token``, ``eos_token``, ... for the template (default: the engine's).
    special_tokens: dict[str, Any] | None = None
    #: Tool-call format: a name, ``"auto"`` (from the model name or template) or None (off).
    tool_parser: str | None = "auto"
    #: Reasoning format: a name, ``"auto"`` or None (off).
    reasoning_parser: str | None = "auto"
    #: Require this bearer token (``/health`` stays open).
    api_key: str | None = None
    #: CORS origins (None: CORS off).
    allowed_origins: list[str] | None = None
    #: The engine's context length (default: the engine's ``context_length``).
    context_length: int | None = None
    #: Largest request body accepted.
    max_body_bytes: int = _D["max_body_bytes"]
    #: Seconds per request, streams included (None: no limit); past it a 504 or a stream error.
    request_timeout: float | None = _D["request_timeout"]
    #: Seconds between SSE keep-alive comments while a stream is idle.
    keep_alive: float = _D["keep_alive"]
    #: Seconds a graceful shutdown waits for running requests.
    shutdown_timeout: float = _D["shutdown_timeout"]
    #: Seconds for a request head to arrive; also closes idle keep-alive connections.
    header_read_timeout: float = _D["header_read_timeout"]
    #: Seconds for a request body to arrive once its head is in.
    body_read_timeout: float = _D["body_read_timeout"]
    #: Connections open at once.
    max_connections: int = _D["max_connections"]
    #: One client address's share of them (raise it for a router in front).
    max_connections_per_client: int = _D["max_connections_per_client"]
    #: ``/health`` fails when the event loop has not turned over for this many seconds.
    engine_stall_timeout: float = _D["engine_stall_timeout"]
    #: The Responses store's byte budget (least recently used evicted first).
    response_store_bytes: int = _D["response_store_bytes"]
    #: Keep the Responses store in this SQLite file (None: in memory).
    response_store: str | os.PathLike[str] | None = None
    #: Seconds a stored response is kept (None: until evicted).
    response_store_ttl: float | None = _D["response_store_ttl"]
    #: This server's name in ``/metrics`` and ``/server_info``.
    worker_id: str | None = None
    #: Worker threads of the HTTP side (the first server of the process sets it).
    http_threads: int = 1
    #: Tokens a request without ``max_tokens`` generates at most, and the most one may ask for
    #: (more is a 400 naming its field); None: no default and no cap.
    default_max_tokens: int | None = _D["default_max_tokens"]
    #: The Rust side's log level: ``error``, ``warn``, ``info``, ``debug`` or ``trace``.
    log_level: str = "info"

    @classmethod
    def names(cls) -> list[str]:
        """Every option's name (the keyword arguments ``serve_oai`` takes besides its own)."""
        return [f.name for f in fields(cls)]

    def read_template(self) -> Any:
        """``chat_template`` as the server takes it: a file's text when it names a file."""
        t = self.chat_template
        if isinstance(t, str | os.PathLike) and os.path.isfile(t):
            with open(t, encoding="utf-8") as f:
                return f.read()
        return t
