"""Tiny random-weight vision-language models from mlx-vlm's own model classes.

`build_qwen25_vl(out)` writes a Qwen2.5-VL directory that `mlx_vlm.load` and smgpy's MLX engine
read: the demo model's tokenizer (SmolLM2's) with Qwen's four vision special tokens added, a
chat template that renders each image part as Qwen's `<|vision_start|><|image_pad|><|vision_end|>`,
the real `Qwen2VLImageProcessor` config (pixel bounds kept small so the vision tower stays cheap),
and mlx-vlm's `Model` at hidden size 64, two layers, float32, M-RoPE sections as the real model's.

`build_gemma3(out)` writes a Gemma 3 directory: the demo tokenizer with Gemma's turn and image
tokens, a Gemma-style template whose image parts render as `<start_of_image>` (the processor
expands it into the image's soft tokens), the Gemma3 image processor at 56x56 pixels, and a SigLIP
tower (4x4 patches pooled to 4 image tokens) before a text model whose layer 0 has a 16-token
sliding window (RotatingKVCache) and layer 1 global attention.

`build_qwen3_vl(out)` writes a Qwen3-VL directory (deepstack features), and `build_gemma4(out, ...)` a
Gemma 4 one of either kind: per-layer inputs (E2B, E4B) or image tokens attending both ways (the
large models).
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path
from typing import Any

from tiny_models import DEEPSEEK_V3, TINY, demo_tokenizer_dir

VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")

QWEN_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }}"
    "{% elif p['type'] in ('image', 'image_url') %}<|vision_start|><|image_pad|><|vision_end|>{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def available() -> str | None:
    """Why the tiny VLMs cannot be built here, or None when they can."""
    try:
        import mlx_vlm  # noqa: F401
    except ImportError as e:
        return f"mlx-vlm is not installed ({e}); pip install 'smgpy[vision]'"
    return None


def _write_tokenizer(out: Path, special: tuple[str, ...], config: dict[str, str]) -> tuple[Any, dict[str, Any]]:
    """Write the demo tokenizer with the ``special`` tokens added to ``out``, its tokenizer_config.json
    updated with ``config`` (the chat template, named tokens); the tokenizer and that config."""
    from tokenizers import AddedToken, Tokenizer

    out.mkdir(parents=True, exist_ok=True)
    src = demo_tokenizer_dir()
    tok = Tokenizer.from_file(str(src / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    tok.save(str(out / "tokenizer.json"))
    tc = {**json.loads((src / "tokenizer_config.json").read_text()), **config}
    (out / "tokenizer_config.json").write_text(json.dumps(tc, indent=1))
    shutil.copy(src / "special_tokens_map.json", out / "special_tokens_map.json")
    return tok, tc


def _random_weights(family: str, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """The float32 weights of mlx-vlm's model ``family`` (a module of mlx_vlm.models) of config ``cfg``,
    randomly initialized after seeding with ``seed``, by parameter path."""
    import mlx.core as mx
    from mlx.utils import tree_flatten, tree_map

    classes = importlib.import_module(f"mlx_vlm.models.{family}")
    configs = importlib.import_module(f"mlx_vlm.models.{family}.config")
    mc = classes.ModelConfig.from_dict(dict(cfg))
    # Some families' from_dict builds the nested configs itself; others leave them as dicts.
    if isinstance(mc.vision_config, dict):
        mc.vision_config = configs.VisionConfig.from_dict(cfg["vision_config"])
    if isinstance(mc.text_config, dict):
        mc.text_config = configs.TextConfig.from_dict(mc.text_config)
    mx.random.seed(seed)
    model = classes.Model(mc)
    model.update(tree_map(lambda p: p.astype(mx.float32), model.parameters()))
    return dict(tree_flatten(model.parameters()))


# The tiny vision tower of the Qwen-VL models: 2 blocks of width 32, its output the language model's
# width (64), 2x2 patches merged into one token, two frames per temporal patch.
_QWEN_TOWER: dict[str, Any] = {
    "depth": 2,
    "hidden_size": 32,
    "intermediate_size": 64,
    "out_hidden_size": 64,
    "num_heads": 2,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "in_channels": 3,
}

# What the image processors' configs share: convert to RGB, resize, rescale to [0, 1], normalize.
_IMAGES: dict[str, Any] = {
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "do_convert_rgb": True,
    "rescale_factor": 1 / 255,
}

# CLIP's normalization (Qwen2.5-VL's, Pixtral's, GLM-4V's).
_CLIP_NORM: dict[str, Any] = {
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
}

# SigLIP's normalization (Gemma's, Qwen3-VL's, LFM2-VL's, SmolVLM's).
_HALF_NORM: dict[str, Any] = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}

# The Qwen-VL image processors' (and GLM-4V's): two frames per temporal patch, 2x2 patches merged
# into one token.
_QWEN_IMAGES: dict[str, Any] = {**_IMAGES, "temporal_patch_size": 2, "merge_size": 2}


def build_qwen25_vl(out: Path, seed: int = 0, family: str = "qwen2_5_vl") -> Path:
    """Qwen2.5-VL (see the module's doc); ``family="qwen2_vl"``: Qwen2-VL, whose vision tower has
    no window attention."""
    import mlx.core as mx

    tok, _ = _write_tokenizer(out, VISION_TOKENS, {"chat_template": QWEN_CHAT_TEMPLATE})
    base = tok.get_vocab_size() - len(VISION_TOKENS)
    ids = {t: tok.token_to_id(t) for t in VISION_TOKENS}
    tower = {**_QWEN_TOWER, "model_type": family, "patch_size": 14, "spatial_patch_size": 14}
    if family == "qwen2_5_vl":
        tower |= {"window_size": 56, "fullatt_block_indexes": [1]}
    else:  # Qwen2-VL's tower: its width as embed_dim, its MLP as a ratio, the merger's output as hidden_size
        tower |= {"embed_dim": 32, "hidden_size": 64, "mlp_ratio": 2}
    cfg = {
        "model_type": family,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6,
        "vocab_size": base + 8,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vision_config": tower,
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    processor = {
        **_QWEN_IMAGES,
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor" if family == "qwen2_5_vl" else "Qwen2VLProcessor",
        **_CLIP_NORM,
        "min_pixels": 3136,
        "max_pixels": 50176,
        "patch_size": 14,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(processor, indent=1))
    mx.save_safetensors(str(out / "model.safetensors"), _random_weights(family, cfg, seed), metadata={"format": "mlx"})
    return out


def build_qwen3_vl(out: Path, seed: int = 0, family: str = "qwen3_vl") -> Path:
    """Qwen3-VL: M-RoPE positions (interleaved sections) and "deepstack", features of the vision
    tower's inner layers added to the language model's first layers at the image tokens.

    ``family="qwen3_5"``: Qwen3.5, natively multimodal, its vision tower Qwen3-VL's without
    deepstack, its language model a hybrid of Gated DeltaNet layers (a recurrent state, no KV
    cache) and attention layers (here layer 0 and layer 1)."""
    import mlx.core as mx

    tok, _ = _write_tokenizer(out, VISION_TOKENS, {"chat_template": QWEN_CHAT_TEMPLATE})
    base = tok.get_vocab_size() - len(VISION_TOKENS)
    ids = {t: tok.token_to_id(t) for t in VISION_TOKENS}
    rope = {"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True}
    text = {
        **TINY,
        "model_type": f"{family}_text",
        "rms_norm_eps": 1e-6,
        "vocab_size": base + 8,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "rope_scaling": rope,
    }
    if family == "qwen3_5":
        text |= {
            "linear_num_value_heads": 4,
            "linear_num_key_heads": 2,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_conv_kernel_dim": 4,
            "full_attention_interval": 2,
            "rope_parameters": {**rope, "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
        }
    cfg = {
        "model_type": family,
        "text_config": text,
        "tie_word_embeddings": False,
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vision_config": {
            **_QWEN_TOWER,
            "model_type": family,
            "patch_size": 16,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0] if family == "qwen3_vl" else [],
        },
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    processor = {
        **_QWEN_IMAGES,
        "image_processor_type": "Qwen2VLImageProcessorFast",
        "processor_class": "Qwen3VLProcessor",
        **_HALF_NORM,
        "size": {"shortest_edge": 4096, "longest_edge": 65536},
        "patch_size": 16,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(processor, indent=1))
    mx.save_safetensors(str(out / "model.safetensors"), _random_weights(family, cfg, seed), metadata={"format": "mlx"})
    return out


BOI, EOI, IMAGE = "<start_of_image>", "<end_of_image>", "<image_soft_token>"
SOT, EOT = "<start_of_turn>", "<end_of_turn>"
GEMMA_TOKENS = (SOT, EOT, BOI, EOI, IMAGE)

IMAGE_SIZE = 56  # pixels; patch 14 -> 4x4 = 16 patches
PATCH_SIZE = 14
MM_TOKENS_PER_IMAGE = 4  # 2x2 after average pooling (must be a square dividing the patch grid)

GEMMA_CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
    "<start_of_turn>{{ role }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }}"
    "{% elif p['type'] in ('image', 'image_url') %}<start_of_image>{% endif %}"
    "{% endfor %}{% endif %}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def build_gemma3(out: Path, seed: int = 0) -> Path:
    import mlx.core as mx

    # Gemma3Processor reads tokenizer.boi_token / eoi_token / image_token / image_token_id; in
    # transformers 5 any top-level "<name>_token" key of tokenizer_config.json becomes such a named
    # special token (with a matching "<name>_token_id"), as in the real Gemma 3 tokenizer_config.
    named = {"boi_token": BOI, "eoi_token": EOI, "image_token": IMAGE}
    tok, tc = _write_tokenizer(out, GEMMA_TOKENS, {"chat_template": GEMMA_CHAT_TEMPLATE, **named})
    ids = {t: tok.token_to_id(t) for t in GEMMA_TOKENS}
    vocab = tok.get_vocab_size()  # 49152 + 5
    eos_id = tok.token_to_id(tc["eos_token"])

    text_config = {
        "model_type": "gemma3_text",
        **TINY,
        "query_pre_attn_scalar": 16,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab,
        "rope_global_base_freq": 1_000_000.0,
        "rope_local_base_freq": 10_000.0,
        "sliding_window": 16,
        # Layer i is global when i % pattern == pattern - 1: with 2 layers and pattern 2, layer 0
        # is sliding (RotatingKVCache) and layer 1 global (KVCache). The real pattern 6 would need
        # >= 6 layers (Gemma3Model indexes cache[pattern - 1]).
        "sliding_window_pattern": 2,
        "mm_tokens_per_image": MM_TOKENS_PER_IMAGE,
        "max_position_embeddings": 4096,
    }
    vision_config = {
        "model_type": "siglip_vision_model",
        "num_hidden_layers": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_attention_heads": 2,
        "patch_size": PATCH_SIZE,
        "image_size": IMAGE_SIZE,
        "num_channels": 3,
        "layer_norm_eps": 1e-6,
    }
    cfg = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        # Model.prepare_inputs_for_multimodal divides the image features by sqrt(hidden_size).
        "hidden_size": text_config["hidden_size"],
        "vocab_size": vocab,
        "pad_token_id": 0,
        "eos_token_id": [eos_id, ids[EOT]],
        "image_token_index": ids[IMAGE],
        "image_token_id": ids[IMAGE],
        "boi_token_index": ids[BOI],
        "eoi_token_index": ids[EOI],
        "mm_tokens_per_image": MM_TOKENS_PER_IMAGE,
        "tie_word_embeddings": False,
        "text_config": text_config,
        "vision_config": vision_config,
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    preprocessor = {
        **_IMAGES,
        "image_processor_type": "Gemma3ImageProcessor",
        "processor_class": "Gemma3Processor",
        "do_convert_rgb": None,
        "do_pan_and_scan": None,
        **_HALF_NORM,
        "resample": 2,
        "size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        "image_seq_length": MM_TOKENS_PER_IMAGE,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=1))
    # mlx-vlm's Gemma3Processor.from_pretrained takes image_seq_length only from here (default 256).
    processor = {"processor_class": "Gemma3Processor", "image_seq_length": MM_TOKENS_PER_IMAGE}
    (out / "processor_config.json").write_text(json.dumps(processor, indent=1))

    weights = _random_weights("gemma3", cfg, seed)
    # The projector's weight starts as all ones (every image token would get the same direction);
    # give it random values so the image content reaches the language model.
    key = "multi_modal_projector.mm_input_projection_weight"
    weights[key] = mx.random.normal(weights[key].shape, dtype=mx.float32) * 0.2
    _save_muted(out, weights, vocab)
    return out


def _write_model(
    out: Path,
    family: str,
    cfg: dict[str, Any],
    seed: int,
    *,
    preprocessor: dict[str, Any] | None = None,
    processor: dict[str, Any] | None = None,
    weights: dict[str, Any] | None = None,
) -> Path:
    """Write ``out``'s config.json, the processor's configs where given, and ``weights`` (default:
    random weights of mlx-vlm's ``family``) with the special tokens' output rows zeroed
    (:func:`_save_muted`)."""
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    for name, value in (("preprocessor_config.json", preprocessor), ("processor_config.json", processor)):
        if value is not None:
            (out / name).write_text(json.dumps(value, indent=1))
    _save_muted(out, _random_weights(family, cfg, seed) if weights is None else weights, cfg["vocab_size"])
    return out


def _save_muted(out: Path, weights: dict[str, Any], vocab: int) -> None:
    """Save ``weights`` to ``out``, the output rows of the tokenizer's special tokens zeroed first, so
    greedy decoding never picks an end-of-turn, end-of-sequence or image id."""
    import mlx.core as mx

    special = [
        int(t["id"]) for t in json.loads((out / "tokenizer.json").read_text())["added_tokens"] if t.get("special")
    ]
    keep = mx.ones((vocab, 1), dtype=mx.float32)
    keep[mx.array(special)] = 0.0
    weights["language_model.lm_head.weight"] = weights["language_model.lm_head.weight"] * keep
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})


G4_BOI, G4_EOI, G4_IMAGE = "<|image>", "<image|>", "<|image|>"
G4_SOT, G4_EOT = "<|turn>", "<turn|>"
G4_TOKENS = (G4_SOT, G4_EOT, G4_BOI, G4_EOI, G4_IMAGE, "<|audio|>", "<|video|>")

G4_CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
    "<|turn>{{ role }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }}"
    "{% elif p['type'] in ('image', 'image_url') %}<|image|>{% endif %}"
    "{% endfor %}{% endif %}<turn|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|turn>model\n{% endif %}"
)


def build_gemma4(out: Path, *, per_layer_inputs: bool, bidirectional: bool, seed: int = 0) -> Path:
    """A Gemma 4 directory. Its two kinds differ where an engine can go wrong: the small models
    (E2B, E4B) add a per-layer embedding of each token id to every layer's input, and the image
    tokens' one is the padding id's (``per_layer_inputs``); the large ones let the image tokens of
    one image attend to each other both ways (``bidirectional``: ``use_bidirectional_attention``
    "vision"). The processor expands the template's image token into a 3x3 grid of soft tokens
    (8-pixel patches, 2x2 pooling) between its begin and end tokens."""
    import mlx.core as mx

    named = {"boi_token": G4_BOI, "eoi_token": G4_EOI, "image_token": G4_IMAGE, "video_token": "<|video|>"}
    tok, tc = _write_tokenizer(out, G4_TOKENS, {"chat_template": G4_CHAT_TEMPLATE, **named})
    ids = {t: tok.token_to_id(t) for t in G4_TOKENS}
    vocab = tok.get_vocab_size()
    eos_id = tok.token_to_id(tc["eos_token"])
    text_config = {
        "model_type": "gemma4_text",
        **TINY,
        "global_head_dim": TINY["head_dim"],
        "vocab_size": vocab,
        "vocab_size_per_layer_input": vocab,
        "hidden_size_per_layer_input": 16 if per_layer_inputs else 0,
        "num_kv_shared_layers": 0,
        "sliding_window": 16,
        "layer_types": ["sliding_attention", "full_attention"],
        "use_double_wide_mlp": False,
        "use_bidirectional_attention": "vision" if bidirectional else None,
        "max_position_embeddings": 4096,
    }
    vision_config = {
        "model_type": "gemma4_vision",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "global_head_dim": 16,
        "patch_size": 8,
        "pooling_kernel_size": 2,
        "position_embedding_size": 64,
        "default_output_length": 9,
    }
    cfg = {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "hidden_size": text_config["hidden_size"],
        "vocab_size": vocab,
        "pad_token_id": 0,
        "eos_token_id": [eos_id, ids[G4_EOT]],
        "image_token_id": ids[G4_IMAGE],
        "audio_token_id": ids["<|audio|>"],
        "video_token_id": ids["<|video|>"],
        "boi_token_id": ids[G4_BOI],
        "eoi_token_id": ids[G4_EOI],
        "vision_soft_tokens_per_image": 9,
        "tie_word_embeddings": True,
        "text_config": text_config,
        "vision_config": vision_config,
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    # mlx-vlm's Gemma4Processor reads its image processor's settings from processor_config.json.
    processor = {
        "processor_class": "Gemma4Processor",
        "image_seq_length": 9,
        "image_processor": {
            "image_processor_type": "Gemma4ImageProcessor",
            "do_resize": True,
            "do_rescale": True,
            "do_normalize": False,
            "patch_size": 8,
            "max_soft_tokens": 9,
            "pooling_kernel_size": 2,
        },
    }
    (out / "processor_config.json").write_text(json.dumps(processor, indent=1))
    weights = _random_weights("gemma4", cfg, seed)
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    return out


MISTRAL_IMAGE_TOKENS = ("[INST]", "[/INST]", "[IMG]", "[IMG_BREAK]", "[IMG_END]")

MISTRAL_CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'user' %}[INST]"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }}"
    "{% elif p['type'] in ('image', 'image_url') %}[IMG]{% endif %}"
    "{% endfor %}{% endif %}[/INST]"
    "{% else %}"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }}{% endif %}{% endfor %}{% endif %}{{ eos_token }}"
    "{% endif %}{% endfor %}"
)


def build_mistral3(out: Path, seed: int = 0) -> Path:
    """Mistral 3 (Mistral Small 3.1): a Pixtral tower, and one image as rows of ``[IMG]`` tokens
    separated by ``[IMG_BREAK]`` and ended by ``[IMG_END]`` (mlx-vlm's processor expands the
    template's one ``[IMG]``). Pictures are scaled to a longest edge of 64 pixels, 8-pixel patches
    merged 2x2: a 96x96 picture is 4 rows of 4 tokens."""
    tok, tc = _write_tokenizer(out, MISTRAL_IMAGE_TOKENS, {"chat_template": MISTRAL_CHAT_TEMPLATE})
    vocab = tok.get_vocab_size()
    cfg = {
        "architectures": ["Mistral3ForConditionalGeneration"],
        "model_type": "mistral3",
        "image_token_index": tok.token_to_id("[IMG]"),
        "spatial_merge_size": 2,
        "vision_feature_layer": -1,
        "multimodal_projector_bias": False,
        "projector_hidden_act": "gelu",
        "vocab_size": vocab,
        "eos_token_id": [tok.token_to_id(tc["eos_token"])],
        "tie_word_embeddings": False,
        "text_config": {
            "model_type": "mistral",
            **TINY,
            "rms_norm_eps": 1e-5,
            "vocab_size": vocab,
            "rope_theta": 10000.0,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
        },
        "vision_config": {
            "model_type": "pixtral",
            "num_hidden_layers": 2,
            "hidden_size": 32,
            "head_dim": 16,
            "intermediate_size": 64,
            "num_attention_heads": 2,
            "image_size": 64,
            "patch_size": 8,
            "num_channels": 3,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
        },
    }
    preprocessor = {
        **_IMAGES,
        **_CLIP_NORM,
        "image_processor_type": "PixtralImageProcessor",
        "processor_class": "PixtralProcessor",
        "patch_size": {"height": 8, "width": 8},
        "resample": 3,
        "size": {"longest_edge": 64},
    }
    processor = {
        "processor_class": "PixtralProcessor",
        "image_token": "[IMG]",
        "image_break_token": "[IMG_BREAK]",
        "image_end_token": "[IMG_END]",
        "patch_size": 8,
        "spatial_merge_size": 2,
    }
    return _write_model(out, "mistral3", cfg, seed, preprocessor=preprocessor, processor=processor)


# LFM2-VL's image tokens; mlx-vlm applies the real tiling bounds (2 to 10 tiles a side) whatever the
# config says, so every row/column marker is in the vocabulary.
LFM2_VL_TOKENS = (
    "<image>",
    "<|image_start|>",
    "<|image_end|>",
    "<|img_thumbnail|>",
    *(f"<|img_row_{r}_col_{c}|>" for r in range(1, 11) for c in range(1, 11)),
)


def build_lfm2_vl(out: Path, seed: int = 0) -> Path:
    """LFM2-VL: a SigLIP2-style tower before an LFM2 language model whose layer 0 is a short
    convolution (a recurrent state) and layer 1 attention. 8-pixel patches unshuffled 2x2, at most
    16 image tokens: the test pictures (96 pixels and up) are too large, so the processor splits
    each into 32-pixel tiles of 4 tokens, each after its ``<|img_row_R_col_C|>`` marker, plus a
    thumbnail after ``<|img_thumbnail|>``: one image is many runs of image tokens."""
    tok, tc = _write_tokenizer(
        out,
        LFM2_VL_TOKENS,
        {"chat_template": QWEN_CHAT_TEMPLATE.replace("<|vision_start|><|image_pad|><|vision_end|>", "<image>")},
    )
    vocab = tok.get_vocab_size()
    eos_id = tok.token_to_id(tc["eos_token"])
    image_id = tok.token_to_id("<image>")
    text_config = {
        "model_type": "lfm2",
        **TINY,
        "num_heads": TINY["num_attention_heads"],
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "vocab_size": vocab,
        "eos_token_id": eos_id,
        "norm_eps": 1e-5,
        "block_dim": TINY["hidden_size"],
        "block_ff_dim": TINY["intermediate_size"],
        "block_auto_adjust_ff_dim": False,
        "block_multiple_of": 16,
        "conv_L_cache": 3,
        "conv_bias": False,
        "conv_dim": TINY["hidden_size"],
        "conv_dim_out": TINY["hidden_size"],
        "layer_types": ["conv", "full_attention"],
        "tie_word_embeddings": False,  # so that the random model's answers depend on their context
    }
    tiles = {
        "downsample_factor": 2,
        "encoder_patch_size": 8,
        "max_image_tokens": 16,
        "min_image_tokens": 4,
        "tile_size": 32,
    }
    cfg = {
        "architectures": ["Lfm2VlForConditionalGeneration"],
        "model_type": "lfm2_vl",
        **tiles,
        "do_image_splitting": True,
        "image_token_id": image_id,
        "image_token_index": image_id,
        "max_num_patches": 64,
        "use_thumbnail": True,
        "use_image_special_tokens": True,
        "vision_feature_layer": -1,
        "projector_bias": True,
        "projector_hidden_act": "gelu",
        "projector_hidden_size": 64,
        "projector_use_layernorm": True,
        "eos_token_id": eos_id,
        "vocab_size": vocab,
        "tie_word_embeddings": False,
        "text_config": text_config,
        "vision_config": {
            "model_type": "lfm2_vl",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_channels": 3,
            "image_size": 32,
            "patch_size": 8,
            "num_patches": 16,  # a 4x4 grid of position embeddings, resized to each image's patch grid
            "layer_norm_eps": 1e-6,
            "hidden_act": "gelu_pytorch_tanh",
            "vision_use_head": False,
        },
    }
    preprocessor = {
        **_IMAGES,
        **_HALF_NORM,
        **tiles,
        "image_processor_type": "Lfm2VlImageProcessorFast",
        "processor_class": "Lfm2VlProcessor",
        "do_resize": False,  # as LFM2-VL checkpoints ship it (mlx-vlm resizes regardless)
        "do_pad": True,
        "resample": 3,
        # A 96x96 picture is 2.25x the 16-token budget: tiled above a tolerance of 2.
        "max_pixels_tolerance": 2.0,
    }
    processor = {"processor_class": "Lfm2VlProcessor", "use_image_special_tokens": True}
    return _write_model(out, "lfm2_vl", cfg, seed, preprocessor=preprocessor, processor=processor)


SMOLVLM_TOKENS = (
    "<fake_token_around_image>",
    "<image>",
    "<end_of_utterance>",
    "<global-img>",
    *(f"<row_{r}_col_{c}>" for r in range(1, 4) for c in range(1, 4)),
)

# SmolVLM's template, shortened: "<|im_start|>User:<image>Describe this.<end_of_utterance>\nAssistant:".
SMOLVLM_CHAT_TEMPLATE = (
    "<|im_start|>{% for m in messages %}{{ m['role'] | capitalize }}:"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }}"
    "{% elif p['type'] in ('image', 'image_url') %}<image>{% endif %}"
    "{% endfor %}{% endif %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)


def build_smolvlm(out: Path, seed: int = 0) -> Path:
    """SmolVLM2: a SigLIP tower on 64-pixel images (8-pixel patches, pixel-shuffled 2x2 into 16
    tokens) and image splitting as the real models do it: a picture resized to at most 128 pixels
    becomes 64-pixel tiles, each after its ``<row_R_col_C>`` tag, rows ended by line breaks, and the
    whole picture after ``<global-img>``: one image is many runs of image tokens."""
    named = {
        "image_token": "<image>",
        "fake_image_token": "<fake_token_around_image>",
        "global_image_token": "<global-img>",
        "end_of_utterance_token": "<end_of_utterance>",
    }
    tok, tc = _write_tokenizer(out, SMOLVLM_TOKENS, {"chat_template": SMOLVLM_CHAT_TEMPLATE, **named})
    vocab = tok.get_vocab_size()
    cfg = {
        "architectures": ["SmolVLMForConditionalGeneration"],
        "model_type": "smolvlm",
        "vocab_size": vocab,
        "scale_factor": 2,
        "image_token_id": tok.token_to_id("<image>"),
        "eos_token_id": [tok.token_to_id(tc["eos_token"]), tok.token_to_id("<end_of_utterance>")],
        "tie_word_embeddings": False,
        "text_config": {
            **TINY,
            "model_type": "llama",
            "rms_norm_eps": 1e-5,
            "vocab_size": vocab,
            "rope_theta": 10000.0,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
        },
        "vision_config": {
            "model_type": "smolvlm_vision",
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "patch_size": 8,
            "image_size": 64,
            "num_channels": 3,
            "layer_norm_eps": 1e-6,
        },
    }
    preprocessor = {
        **_IMAGES,
        **_HALF_NORM,
        "image_processor_type": "SmolVLMImageProcessor",
        "processor_class": "SmolVLMProcessor",
        "size": {"longest_edge": 128},
        "resample": 1,
        "do_pad": True,
        "do_image_splitting": True,
        "max_image_size": {"longest_edge": 64},
    }
    processor = {"image_seq_len": 16}
    return _write_model(out, "smolvlm", cfg, seed, preprocessor=preprocessor, processor=processor)


GLM_TOKENS = ("<|begin_of_image|>", "<|end_of_image|>", "<|image|>", "<|video|>", "<|begin_of_box|>", "<|end_of_box|>")


def build_glm4v(out: Path, seed: int = 0) -> Path:
    """GLM-4.1V: M-RoPE (``get_rope_index`` finds each image by its begin token; partial rotary 0.5,
    sections [2, 1, 1]) and a head that its config does not say is untied. 14-pixel patches merged
    2x2 under a pixel budget: a 96x96 picture is 9 image tokens, a 136x96 one 6."""
    template = QWEN_CHAT_TEMPLATE.replace(
        "<|vision_start|><|image_pad|><|vision_end|>", "<|begin_of_image|><|image|><|end_of_image|>"
    )
    tok, tc = _write_tokenizer(
        out, GLM_TOKENS, {"chat_template": template, "image_token": "<|image|>", "video_token": "<|video|>"}
    )
    vocab = tok.get_vocab_size()
    ids = {t: tok.token_to_id(t) for t in GLM_TOKENS}
    eos = [tok.token_to_id(tc["eos_token"])]
    cfg = {
        "architectures": ["Glm4vForConditionalGeneration"],
        "model_type": "glm4v",
        "text_config": {
            **TINY,
            "model_type": "glm4v_text",
            "vocab_size": vocab,
            "eos_token_id": eos,
            "pad_token_id": 0,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "max_position_embeddings": 4096,
            "partial_rotary_factor": 0.5,  # 16-wide heads: 8 rotary dimensions, 4 frequencies
            "rope_scaling": {"rope_type": "default", "mrope_section": [2, 1, 1]},
            "attention_bias": True,
        },
        "vision_config": {
            **_QWEN_TOWER,
            "model_type": "glm4v",
            "patch_size": 14,
            "image_size": 56,  # a 4x4 grid of position embeddings, resampled to each image's grid
            "rms_norm_eps": 1e-5,
        },
        "vocab_size": vocab,
        "hidden_size": TINY["hidden_size"],
        "image_token_id": ids["<|image|>"],
        "image_token_index": ids["<|image|>"],
        "video_token_id": ids["<|video|>"],
        "video_token_index": ids["<|video|>"],
        "vision_start_token_id": ids["<|begin_of_image|>"],
        "vision_end_token_id": ids["<|end_of_image|>"],
        "eos_token_id": eos,
        "pad_token_id": 0,
        "tie_word_embeddings": False,
    }
    preprocessor = {
        **_QWEN_IMAGES,
        "image_processor_type": "Glm4vImageProcessor",
        "processor_class": "Glm4vProcessor",
        **_CLIP_NORM,
        "patch_size": 14,
        "resample": 3,
        # Budgets of 2 frames x height x width: at most 2 x 84 x 84 (9 image tokens).
        "size": {"shortest_edge": 2 * 28 * 28, "longest_edge": 2 * 84 * 84},
    }
    return _write_model(out, "glm4v", cfg, seed, preprocessor=preprocessor)


INTERNVL_TOKENS = ("<img>", "</img>", "<IMG_CONTEXT>")


def build_internvl(out: Path, seed: int = 0) -> Path:
    """InternVL 3: InternViT tiles of 28 pixels in 7-pixel patches, pixel-shuffled into 4 tokens a
    tile, up to 4 tiles and a thumbnail (each test picture is 5 tiles: 20 image tokens), before a
    Qwen2 language model. The template's ``<image>`` becomes ``<img>``, the tiles' tokens, ``</img>``."""
    template = QWEN_CHAT_TEMPLATE.replace("<|vision_start|><|image_pad|><|vision_end|>", "<image>\n")
    tok, tc = _write_tokenizer(out, INTERNVL_TOKENS, {"chat_template": template})
    vocab = tok.get_vocab_size()
    context = tok.token_to_id("<IMG_CONTEXT>")
    cfg = {
        "architectures": ["InternVLChatModel"],
        "model_type": "internvl_chat",
        "image_token_index": context,
        "video_token_index": context,
        "downsample_ratio": 0.5,
        "force_image_size": 28,
        "max_dynamic_patch": 4,
        "min_dynamic_patch": 1,
        "use_thumbnail": True,
        "select_layer": -1,
        "ps_version": "v2",
        "template": "internvl2_5",
        "vocab_size": vocab,
        "eos_token_id": [tok.token_to_id(tc["eos_token"])],
        "text_config": {
            **TINY,
            "model_type": "qwen2",
            "rms_norm_eps": 1e-6,
            "vocab_size": vocab,
            "rope_theta": 10000.0,
            "max_position_embeddings": 4096,
            "tie_word_embeddings": False,
            "attention_bias": True,
        },
        "vision_config": {
            "model_type": "intern_vit_6b",
            "hidden_size": 32,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "patch_size": 7,
            "image_size": 28,
            "num_channels": 3,
            "layer_norm_eps": 1e-6,
            "drop_path_rate": 0.0,
            "qkv_bias": True,
            "qk_normalization": False,
            "norm_type": "layer_norm",
        },
    }
    # mlx-vlm's InternVLChatProcessor reads the tiling from config.json and these from here.
    processor = {"processor_class": "InternVLChatProcessor", "image_size": 28, "patch_size": 7, "downsample_ratio": 0.5}
    return _write_model(out, "internvl_chat", cfg, seed, processor=processor)


PHI_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")

# Phi-3.5-vision's template: image parts numbered across the conversation as <|image_N|>.
PHI_CHAT_TEMPLATE = (
    "{% set ns = namespace(n=0) %}{% for m in messages %}<|{{ m['role'] }}|>\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }}"
    "{% elif p['type'] in ('image', 'image_url') %}{% set ns.n = ns.n + 1 %}<|image_{{ ns.n }}|>\n{% endif %}"
    "{% endfor %}{% endif %}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def build_phi3_v(out: Path, seed: int = 0) -> Path:
    """Phi-3.5-vision: its processor writes image N's tokens as the id -N. HD crops of 336-pixel
    tiles, 144 tokens a tile: with one crop, a picture is a global view and a tile, 313 tokens.

    mlx-vlm fixes the vision tower as CLIP ViT-L/14-336 in a class attribute
    (``VisionModel.CLIP_VIT_LARGE_PATCH14_336_CONFIG``): the caller narrows it to 2 layers and an MLP
    width of 256 first (its width, 1024, and its token grid stay), for as long as the model is used."""
    import mlx.core as mx

    tok, tc = _write_tokenizer(out, PHI_TOKENS, {"chat_template": PHI_CHAT_TEMPLATE})
    vocab = tok.get_vocab_size()
    half = TINY["head_dim"] // 2
    cfg = {
        "architectures": ["Phi3VForCausalLM"],
        "model_type": "phi3_v",
        **TINY,
        "num_key_value_heads": TINY["num_attention_heads"],
        "vocab_size": vocab,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {
            "type": "su",
            "short_factor": [1.0 + 0.05 * i for i in range(half)],
            "long_factor": [1.0 + 0.5 * i for i in range(half)],
        },
        "eos_token_id": tok.token_to_id(tc["eos_token"]),
        "tie_word_embeddings": False,
        "embd_layer": {"embedding_cls": "image", "hd_transform_order": "sub_glb", "use_hd_transform": True},
        "img_processor": {
            "image_dim_out": 1024,
            "model_name": "openai/clip-vit-large-patch14-336",
            "num_img_tokens": 144,
        },
        "vision_config": {"model_type": "phi3_v", "num_img_tokens": 144},
    }
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    preprocessor = {
        **_CLIP_NORM,
        "image_processor_type": "Phi3VImageProcessor",
        "processor_class": "Phi3VProcessor",
        "num_crops": 1,
        "num_img_tokens": 144,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=1))
    weights = _random_weights("phi3_v", cfg, seed)
    for key in list(weights):
        if key.endswith(("glb_GN", "sub_GN", "class_embedding")):  # they start as zeros
            weights[key] = mx.random.normal(weights[key].shape, dtype=mx.float32) * 0.2
        if key.endswith("self_attn.qkv_proj.weight"):
            # Sharper attention (queries and keys x2): over 313 similar random image tokens, a
            # near-uniform one averages the picture away and two pictures answer alike.
            qk = 2 * TINY["num_attention_heads"] * TINY["head_dim"]
            weights[key] = mx.concatenate([weights[key][:qk] * 2.0, weights[key][qk:]])
    # The head is the model's own lm_head. mlx-vlm's config adds Phi's end ids (2, 32000, 32007) as
    # end-of-sequence ids: in the demo tokenizer they are words, muted with the special tokens.
    special = [
        int(t["id"]) for t in json.loads((out / "tokenizer.json").read_text())["added_tokens"] if t.get("special")
    ]
    keep = mx.ones((vocab, 1), dtype=mx.float32)
    keep[mx.array([*special, 2, 32000, 32007])] = 0.0
    weights["lm_head.weight"] = weights["lm_head.weight"] * keep
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    return out


KIMI_TOKENS = (
    "<|im_user|>",
    "<|im_assistant|>",
    "<|im_middle|>",
    "<|media_start|>",
    "<|media_content|>",
    "<|media_end|>",
    "<|media_pad|>",
)

# Kimi-VL's template, shortened: an image part is <|media_start|>image<|media_content|><|media_pad|><|media_end|>.
KIMI_CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'user' %}<|im_user|>user<|im_middle|>"
    "{% else %}<|im_assistant|>assistant<|im_middle|>{% endif %}"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }}"
    "{% elif p['type'] in ('image', 'image_url') %}"
    "<|media_start|>image<|media_content|><|media_pad|><|media_end|>{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>{% endfor %}"
    "{% if add_generation_prompt %}<|im_assistant|>assistant<|im_middle|>{% endif %}"
)


def build_kimi_vl(out: Path, seed: int = 0) -> Path:
    """Kimi-VL: a MoonViT tower (14-pixel patches merged 2x2; pictures center-cropped to multiples
    of 28 pixels: a 96x96 picture is 9 image tokens) before a DeepSeek-V3 language model (MLA
    attention, layer 0 dense, layer 1 routed experts)."""
    import mlx.core as mx

    tok, tc = _write_tokenizer(out, KIMI_TOKENS, {"chat_template": KIMI_CHAT_TEMPLATE})
    vocab = tok.get_vocab_size()
    pad = tok.token_to_id("<|media_pad|>")
    cfg = {
        "architectures": ["KimiVLForConditionalGeneration"],
        "model_type": "kimi_vl",
        "vocab_size": vocab,
        "media_placeholder_token_id": pad,
        "image_token_index": pad,
        "eos_token_id": [tok.token_to_id(tc["eos_token"])],
        "text_config": {
            **DEEPSEEK_V3,
            "model_type": "deepseek_v3",
            "vocab_size": vocab,
            "rope_theta": 10000.0,
            "topk_method": "noaux_tc",
            "scoring_func": "sigmoid",
            "norm_topk_prob": True,
            "routed_scaling_factor": 1.0,
            "tie_word_embeddings": False,
        },
        "vision_config": {
            "model_type": "moonvit",
            "depth": 2,
            "embed_dim": 32,
            "hidden_size": 32,
            "num_heads": 2,
            "intermediate_size": 64,
            "patch_size": 14,
            "num_channels": 3,
            "init_pos_emb_height": 8,
            "init_pos_emb_width": 8,
            "merge_kernel_size": [2, 2],
        },
    }
    weights = _random_weights("kimi_vl", cfg, seed)
    for key in list(weights):  # the position embeddings start as ones, the router as zeros
        if key.endswith(("pos_emb.weight", "mlp.gate.weight", "e_score_correction_bias")):
            weights[key] = mx.random.normal(weights[key].shape, dtype=mx.float32) * 0.2
    # KimiVLProcessor reads only a chat template from here (the image settings come from config.json).
    processor = {"processor_class": "KimiVLProcessor"}
    return _write_model(out, "kimi_vl", cfg, seed, processor=processor, weights=weights)


def build_mllama(out: Path, seed: int = 0) -> Path:
    """Llama 3.2 Vision: the image reaches the language model only through cross-attention layers
    (here layer 1 of 3), as ``cross_attention_states``; the prompt holds one ``<|image|>`` token."""
    template = QWEN_CHAT_TEMPLATE.replace("<|vision_start|><|image_pad|><|vision_end|>", "<|image|>")
    tok, tc = _write_tokenizer(out, ("<|image|>", "<|python_tag|>"), {"chat_template": template})
    vocab = tok.get_vocab_size()
    image = tok.token_to_id("<|image|>")
    eos = [tok.token_to_id(tc["eos_token"])]
    cfg = {
        "architectures": ["MllamaForConditionalGeneration"],
        "model_type": "mllama",
        "image_token_index": image,
        "image_token_id": image,
        "vocab_size": vocab,
        "eos_token_id": eos,
        "tie_word_embeddings": False,
        "text_config": {
            **TINY,
            "model_type": "mllama_text_model",
            "vocab_size": vocab,
            "num_hidden_layers": 3,
            "max_position_embeddings": 4096,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "tie_word_embeddings": False,
            "cross_attention_layers": [1],
            "eos_token_id": eos,
        },
        "vision_config": {
            "model_type": "mllama_vision_model",
            "image_size": 56,
            "patch_size": 14,
            "num_channels": 3,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_global_layers": 1,
            "num_attention_heads": 2,
            "max_num_tiles": 4,
            "norm_eps": 1e-5,
            "vision_output_dim": 96,  # 32 x (the final and 2 intermediate layers)
            "intermediate_layers_indices": [0, 1],
            "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1], [2, 2]],
        },
    }
    preprocessor = {
        **_IMAGES,
        **_CLIP_NORM,
        "image_processor_type": "MllamaImageProcessor",
        "processor_class": "MllamaProcessor",
        "do_pad": True,
        "max_image_tiles": 4,
        "resample": 2,
        "size": {"height": 56, "width": 56},
    }
    return _write_model(
        out, "mllama", cfg, seed, preprocessor=preprocessor, processor={"processor_class": "MllamaProcessor"}
    )


LLAMA4_TOKENS = (
    "<|image_start|>",
    "<|image_end|>",
    "<|image|>",
    "<|patch|>",
    "<|tile_x_separator|>",
    "<|tile_y_separator|>",
)


def build_llama4(out: Path, seed: int = 0) -> Path:
    """Llama 4: layers 0-2 chunked attention (``ChunkedKVCache``, 16-token chunks, so prompts cross
    chunks and the cache drops its front), layer 3 global without RoPE; layers 1 and 3 routed
    experts. A picture is one 56-pixel tile, pixel-shuffled into 4 ``<|patch|>`` tokens."""
    template = QWEN_CHAT_TEMPLATE.replace("<|vision_start|><|image_pad|><|vision_end|>", "<|image|>")
    tok, tc = _write_tokenizer(out, LLAMA4_TOKENS, {"chat_template": template})
    vocab = tok.get_vocab_size()
    patch = tok.token_to_id("<|patch|>")
    eos = [tok.token_to_id(tc["eos_token"])]
    cfg = {
        "architectures": ["Llama4ForConditionalGeneration"],
        "model_type": "llama4",
        "image_token_id": patch,
        "image_token_index": patch,
        "vocab_size": vocab,
        "eos_token_id": eos,
        "tie_word_embeddings": False,
        "text_config": {
            **TINY,
            "model_type": "llama4_text",
            "intermediate_size_mlp": 128,
            "num_hidden_layers": 4,
            "rms_norm_eps": 1e-5,
            "vocab_size": vocab,
            "rope_theta": 10000.0,
            "max_position_embeddings": 4096,
            "attention_chunk_size": 16,
            "interleave_moe_layer_step": 2,
            "num_local_experts": 4,
            "num_experts_per_tok": 1,
            "use_qk_norm": True,
            "attn_temperature_tuning": True,
            "floor_scale": 8192,
            "attn_scale": 0.1,
            "tie_word_embeddings": False,
            "eos_token_id": eos,
        },
        "vision_config": {
            "model_type": "llama4_vision_model",
            "hidden_size": 32,
            "image_size": 56,
            "initializer_range": 0.02,
            "projector_dropout": 0.0,
            "intermediate_size": 128,  # 4x the width: what the projector takes after the pixel shuffle
            "norm_eps": 1e-5,
            "num_attention_heads": 2,
            "num_channels": 3,
            "num_hidden_layers": 2,
            "patch_size": 14,
            "pixel_shuffle_ratio": 0.5,
            "projector_input_dim": 64,
            "projector_output_dim": 64,
            "rope_theta": 10000.0,
            "vision_feature_layer": -1,
            "vision_feature_select_strategy": "default",
            "vision_output_dim": 64,
        },
    }
    preprocessor = {
        **_HALF_NORM,
        "image_processor_type": "Llama4ImageProcessor",
        "processor_class": "Llama4Processor",
        "size": {"height": 56, "width": 56},
        "max_patches": 4,
    }
    processor = {"processor_class": "Llama4Processor", "patch_size": 14, "pixel_shuffle_ratio": 0.5}
    return _write_model(out, "llama4", cfg, seed, preprocessor=preprocessor, processor=processor)
