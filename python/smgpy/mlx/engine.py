"""``MLXEngine``: smgpy's engine protocol on top of mlx-lm.

The asyncio side validates and tokenizes a request, then hands it to the MLX thread
(:mod:`smgpy.mlx.batching`) and drains the request's own queue; it never waits on MLX.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from smgpy._native import Tokenizer, Vocabulary
from smgpy.engine import ContextLengthExceeded, EngineOverloaded, EngineRequestError, GenerateOutput
from smgpy.images import ImageError, ImagePolicy, load_images
from smgpy.mlx import mlx_lm_api, vlm
from smgpy.mlx.batching import Outlet, Scheduler, Sequence
from smgpy.mlx.detokenize import IncrementalDecoder, end_of_turn_ids
from smgpy.mlx.draft import DraftModel
from smgpy.mlx.mailbox import Mailboxes
from smgpy.mlx.prefix_disk import DiskStore, model_identity
from smgpy.mlx.sampling import SamplingParams
from smgpy.mlx.structured import StructuredOutput
from smgpy.options import KV_BITS, KV_GROUP_SIZES, MLX_DEFAULTS

__all__ = ["MLXEngine", "resolve_model"]

log = logging.getLogger("smgpy.mlx")

# Prompts up to this many characters are encoded on the event loop (well under a millisecond).
_ENCODE_ON_LOOP_CHARS = 2048


def _native_tokenizer(model_path: str, bos: str | None) -> Tokenizer | None:
    """The model's tokenizer.json in Rust, or None when the model directory has none."""
    path = Path(model_path) / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        return Tokenizer.from_file(str(path), bos)
    except ValueError as e:  # a tokenizer.json the Rust library cannot read: stay in Python
        log.warning("%s: %s; tokenizing in Python", path, e)
        return None


class _Tokenizer:
    """What the server's ``/v1/tokenize`` needs: ``encode`` / ``decode`` on token ids."""

    def __init__(self, hf: Any) -> None:
        self._hf = hf

    def encode(self, text: str) -> list[int]:
        return list(self._hf.encode(text, add_special_tokens=False))

    def decode(self, ids: list[int]) -> str:
        return str(self._hf.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False))


def resolve_model(model: str, *, dtype: str | None = None) -> tuple[str, str]:
    """Map ``model`` to ``(mlx-lm path or HF id, display name)``; GGUF files are converted once.

    ``dtype`` applies to GGUF conversion only: ``"float32"`` (default on CPU), ``"float16"``,
    ``"bfloat16"`` or ``"quantized"`` to keep the GGUF's own weights.
    """
    p = Path(model).expanduser()
    if p.suffix == ".gguf":
        from smgpy.mlx.gguf import convert_gguf

        if dtype is None:
            import mlx.core as mx

            dtype = "float32" if mx.default_device() == mx.cpu else "quantized"
        out = convert_gguf(p, dtype=None if dtype == "quantized" else dtype)
        name = p.stem.split(".")[0]  # "SmolLM2-135M-Instruct.Q4_1" -> "SmolLM2-135M-Instruct"
        return str(out), name
    if p.is_dir():
        return str(p.resolve()), p.resolve().name
    return model, model  # a Hugging Face id: mlx-lm downloads it through huggingface_hub


# Keys of generation_config.json that set sampling defaults (vLLM reads the same ones).
SAMPLING_DEFAULT_KEYS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")


def _checked_defaults(d: dict[str, Any]) -> dict[str, float]:
    unknown = sorted(set(d) - set(SAMPLING_DEFAULT_KEYS))
    if unknown:
        raise ValueError(f"unknown default sampling keys {unknown}: use {', '.join(SAMPLING_DEFAULT_KEYS)}")
    return {k: float(v) for k, v in d.items() if v is not None}


def model_generation_defaults(model_path: str) -> dict[str, float]:
    """Sampling defaults from the model's ``generation_config.json`` (local directory, or the
    Hugging Face cache for a hub id); ``{}`` when it has none."""
    path = Path(model_path) / "generation_config.json"
    if not path.is_file():
        try:
            from huggingface_hub import try_to_load_from_cache

            cached = try_to_load_from_cache(model_path, "generation_config.json")
        except Exception:  # not a hub id, or no huggingface_hub
            return {}
        if not isinstance(cached, str):
            return {}
        path = Path(cached)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        log.warning("ignoring %s: %s", path, e)
        return {}
    return {
        k: float(v)
        for k in SAMPLING_DEFAULT_KEYS
        if isinstance(v := config.get(k), int | float) and not isinstance(v, bool)
    }


class MLXEngine:
    """A continuous-batching MLX engine for ``smgpy.serve_oai``.

    It enforces every structured-output constraint the server sends (llguidance), Lark
    grammars included (``lark_grammars``), so forced tool calls are held to the model's own
    tool-call format.

    Build it with :meth:`from_pretrained`. Attributes ``model_name``, ``context_length``,
    ``chat_template``, ``special_tokens``, ``eos_token_ids`` and ``tokenizer`` are read by the
    server, so it needs no other configuration.
    """

    lark_grammars = True

    def __init__(
        self,
        model_path: str,
        *,
        model_name: str | None = None,
        max_running: int = MLX_DEFAULTS.max_running,
        max_waiting: int = MLX_DEFAULTS.max_waiting,
        prefix_cache_bytes: int = MLX_DEFAULTS.prefix_cache_bytes,
        prefix_cache_dir: str | None = None,
        prefix_cache_disk_bytes: int = MLX_DEFAULTS.prefix_cache_disk_bytes,
        context_length: int | None = None,
        prefill_step_size: int = MLX_DEFAULTS.prefill_step_size,
        default_sampling: dict[str, float] | None = None,
        generation_config: bool = True,
        kv_bits: int | None = None,
        kv_group_size: int = MLX_DEFAULTS.kv_group_size,
        compile_step: bool = MLX_DEFAULTS.compile_step,
        image_policy: ImagePolicy | None = None,
        prompt_lookup_tokens: int = MLX_DEFAULTS.prompt_lookup_tokens,
        draft_model: str | None = None,
        num_draft_tokens: int = MLX_DEFAULTS.num_draft_tokens,
    ) -> None:
        if max_running < 1 or max_waiting < 0 or prefill_step_size < 1:
            raise ValueError("max_running and prefill_step_size must be >= 1, and max_waiting >= 0")
        if kv_bits is not None and kv_bits not in KV_BITS:
            raise ValueError(f"kv_bits must be one of {', '.join(map(str, KV_BITS))} (got {kv_bits})")
        if num_draft_tokens < 1:
            raise ValueError(f"num_draft_tokens must be >= 1 (got {num_draft_tokens})")
        if kv_group_size not in KV_GROUP_SIZES:
            sizes = ", ".join(map(str, KV_GROUP_SIZES))
            raise ValueError(f"kv_group_size must be one of {sizes} (got {kv_group_size})")
        explicit_sampling = _checked_defaults(default_sampling or {})
        self.model_path = model_path
        self.model_name = model_name or model_path
        self.max_waiting = max_waiting
        # Read by the server: an `n` above it could never be scheduled, so it is refused up front.
        self.max_running_requests = max_running
        self._config: dict[str, Any] = {}
        self._mailboxes = Mailboxes()
        self._vision: vlm.VisionModel | None = None
        self.image_policy = image_policy or ImagePolicy()

        def load() -> tuple[Any, Any]:
            if vlm.is_vlm(model_path):
                model, tok, config = vlm.load(model_path)
                self._vision = model
            else:
                model, tok, config = mlx_lm_api.load(model_path)
            self._config = config
            return model, tok

        load_draft = None
        if draft_model is not None:
            draft_path = resolve_model(draft_model)[0]

            def load_draft(target_tokenizer: Any) -> DraftModel:
                model, tok, _ = mlx_lm_api.load(draft_path)
                return DraftModel(model, tok, target_tokenizer, path=f"the draft model {draft_model}")

        disk = None
        if prefix_cache_dir and prefix_cache_bytes > 0:
            disk = DiskStore(prefix_cache_dir, model_identity(model_path), prefix_cache_disk_bytes)
        self._sched = Scheduler(
            load,
            max_running=max_running,
            prefix_cache_bytes=prefix_cache_bytes,
            prefill_step_size=prefill_step_size,
            prefix_disk=disk,
            kv_bits=kv_bits,
            kv_group_size=kv_group_size,
            compile_step=compile_step,
            lookup_tokens=prompt_lookup_tokens,
            load_draft=load_draft,
            draft_tokens=num_draft_tokens,
        )
        self._thread = threading.Thread(target=self._sched.run, name="smgpy-mlx", daemon=True)
        self._thread.start()
        self._sched.ready.wait()
        if self._sched.load_error is not None:
            raise self._sched.load_error
        wrapper = self._sched.tokenizer
        self._hf = mlx_lm_api.hf_tokenizer(wrapper)
        self.eos_token_ids: list[int] = sorted(int(t) for t in wrapper.eos_token_ids)
        self._drop = end_of_turn_ids(self._hf, self.eos_token_ids)
        self.vocab_size = int(self._config.get("vocab_size") or len(self._hf))
        self.context_length: int = int(context_length or self._context_from_config())
        self.chat_template: str | None = getattr(self._hf, "chat_template", None)
        if self.chat_template is None and self._vision is not None:
            # Vision-language models often keep theirs with the processor (chat_template.json).
            self.chat_template = getattr(self._vision.processor, "chat_template", None)
        # Image parts reach a vision-language model as ``image_data`` (data: or http(s) URLs),
        # with the rendered prompt holding its image placeholders.
        self.accepts_images = self._vision is not None
        # file:// image URLs, read within the operator's directory (ImagePolicy.local_path).
        self.accepts_local_images = self.accepts_images and self.image_policy.local_path is not None
        self.special_tokens: dict[str, str] = {
            k: str(v)
            for k in ("bos_token", "eos_token", "pad_token", "unk_token")
            if (v := getattr(self._hf, k, None)) is not None
        }
        self._bos = self.special_tokens.get("bos_token")
        # The model's tokenizer.json in Rust when it has one: the server then tokenizes prompts
        # itself (off this event loop) and sends input_ids, and each sequence's detokenizer is
        # one Rust call per token. Otherwise the Hugging Face tokenizer in Python.
        self._native = _native_tokenizer(model_path, self._bos)
        self.tokenizer: Any = self._native if self._native is not None else _Tokenizer(self._hf)
        self.accepts_input_ids = True
        # n choices of a request share one prefill (see batching.Scheduler._join).
        self.accepts_n = True
        # Structured output; the vocabulary is built on first use (``vocabulary``, read by the
        # server at start, or the first constrained request).
        self._structured = StructuredOutput(self._hf, self.eos_token_ids, self.vocab_size)
        # Sampling defaults for keys a request leaves out, as vLLM does: the model's
        # generation_config.json first, explicit defaults (``smgpy serve --temp ...``) over it.
        from_model = model_generation_defaults(model_path) if generation_config else {}
        self.default_sampling: dict[str, float] = {**from_model, **explicit_sampling}

    @classmethod
    def from_pretrained(cls, model: str, *, dtype: str | None = None, **kwargs: Any) -> MLXEngine:
        """Load ``model``: a local mlx-lm directory, a Hugging Face id or a ``.gguf`` file.

        Keyword arguments go to the constructor: ``max_running``, ``max_waiting``,
        ``prefill_step_size`` (prompt tokens prefilled between two decode steps),
        ``prefix_cache_bytes``, ``prefix_cache_dir`` (a directory that keeps prefix-cache entries
        across restarts) and ``prefix_cache_disk_bytes`` (its bound), ``context_length``,
        ``model_name``, ``default_sampling`` (sampling values for keys a request leaves out, over
        the model's ``generation_config.json``), ``generation_config`` (False ignores that file),
        ``kv_bits`` (store the running batch's keys and values quantized to 2-8 bits; plain-attention
        models only), ``kv_group_size`` (channels per quantization group: 32, 64 or 128) and
        ``compile_step`` (False builds the decode step's graph at every step instead of compiling
        it once per batch shape), ``image_policy`` (bounds on images, for vision-language models:
        :class:`smgpy.images.ImagePolicy`), ``prompt_lookup_tokens`` (draft tokens per step of
        prompt-lookup speculation while one sequence runs: :mod:`smgpy.mlx.lookup`), and
        ``draft_model`` (a smaller model with the same tokenizer, any form ``model`` takes) with
        ``num_draft_tokens`` (its tokens per step), which replaces prompt lookup:
        :mod:`smgpy.mlx.draft`.
        """
        path, name = resolve_model(model, dtype=dtype)
        if kwargs.get("model_name") is None:
            kwargs["model_name"] = name
        return cls(path, **kwargs)

    def _context_from_config(self) -> int:
        for key in ("max_position_embeddings", "max_sequence_length", "n_positions", "seq_length"):
            v = self._config.get(key)
            if isinstance(v, int) and v > 0:
                return v
        v = getattr(self._hf, "model_max_length", None)
        return int(v) if isinstance(v, int) and 0 < v < 10**7 else 4096

    # ----- the engine protocol -----

    async def _image_prompt(self, obj: Any, urls: list[str]) -> vlm.ImagePrompt:
        """Decode and process a prompt with images, off the event loop."""
        vision = self._vision
        if vision is None:
            raise EngineRequestError("this model takes no images (it is not a vision-language model)")
        text = getattr(obj, "text", None)
        if not isinstance(text, str):
            raise EngineRequestError("a request with images needs a text prompt holding their placeholders")
        policy = self.image_policy

        def work() -> vlm.ImagePrompt:
            images = load_images(urls, policy)
            try:
                prompt = vision.process(text, [i.image for i in images])
            except Exception as e:  # the processor refused the image (too small, odd shape)
                raise ImageError(f"the model's processor could not take the image(s): {e}") from None
            vision.key_images(prompt, [i.digest for i in images])
            return prompt

        try:
            return await asyncio.to_thread(work)
        except ValueError as e:  # ImageError and placeholder mismatches
            raise EngineRequestError(str(e)) from None

    async def _prompt_tokens(self, obj: Any) -> list[int]:
        ids = getattr(obj, "input_ids", None)
        if ids:
            tokens = [int(t) for t in ids]
            # An id past the embedding table would read out of bounds inside MLX.
            bad = next((t for t in tokens if not 0 <= t < self.vocab_size), None)
            if bad is not None:
                raise EngineRequestError(
                    f"input_ids holds token id {bad}, outside the vocabulary (0..{self.vocab_size - 1})"
                )
            return tokens
        text = getattr(obj, "text", None)
        if text is None:
            raise EngineRequestError("the request has neither text nor input_ids")
        if self._native is not None:
            # A long prompt is encoded off the event loop, which other streams need meanwhile.
            if len(text) > _ENCODE_ON_LOOP_CHARS:
                return await asyncio.to_thread(self._native.encode_prompt, text)
            return self._native.encode_prompt(text)
        # A rendered chat template already carries its BOS; adding another would change the prompt.
        add_special = not (self._bos and text.startswith(self._bos))
        return list(self._hf.encode(text, add_special_tokens=add_special))

    def _decoder(self) -> Any:
        if self._native is not None:
            return self._native.decoder(sorted(self._drop))
        return IncrementalDecoder(self._hf, self._drop)

    async def generate_request(self, obj: Any) -> AsyncIterator[GenerateOutput]:
        """Generate for ``obj`` (see :mod:`smgpy.engine`); yields ``"delta"`` output dicts."""
        rid = getattr(obj, "rid", None) or uuid.uuid4().hex
        urls = getattr(obj, "image_data", None)
        vision = await self._image_prompt(obj, list(urls)) if urls else None
        tokens = vision.keys if vision is not None else await self._prompt_tokens(obj)
        requested = dict(getattr(obj, "sampling_params", None) or {})
        for key, value in self.default_sampling.items():
            if requested.get(key) is None:
                requested[key] = int(value) if key == "top_k" else value  # an integer on the wire
        params = SamplingParams.from_dict(requested, self.vocab_size)
        if params.n > self._sched.max_running:
            raise EngineRequestError(
                f"n is {params.n}, but this engine runs at most {self._sched.max_running} sequences at once"
            )
        n_prompt = len(tokens)
        if n_prompt == 0:
            raise EngineRequestError("the prompt is empty")
        if n_prompt >= self.context_length:
            raise ContextLengthExceeded(
                f"the prompt has {n_prompt} tokens, but the model's context length is {self.context_length} tokens"
            )
        if params.max_new_tokens is not None and n_prompt + params.max_new_tokens > self.context_length:
            raise ContextLengthExceeded(
                f"the prompt ({n_prompt} tokens) plus max_tokens ({params.max_new_tokens}) is "
                f"{n_prompt + params.max_new_tokens} tokens, more than the model's context length of "
                f"{self.context_length} tokens"
            )
        # Capacity is the running slots plus the waiting queue; a request the MLX thread has not
        # picked up yet counts as waiting even when a slot is free, so compare the sum.
        sched = self._sched
        if sched.running + sched.pending >= sched.max_running + self.max_waiting:
            raise EngineOverloaded(
                f"the engine is full: {sched.running} requests running (limit {sched.max_running}) and "
                f"{sched.pending} waiting (limit {self.max_waiting}); retry later"
            )
        max_tokens = params.max_new_tokens or (self.context_length - n_prompt)
        stop_ids = frozenset(params.stop_token_ids) | (
            frozenset() if params.ignore_eos else frozenset(self.eos_token_ids)
        )
        logprobs = bool(getattr(obj, "return_logprob", False))
        top = int(getattr(obj, "top_logprobs_num", 0) or 0) if logprobs else None
        grammar = await self._structured.grammar(requested, getattr(obj, "grammar", None))

        # Client cache hints: a `prompt_cache_key` (OpenAI) or `cache_control` breakpoints
        # (Anthropic) keep this request's prefix-cache entries ahead of plain ones; breakpoints are
        # also where an untrimmable model's state is snapshotted.
        pin = bool(getattr(obj, "prompt_cache_key", None)) or bool(getattr(obj, "cache_breakpoints", None))
        breakpoints = sorted(
            {int(p) for p in getattr(obj, "cache_breakpoints", None) or () if 0 < int(p) < len(tokens)}
        )
        q: asyncio.Queue[GenerateOutput] = asyncio.Queue()
        outlet = Outlet(self._mailboxes.for_running_loop(), q)
        group = [
            Sequence(
                rid=rid,
                index=i,
                tokens=tokens,
                params=params,
                max_tokens=max_tokens,
                stop_ids=stop_ids,
                decoder=self._decoder(),
                outlet=outlet,
                top_logprobs=top,
                with_index=params.n > 1,
                matcher=None if grammar is None else grammar.matcher(),
                pin=pin,
                breakpoints=breakpoints,
                vision=vision,
            )
            for i in range(params.n)
        ]
        self._sched.submit(group)
        remaining = params.n
        try:
            while remaining:
                item = await q.get()
                if item["meta_info"]["finish_reason"] is not None:
                    remaining -= 1
                yield item
        finally:
            if remaining:  # the consumer went away (client disconnect): free the slots
                self.abort_request(rid)

    @property
    def vocabulary(self) -> Vocabulary:
        """The model's tokens for structured output: the server compiles each request's constraint
        against it once and hands the result over as the request's ``grammar``."""
        return self._structured.vocabulary()

    def abort_request(self, rid: str) -> None:
        """Stop request ``rid``; its batch slot is freed before the next decode step."""
        self._sched.abort(rid)

    def get_load(self) -> dict[str, Any]:
        """Running and waiting requests, tokens in use and prefix-cache use, for ``/v1/loads``."""
        return self._sched.load_info()

    def flush_cache(self) -> None:
        """Drop the prefix cache (``POST /flush_cache``)."""
        self._sched.flush_cache()

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop the MLX thread; running and waiting requests end with an abort."""
        self._sched.shutdown()
        self._sched.stopped.wait(timeout)
        self._mailboxes.close()

    def info(self) -> dict[str, Any]:
        """A summary for logs: name, path, context, limits."""
        return {
            "model_name": self.model_name,
            "model_path": self.model_path,
            "context_length": self.context_length,
            "max_running": self._sched.max_running,
            "max_waiting": self.max_waiting,
            "prefix_cache_bytes": self._sched.prefix_cache_bytes,
            "config": json.dumps({k: self._config.get(k) for k in ("model_type", "hidden_size", "num_hidden_layers")}),
        }
