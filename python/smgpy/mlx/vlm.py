"""The one module through which smgpy's MLX engine reaches into mlx-vlm.

A vision-language model directory (its ``config.json`` has a ``vision_config``) is loaded with
``mlx_vlm.load`` and wrapped in :class:`VisionModel`, which answers the calls the batching loop
makes on an mlx-lm model: ``model(inputs, cache=...)`` returns logits, and ``model.layers`` sizes
the cache, so text rows and image rows run in one batch with mlx-lm's cache classes.

What the loop needs beyond that, all here:

- :meth:`VisionModel.process` runs the model's own processor (``mlx_vlm.prepare_inputs``: the
  Hugging Face processor expands each image placeholder of the rendered prompt into the model's
  image tokens and resizes the pixels). It runs off the MLX thread, and returns numpy arrays.
- :meth:`VisionModel.embed` runs the vision tower and merges its features into the prompt's
  embeddings (``get_input_embeddings``, mlx-vlm's public model method), with the multimodal
  rotary positions of models that have them (Qwen2-VL's family: M-RoPE).
- Positions: an M-RoPE model places the tokens after an image at ``index + delta`` (the image
  takes fewer positions than tokens). The loop keeps each row's delta and passes it per step, so
  rows of different images decode in one batch; mlx-vlm's own language model keeps one delta in
  module state, which would be wrong for every row but the last.

Importing mlx-vlm (and mlx-audio, which it imports while loading) sets ``TRANSFORMERS_*``
variables in ``os.environ``; they are restored, so loading a model leaves the environment as it was.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from smgpy.mlx.environment import environment_kept

__all__ = ["ImagePrompt", "ImagesRefused", "ModelNotServed", "VisionModel", "image_key", "is_vlm", "load"]

# Image tokens are keyed in the prefix cache as ids from here up (past any vocabulary), one id
# per image content hash, so two prompts share a cached prefix only where their images are equal.
_IMAGE_KEY_BASE = 1 << 29
_IMAGE_KEY_SPAN = 1 << 28

# Features of mlx-vlm's embedding step that the engine's language model calls do not carry.
_NOT_CARRIED = (
    "cross_attention_states",
    "cross_attention_mask",
    "full_text_row_masked_out_mask",
    "decoder_inputs_embeds",
    "pos_hw",
)

# What a language model may take that the engine's batch does not carry: a model whose language
# model names one is refused at load (Llama 3.2 Vision's cross-attention, Florence-2's encoder).
_UNSERVED_INPUTS = ("cross_attention_states", "decoder_inputs_embeds", "encoder_outputs")

# Processor outputs with one entry per prompt token that a language model may take by name.
_TOKEN_INPUTS = ("mm_token_type_ids", "token_type_ids")


class ModelNotServed(ValueError):
    """The engine does not serve this model (its language model computes what the engine's batch
    cannot): loading fails with this message, written for the user."""


class ImagesRefused(ValueError):
    """A prompt's images give the language model what the engine cannot carry: the request ends
    with a 400 and this message (written for the client)."""


def is_vlm(model_path: str) -> bool:
    """Whether the directory holds a vision-language model (``vision_config`` in config.json)."""
    path = Path(model_path) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and isinstance(config.get("vision_config"), dict)


def _import_mlx_vlm() -> Any:
    try:
        with environment_kept():
            import mlx_vlm
    except ImportError as e:
        raise ImportError(
            f"this model directory holds a vision-language model, which needs mlx-vlm: "
            f"pip install 'smgpy[vision]' ({e})"
        ) from e
    return mlx_vlm


def image_key(digest: bytes) -> int:
    """The prefix-cache id of an image's tokens: from its content hash, outside every vocabulary."""
    return _IMAGE_KEY_BASE + int.from_bytes(digest[:8], "little") % _IMAGE_KEY_SPAN


@dataclass(eq=False)
class ImagePrompt:
    """A prompt with images, as the processor made it: real token ids (image tokens expanded) and
    the model's pixel inputs; ``keys`` are the ids the prefix cache sees (image tokens replaced
    by :func:`image_key` of their image)."""

    input_ids: list[int]
    keys: list[int]
    pixels: dict[str, np.ndarray | list[np.ndarray]] = field(default_factory=dict)
    images: int = 0
    # Whether the prompt's text has more than special tokens and whitespace between every two image
    # placeholders (VisionModel.key_images).
    separated: bool = True
    # The ids the model's embedding step takes, where they differ from ``input_ids``: Phi-3.5-vision's
    # processor writes image N's tokens as -N, which the engine's ids hold as the image token id.
    model_ids: list[int] | None = None


@dataclass(eq=False)
class VisionInputs:
    """A prompt's embeddings, computed on the MLX thread: ``embeds`` (1, L, D), the rotary
    ``positions`` of an M-RoPE model (3, 1, L) or None, and the row's position ``delta``.

    Qwen3-VL's family also adds features of the vision tower's inner layers to the hidden states
    of the language model's first layers, at the image tokens ("deepstack"): ``deepstack`` holds
    them, one (image tokens, D) array per layer, and ``visual`` marks the prompt's image tokens (L,).

    ``aligned``: the language model's keyword arguments that hold one entry per prompt token
    (1, L, ...), cut to each chunk: Gemma 3n's and Gemma 4's per-layer inputs (an image token's is
    the padding id's, which the language model would not derive from the ids it is given), and
    Gemma 4's token types (which tokens are an image's).

    ``through``: where the first prefill chunk must reach (the end of the last image), or 0. The
    large Gemma 4 models let one image's tokens attend to each other both ways, and mlx-vlm's
    language model builds that mask only for a pass that starts at position 0 and holds the whole
    image: such a prompt is prefilled from 0 through its last image in one chunk."""

    embeds: mx.array
    positions: mx.array | None
    delta: int
    deepstack: list[mx.array] | None = None
    visual: np.ndarray | None = None
    aligned: dict[str, mx.array] = field(default_factory=dict)
    through: int = 0

    def layer_features(self, a: int, b: int) -> dict[str, Any]:
        """The language model's keyword arguments for prompt positions ``a..b`` (one prefill
        chunk): the per-token features cut to them, and the deepstack features of the image
        tokens among them; empty when none."""
        out: dict[str, Any] = {name: value[:, a:b] for name, value in self.aligned.items()}
        if self.deepstack is None or self.visual is None:
            return out
        first, last = int(self.visual[:a].sum()), int(self.visual[:b].sum())
        if first == last:
            return out
        out["visual_pos_masks"] = mx.array(self.visual[a:b])[None]
        out["deepstack_visual_embeds"] = [layer[first:last] for layer in self.deepstack]
        return out


class VisionModel:
    """An mlx-vlm model as the batching loop calls an mlx-lm one."""

    def __init__(self, model: Any, processor: Any) -> None:
        self.model = model
        self.processor = processor
        self.config = model.config
        self._lm = model.language_model
        text_config = getattr(model.config, "text_config", None)
        if getattr(text_config, "use_bidirectional_attention", None) in (True, "all"):
            # mlx-vlm runs such a prompt in one pass without a mask (PaliGemma's config sets this
            # whenever it is unset); chunks, causal within, and a last token fed as a decode step
            # would answer other tokens.
            raise ModelNotServed(
                f"{model.config.model_type}: smgpy's MLX engine does not serve this model: its language "
                "model attends both ways over the whole prompt (a prefix-LM), which the engine's chunked "
                "causal prefill does not compute"
            )
        # Qwen2-VL's family: positions are (3, B, L), and text after an image is offset.
        self.mrope = hasattr(self._lm, "get_rope_index") and hasattr(self._lm, "model") and hasattr(self._lm, "args")
        image_token_id = _image_token_id(model.config)
        from mlx_vlm.utils import should_add_special_tokens

        self._add_special = bool(should_add_special_tokens(model.config.model_type, processor))
        if image_token_id is None:
            raise ValueError(f"{model.config.model_type}: its config names no image token id")
        self.image_token_id: int = image_token_id
        self.bidirectional = getattr(text_config, "use_bidirectional_attention", None) == "vision"
        self._blank: dict[int, bool] = {}
        inner = getattr(self._lm, "model", self._lm)
        named = _parameters(inner) | _parameters(self._lm)
        unserved = sorted(named & set(_UNSERVED_INPUTS))
        if unserved:
            raise ModelNotServed(
                f"{model.config.model_type}: smgpy's MLX engine does not serve this model: its language model "
                f"takes {', '.join(unserved)} (cross-attention to the image, or an encoder's outputs), which "
                "the engine's batch does not carry"
            )
        # The processor's per-token outputs the language model takes by name (Gemma 4's token
        # types); a language model that does not name them is not given them.
        self._token_inputs = [k for k in _TOKEN_INPUTS if k in named]

    @property
    def layers(self) -> list[Any]:
        """The language model's layers (what ``make_prompt_cache`` counts)."""
        inner = getattr(self._lm, "model", self._lm)
        layers: list[Any] = inner.layers
        return layers

    def make_cache(self) -> list[Any]:
        """The language model's own caches where it defines them, plain KV caches otherwise."""
        make = getattr(self._lm, "make_cache", None)
        if make is not None:
            caches: list[Any] = make()
            return caches
        from smgpy.mlx import mlx_lm_api

        return [mlx_lm_api.KVCache() for _ in self.layers]

    def __call__(
        self,
        inputs: mx.array,
        cache: list[Any] | None = None,
        *,
        inputs_embeds: mx.array | None = None,
        positions: mx.array | None = None,
        deltas: mx.array | None = None,
        features: dict[str, Any] | None = None,
    ) -> mx.array:
        """Logits for ``inputs`` (B, L). ``positions``: an image prompt's own rotary positions
        for these tokens; otherwise each row is at its cache offset plus its ``deltas`` entry.
        ``features``: the image prompt's features for its layers (:meth:`VisionInputs.layer_features`)."""
        extra = features or {}
        if self.mrope:
            if positions is None:
                positions = self._positions(inputs.shape[0], inputs.shape[1], cache, deltas)
            # The language model's own __call__ keeps one rope delta in module state and reads
            # the cache's offset as a Python number (an evaluation, which a compiled step cannot
            # do); with explicit positions, its body and head are all there is to run.
            h = self._lm.model(inputs, inputs_embeds=inputs_embeds, cache=cache, position_ids=positions, **extra)
            # A tied head is the embedding's transpose (GLM-4V's config names no tying: its head is
            # its own lm_head).
            lm_head = getattr(self._lm, "lm_head", None)
            if lm_head is None or getattr(self._lm.args, "tie_word_embeddings", False):
                head: mx.array = self._lm.model.embed_tokens.as_linear(h)
                return head
            head = lm_head(h)
            return head
        out = self._lm(inputs, inputs_embeds=inputs_embeds, cache=cache, **extra)
        logits: mx.array = getattr(out, "logits", out)
        return logits

    @staticmethod
    def _positions(rows: int, length: int, cache: list[Any] | None, deltas: mx.array | None) -> mx.array:
        # The first layer with a position (a hybrid model's recurrent layers keep none).
        offset: Any = next((c.offset for c in cache or [] if hasattr(c, "offset")), 0)
        start = mx.array(offset, dtype=mx.int32).reshape(-1, 1)  # (1 or B, 1): per-row offsets
        if deltas is not None:
            start = start + deltas.astype(mx.int32).reshape(-1, 1)
        pos = start + mx.arange(length, dtype=mx.int32)[None, :]
        return mx.broadcast_to(pos[None], (3, rows, length))

    def process(self, text: str, images: list[Any]) -> ImagePrompt:
        """Tokenize ``text`` with ``images`` (PIL images, in placeholder order) through the model's
        processor. Called off the MLX thread; the arrays it returns are numpy."""
        from mlx_vlm.utils import prepare_inputs

        out = prepare_inputs(  # type: ignore[no-untyped-call]
            self.processor,
            images=images,
            prompts=text,
            image_token_index=self.image_token_id,
            add_special_tokens=self._add_special,
        )
        ids = [int(t) for t in np.asarray(out["input_ids"]).reshape(-1)]
        model_ids = None
        if any(t < 0 for t in ids):  # image N's tokens written as -N (Phi-3.5-vision)
            model_ids, ids = ids, [self.image_token_id if t < 0 else t for t in ids]
        # Images of different sizes come as a list of arrays where the processor does not resize
        # them to one size (Gemma 4's keeps each image's aspect ratio). Outputs that are not
        # numbers (DeepSeek-VL2's rendered prompt text) are no input of the model's.
        pixels: dict[str, np.ndarray | list[np.ndarray]] = {}
        for k, v in out.items():
            if k in ("input_ids", "attention_mask") or v is None:
                continue
            arrays = [np.asarray(x) for x in v] if isinstance(v, list) else [np.asarray(v)]
            if all(a.dtype.kind in "biuf" for a in arrays):
                pixels[k] = arrays if isinstance(v, list) else arrays[0]
        separated = len(images) < 2 or self._separated(text, len(images))
        return ImagePrompt(
            input_ids=ids,
            keys=list(ids),
            pixels=pixels,
            images=len(images),
            separated=separated,
            model_ids=model_ids,
        )

    def key_images(self, prompt: ImagePrompt, digests: list[bytes]) -> None:
        """Replace each image's tokens in ``prompt.keys`` by its image's :func:`image_key`.

        An image is one run of image tokens (Qwen, Gemma) or several: Pixtral's rows of patches
        between break tokens, LFM2-VL's and SmolVLM's tiles after their row/column markers and
        line breaks. With one image, or one run per image, which image a run is is plain. Else runs
        joined only by special tokens and whitespace are one image, provided the prompt's text has
        more than that between every two image placeholders (:attr:`ImagePrompt.separated`): two
        images are then never taken for one. Where the runs still do not pair with the images,
        every image token is keyed by all of the prompt's images together, so that a cached prefix
        is shared up to the first image only, never with other images."""
        ids = prompt.input_ids
        runs: list[list[int]] = []  # [start, end) of each run of image tokens
        for i, t in enumerate(ids):
            if t != self.image_token_id:
                continue
            if runs and runs[-1][1] == i:
                runs[-1][1] = i + 1
            else:
                runs.append([i, i + 1])
        if len(runs) < len(digests):
            raise ValueError(
                f"the prompt holds {len(runs)} image placeholder(s) for {len(digests)} image(s): "
                "the chat template must place one placeholder per image"
            )
        if prompt.model_ids is not None:  # each run's image is written in its ids (-N: image N)
            images = [[run for run in runs if prompt.model_ids[run[0]] == -n] for n in range(1, len(digests) + 1)]
            if sum(len(image) for image in images) != len(runs) or not all(images):
                images = []
        elif len(digests) == 1:
            images = [runs]
        elif len(runs) == len(digests):
            images = [[run] for run in runs]
        elif prompt.separated:
            images = [[runs[0]]]
            for run in runs[1:]:
                if all(self._joins(t) for t in ids[images[-1][-1][1] : run[0]]):
                    images[-1].append(run)
                else:
                    images.append([run])
        else:
            images = []
        if len(images) != len(digests):
            images, digests = [runs], [hashlib.sha256(b"".join(digests)).digest()]
        for digest, image in zip(digests, images, strict=True):
            key = image_key(digest)
            for a, b in image:
                prompt.keys[a:b] = [key] * (b - a)

    def _separated(self, text: str, images: int) -> bool:
        """Whether ``text`` holds ``images`` image tokens, with a token between every two of them
        that could not stand between the runs of one image (not special, not whitespace). A
        tokenizer that cannot be called so answers no: the keys then take the safe way."""
        try:
            ids = self._tokenizer(text, add_special_tokens=False)["input_ids"]
        except (TypeError, KeyError, AttributeError, ValueError):
            return False
        marks = [i for i, t in enumerate(ids) if t == self.image_token_id]
        if len(marks) != images:
            return False
        return all(not all(self._joins(t) for t in ids[a + 1 : b]) for a, b in zip(marks, marks[1:], strict=False))

    def _joins(self, token: int) -> bool:
        """Whether ``token`` may stand between the runs of one image: a special token, or whitespace."""
        if token in self._special_ids:
            return True
        blank = self._blank.get(token)
        if blank is None:  # at most one entry per vocabulary id
            blank = self._blank[token] = not self._tokenizer.decode([token]).strip()
        return blank

    @functools.cached_property
    def _tokenizer(self) -> Any:
        return getattr(self.processor, "tokenizer", self.processor)

    @functools.cached_property
    def _special_ids(self) -> set[int]:
        """The tokenizer's special and added token ids (what a processor puts between an image's runs)."""
        ids = set(getattr(self._tokenizer, "all_special_ids", None) or [])
        ids.update(getattr(self._tokenizer, "added_tokens_decoder", None) or {})
        return ids

    def embed(self, prompt: ImagePrompt) -> VisionInputs:
        """Run the vision tower and merge its features into the prompt's embeddings (lazily)."""
        ids = mx.array([prompt.model_ids or prompt.input_ids], dtype=mx.int32)
        pixels = {k: [mx.array(x) for x in v] if isinstance(v, list) else mx.array(v) for k, v in prompt.pixels.items()}
        pixel_values = pixels.pop("pixel_values", None)
        features = self.model.get_input_embeddings(ids, pixel_values, mask=mx.ones_like(ids), **pixels)
        self._refuse_uncarried(features, len(prompt.input_ids))
        embeds = getattr(features, "inputs_embeds", features)
        if embeds.shape[1] != len(prompt.input_ids):
            # The processor and the model disagree on the image's size in tokens (mlx-vlm's
            # LLaVA-NeXT at some picture sizes): the positions would not be the prompt's.
            raise ImagesRefused(
                f"{type(self.model).__module__.rsplit('.', 1)[-1]}: the model's embeddings cover "
                f"{embeds.shape[1]} positions for the processor's {len(prompt.input_ids)} prompt tokens"
            )
        positions = getattr(features, "position_ids", None) if self.mrope else None
        delta = 0
        if self.mrope:
            deltas = getattr(features, "rope_deltas", None)
            if positions is None:  # the features carry none: ask the language model
                positions, deltas = self._lm.get_rope_index(ids, pixels.get("image_grid_thw"), None, mx.ones_like(ids))
            delta = int(np.asarray(deltas).reshape(-1)[0]) if deltas is not None else 0
        aligned = {k: mx.array(prompt.pixels[k]) for k in self._token_inputs if k in prompt.pixels}
        per_layer = getattr(features, "per_layer_inputs", None)
        if per_layer is not None:
            aligned["per_layer_inputs"] = per_layer
        through = 0
        if self.bidirectional:
            image = np.flatnonzero(np.asarray(prompt.input_ids) == self.image_token_id)
            through = int(image[-1]) + 1 if image.size else 0
        inputs = VisionInputs(embeds=embeds, positions=positions, delta=delta, aligned=aligned, through=through)
        deepstack = getattr(features, "deepstack_visual_embeds", None)
        visual = getattr(features, "visual_pos_masks", None)
        if deepstack is None or visual is None:
            return inputs
        visual = np.asarray(visual).reshape(-1).astype(bool)
        layers = list(deepstack)  # a list per layer (Qwen3-VL), or one array with the layers first
        shapes = [tuple(layer.shape) for layer in layers]
        if any(len(shape) != 2 or shape[0] != int(visual.sum()) for shape in shapes):
            # Another layout (e.g. Qwen3-Omni's) could not be cut into prefill chunks: refuse the
            # request rather than answer without the features.
            raise ImagesRefused(
                f"{type(self.model).__module__.rsplit('.', 1)[-1]}: image features of shapes {shapes} for "
                f"{int(visual.sum())} image tokens are not supported"
            )
        inputs.deepstack, inputs.visual = layers, visual
        return inputs

    def _refuse_uncarried(self, features: Any, length: int) -> None:
        """Refuse a prompt whose embedding step returned what the engine's language model calls do
        not carry, rather than answer it without: cross-attention to the image (Llama 3.2 Vision),
        encoder-decoder inputs (Florence-2), 2-D patch positions (Falcon OCR), or, in a model
        without M-RoPE, positions other than the default ones."""
        model = type(self.model).__module__.rsplit(".", 1)[-1]
        for name in _NOT_CARRIED:
            if getattr(features, name, None) is not None:
                raise ImagesRefused(
                    f"{model}: smgpy's MLX engine does not support this model's image features ({name})"
                )
        positions = getattr(features, "position_ids", None)
        if self.mrope or positions is None:
            return
        got = np.asarray(positions)
        if got.size % length or not (got.reshape(-1, length) == np.arange(length)).all():
            raise ImagesRefused(f"{model}: smgpy's MLX engine does not support this model's image positions")


def _parameters(module: Any) -> set[str]:
    """The parameter names of ``module.__call__``; none where they cannot be read."""
    try:
        return set(inspect.signature(module.__call__).parameters)
    except (TypeError, ValueError):
        return set()


def _image_token_id(config: Any) -> int | None:
    for name in ("image_token_id", "image_token_index"):
        v = getattr(config, name, None)
        if isinstance(v, int):
            return v
    return None


def load(model_path: str) -> tuple[VisionModel, Any, dict[str, Any]]:
    """``(model, mlx-lm tokenizer wrapper, config)`` for a vision-language model directory."""
    from smgpy.mlx import mlx_lm_api

    mlx_vlm = _import_mlx_vlm()
    with environment_kept():
        model, processor = mlx_vlm.load(model_path)
    config = json.loads((Path(model_path) / "config.json").read_text(encoding="utf-8"))
    tokenizer = mlx_lm_api.load_tokenizer(model_path, eos_token_ids=config.get("eos_token_id"))
    text_config = config.get("text_config")
    if isinstance(text_config, dict):  # context length and vocabulary live there for some models
        config = {**text_config, **config}
    return VisionModel(model, processor), tokenizer, config
