"""Tiny random-weight models of each family mlx-lm ships, written so `mlx_lm.load` reads them back.

`build(name, out)` makes a model with mlx-lm's own `Model`/`ModelArgs` classes (2-4 layers, hidden
size 64, float32), writes its weights with `mx.save_safetensors` and its config.json, and copies
the demo model's tokenizer files (SmolLM2's, 49,152 ids) beside them, so the directory loads in both
`mlx_lm.load` and `smgpy.mlx.MLXEngine`. `"llama_4bit"` is the llama model quantized with mlx's
`quantize` (4 bits, group size 32), its config carrying mlx-lm's `quantization` entry.

So that a wrong cache or state shows in the greedy tokens, the random models are made to depend on
their context: output heads are untied where the class allows it (with a tied head, a random model
mostly repeats its last input token), and parameters a class initializes to all zeros (RWKV-7's
token-shift mixes and group-norm weight, biases) get random values. The embedding and output rows
of the tokenizer's special tokens are zero, so greedy decoding does not pick an end-of-sequence id.
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
VOCAB = 49152

# The tiny transformer several configs share: 2 layers of hidden size 64 in 4 attention heads of 16
# (2 of them for keys and values), MLP size 128.
TINY: dict[str, Any] = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}

QWEN3: dict[str, Any] = {
    **TINY,
    "rms_norm_eps": 1e-6,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
    "rope_theta": 10000.0,
}

# DeepSeek-V3's multi-head latent attention and routed experts, tiny.
DEEPSEEK_V3: dict[str, Any] = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "moe_intermediate_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "n_group": 2,
    "topk_group": 1,
    "num_experts_per_tok": 2,
    "first_k_dense_replace": 1,
    "kv_lora_rank": 16,
    "q_lora_rank": 32,
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
}

# The config of each model type: what its ModelArgs requires, at a tiny size. Prompts in the matrix
# test are 5-47 tokens long, so the windows and chunks below (16, 8) are crossed by the longer ones.
CONFIGS: dict[str, dict[str, Any]] = {
    "llama": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    },
    "qwen3": QWEN3,
    # Grouped-query scores of five axes (kv heads, repeats): the batch's mask takes a group axis.
    "gemma2": {**TINY, "head_dim": 32, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "query_pre_attn_scalar": 32},
    # Learned absolute positions read from the cache's offset as one number: one sequence at a time.
    "gpt_bigcode": {
        "n_embd": 64,
        "n_layer": 2,
        "n_inner": 128,
        "n_head": 4,
        "num_key_value_heads": 1,
        "n_positions": 2048,
        "layer_norm_epsilon": 1e-5,
        "tie_word_embeddings": False,
    },
    # Qwen3's attention with a mixture of experts in every layer.
    "qwen3_moe": {
        **QWEN3,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "moe_intermediate_size": 64,
        "norm_topk_prob": True,
    },
    "mixtral": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 2048,
    },
    "deepseek_v3": DEEPSEEK_V3,
    # Nemotron's NAS blocks: an attention block left out, one replaced by a linear map (its cache
    # stays empty), FFNs of their own widths.
    "nemotron-nas": {
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 2048,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "block_configs": [
            {"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 1.0}},
            {"attention": {"no_op": True}, "ffn": {"ffn_mult": 1.0}},
            {"attention": {"replace_with_linear": True}, "ffn": {"no_op": True}},
            {"attention": {"n_heads_in_group": 4}, "ffn": {"replace_with_linear": True}},
        ],
    },
    # DeepSeek's sparse attention: an indexer picks the 8 columns each query attends to.
    "deepseek_v32": {**DEEPSEEK_V3, "index_head_dim": 16, "index_n_heads": 2, "index_topk": 8},
    # Gemma 4: sliding and global layers of different head sizes, the last layers reusing earlier
    # layers' keys and values, and a per-layer input embedding.
    "gemma4_text": {
        "hidden_size": 64,
        "num_hidden_layers": 6,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "head_dim": 16,
        "global_head_dim": 32,
        "num_key_value_heads": 1,
        "num_kv_shared_layers": 2,
        "hidden_size_per_layer_input": 16,
        "vocab_size_per_layer_input": VOCAB,
        "sliding_window": 16,
        "sliding_window_pattern": 3,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    },
    "gemma3_text": {
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "intermediate_size": 128,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 32,
        "query_pre_attn_scalar": 32,
        "rms_norm_eps": 1e-6,
        "sliding_window": 16,
        "sliding_window_pattern": 2,
        "max_position_embeddings": 2048,
    },
    "mamba": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "state_size": 16,
        "conv_kernel": 4,
        "use_bias": False,
        "use_conv_bias": True,
        "time_step_rank": 4,
        "tie_word_embeddings": False,
    },
    "mamba2": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_heads": 8,
        "head_dim": 16,
        "intermediate_size": 128,
        "state_size": 16,
        "n_groups": 2,
        "conv_kernel": 4,
        "layer_norm_epsilon": 1e-5,
        "use_bias": False,
        "use_conv_bias": True,
        "tie_word_embeddings": False,
        "time_step_limit": [0.0, 1e9],
        "time_step_rank": "auto",
    },
    "qwen3_next": {
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "linear_num_value_heads": 4,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 1,
        "shared_expert_intermediate_size": 64,
        "mlp_only_layers": [],
        "moe_intermediate_size": 64,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "max_position_embeddings": 2048,
        "full_attention_interval": 2,
        "tie_word_embeddings": False,
    },
    "jamba": {
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "attn_layer_offset": 1,
        "attn_layer_period": 2,
        "expert_layer_offset": 1,
        "expert_layer_period": 2,
        "mamba_d_conv": 4,
        "mamba_d_state": 16,
        "mamba_expand": 2,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    },
    "rwkv7": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "head_dim": 32,
        "norm_eps": 1e-5,
        "a_low_rank_dim": 16,
        "v_low_rank_dim": 16,
        "gate_low_rank_dim": 16,
        "decay_low_rank_dim": 16,
        "tie_word_embeddings": False,
    },
    "recurrent_gemma": {
        "hidden_size": 64,
        "num_hidden_layers": 3,
        "intermediate_size": 128,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "attention_bias": False,
        "conv1d_width": 4,
        "logits_soft_cap": 30.0,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "attention_window_size": 16,
        "block_types": ["recurrent", "recurrent", "attention"],
    },
    "nemotron_h": {
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "intermediate_size": 128,
        "max_position_embeddings": 2048,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "attention_bias": False,
        "mamba_num_heads": 4,
        "mamba_head_dim": 16,
        "mamba_proj_bias": False,
        "ssm_state_size": 16,
        "conv_kernel": 4,
        "n_groups": 2,
        "mlp_bias": False,
        "layer_norm_epsilon": 1e-5,
        "use_bias": False,
        "use_conv_bias": True,
        "hybrid_override_pattern": ["M", "*", "M", "-"],
        "tie_word_embeddings": False,
    },
    "llama4": {
        "text_config": {
            "model_type": "llama4",
            "hidden_size": 64,
            "num_hidden_layers": 4,
            "intermediate_size": 64,
            "intermediate_size_mlp": 128,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "num_local_experts": 2,
            "num_experts_per_tok": 1,
            "interleave_moe_layer_step": 2,
            "attention_chunk_size": 8,
            "attention_bias": False,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "rope_scaling": None,
            "use_qk_norm": True,
            "max_position_embeddings": 2048,
            "vocab_size": VOCAB,
        },
        "tie_word_embeddings": False,
    },
    # LongCat-Flash's n-gram embeddings: each token's embedding also reads the 3 ids before it,
    # kept in an array cache (fewer after a prompt shorter than that).
    "longcat_flash_ngram": {
        "hidden_size": 64,
        "ffn_hidden_size": 128,
        "moe_topk": 2,
        "expert_ffn_hidden_size": 64,
        "n_routed_experts": 4,
        "zero_expert_num": 2,
        "num_layers": 2,
        "max_position_embeddings": 2048,
        "num_attention_heads": 4,
        "kv_lora_rank": 16,
        "q_lora_rank": 32,
        "qk_rope_head_dim": 16,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "routed_scaling_factor": 1.0,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "mla_scale_q_lora": True,
        "mla_scale_kv_lora": True,
        "ngram_vocab_size_ratio": 2,
        "norm_topk_prob": True,
    },
    # MiniMax-M3: its indexer keeps 2 of the 4-column key blocks on its sparse layers (the ones
    # not "full_attention"), so the prompts of 13 tokens and more drop blocks.
    "minimax_m3_vl": {
        "text_config": {
            "vocab_size": VOCAB,
            "hidden_size": 64,
            "intermediate_size": 128,
            "dense_intermediate_size": 128,
            "shared_intermediate_size": 64,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "rotary_dim": 8,
            "num_hidden_layers": 4,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "max_position_embeddings": 2048,
            "rms_norm_eps": 1e-5,
            "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
            "routed_scaling_factor": 1.0,
            "tie_word_embeddings": False,
            "layer_types": ["sliding_attention", "full_attention"] * 2,
            "sparse_attention_config": {
                "sparse_num_index_heads": 2,
                "sparse_index_dim": 16,
                "sparse_block_size": 4,
                "sparse_topk_blocks": 2,
            },
        },
    },
    "lfm2": {
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "norm_eps": 1e-5,
        "full_attn_idxs": [1, 3],
        "rope_theta": 10000.0,
        "block_dim": 64,
        "block_ff_dim": 128,
        "block_multiple_of": 32,
        "block_ffn_dim_multiplier": 1.0,
        "block_auto_adjust_ff_dim": False,
        "max_position_embeddings": 2048,
        "conv_bias": False,
        "conv_L_cache": 3,
        "tie_word_embeddings": False,
    },
    "falcon_h1": {
        **TINY,
        "mamba_d_ssm": 64,
        "mamba_n_heads": 4,
        "mamba_d_head": 16,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        "mamba_n_groups": 1,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    },
}
# "llama_4bit": the llama config, 4-bit affine quantized (group size 32) after the random init.
QUANTIZED = {"llama_4bit": ("llama", {"group_size": 32, "bits": 4})}
MODEL_TYPES: tuple[str, ...] = (*CONFIGS, *QUANTIZED)


def config_for(name: str) -> dict[str, Any]:
    """The config.json content of model ``name`` (a key of CONFIGS or QUANTIZED)."""
    model_type, quant = QUANTIZED.get(name, (name, None))
    config: dict[str, Any] = {
        "model_type": model_type,
        "vocab_size": VOCAB,
        **json.loads(json.dumps(CONFIGS[model_type])),
    }
    if quant is not None:
        config["quantization"] = dict(quant)
        config["quantization_config"] = dict(quant)
    return config


def available(name: str) -> str | None:
    """None when the installed mlx-lm has model ``name``'s module, else why not."""
    model_type = QUANTIZED.get(name, (name, None))[0]
    try:
        importlib.import_module(f"mlx_lm.models.{model_type}")
    except ImportError as e:
        return f"mlx_lm.models.{model_type} is not in the installed mlx-lm ({e})"
    return None


class Built:
    """The tiny models of one test module, each built on first use: a module-scoped fixture holds
    one, and a test calls it with a model name. Skips the test where the installed mlx-lm lacks
    the model or the demo tokenizer is unavailable."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self._factory = factory
        self._dirs: dict[str, Path] = {}

    def __call__(self, name: str) -> Path:
        import pytest
        from conftest import demo_gguf

        why = available(name)
        if why is not None:
            pytest.skip(why)
        demo_gguf()  # skips (or fails under CI) when the demo tokenizer is unavailable
        if name not in self._dirs:
            self._dirs[name] = build(name, self._factory.mktemp(name))
        return self._dirs[name]


def demo_tokenizer_dir() -> Path:
    """The demo model's converted directory (its tokenizer files are what the tiny models use)."""
    from smgpy.mlx import demo_gguf_path, resolve_model

    return Path(resolve_model(str(demo_gguf_path()), dtype="float32")[0])


def _special_ids(tokenizer_json: Path) -> list[int]:
    added = json.loads(tokenizer_json.read_text()).get("added_tokens", [])
    return sorted(int(t["id"]) for t in added if t.get("special"))


def _zero_rows(weights: dict[str, Any], rows: list[int]) -> None:
    """Zero ``rows`` of every (vocab, hidden) float weight: the embedding and the output head."""
    import mlx.core as mx

    for key, w in weights.items():
        matrix = key.endswith(".weight") and w.ndim == 2 and w.shape[0] == VOCAB
        if not matrix or not mx.issubdtype(w.dtype, mx.floating):
            continue
        keep = mx.ones((VOCAB, 1), dtype=w.dtype)
        keep[mx.array(rows)] = 0.0
        weights[key] = w * keep


def _fill_zeros(weights: dict[str, Any]) -> None:
    """Give random values (uniform in [-0.5, 0.5)) to the parameters initialized to all zeros.

    Some classes start a path at zero (RWKV-7's token-shift mixes and its group norm's weight,
    biases), which would leave the recurrent state out of the output and the comparison blind to it.
    """
    import mlx.core as mx

    for key, w in weights.items():
        if mx.issubdtype(w.dtype, mx.floating) and not mx.any(w).item():
            weights[key] = mx.random.uniform(-0.5, 0.5, w.shape, dtype=w.dtype)


def build(model_type: str, out: Path, seed: int = 0) -> Path:
    """Write tiny model ``model_type`` (config.json, model.safetensors, tokenizer files) to ``out``."""
    import mlx.core as mx
    from mlx.nn.layers.quantized import quantize
    from mlx.utils import tree_flatten, tree_map, tree_unflatten

    config = config_for(model_type)
    module = importlib.import_module(f"mlx_lm.models.{config['model_type']}")
    src = demo_tokenizer_dir()
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        if (src / name).exists():
            shutil.copy(src / name, out / name)

    mx.random.seed(seed)
    model = module.Model(module.ModelArgs.from_dict(config))
    model.update(tree_map(lambda p: p.astype(mx.float32), model.parameters()))
    weights = dict(tree_flatten(model.parameters()))
    _fill_zeros(weights)
    _zero_rows(weights, _special_ids(src / "tokenizer.json"))
    quant = config.get("quantization")
    if quant is not None:
        model.update(tree_unflatten(list(weights.items())))
        quantize(model, group_size=quant["group_size"], bits=quant["bits"])
        weights = dict(tree_flatten(model.parameters()))
    mx.eval(weights)
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out
