"""Every model type of the installed mlx-lm, tiny and random, batched by MLXEngine against mlx-lm alone.

`tests/test_mlx_arch_matrix.py` keeps one model of each family, with configurations written by hand.
This sweep goes wider, for an mlx-lm upgrade: for each module of `mlx_lm.models` it fills the
fields of its `ModelArgs` from one tiny configuration (hidden size 64, 4 layers, 4 experts, a
16-token sliding window, ...; `OVERRIDES` and `WHOLE` below hold what a model type needs besides;
a multimodal wrapper gets the tiny configuration as its `text_config`), builds the model with
`tests/tiny_models.py`, and compares the engine's greedy tokens for four prompts submitted
together with mlx-lm's `generate_step` for each alone, as the matrix test does. Each model runs in
its own process (a crash or a hang is one row).

    python scripts/arch_sweep.py [--only gemma2 gpt_bigcode] [--timeout 240]

A row says OK (and how many sequences the engine runs at once), DIFF (where each prompt's tokens
first differ), or why the model was not compared: MISSING fields the tiny configuration does not
guess, a BUILD or MLXLM failure (mlx-lm's own code), TOOBIG (the class's defaults are not tiny).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent.parent / "tests"
NOT_MODELS = {
    "__init__", "activations", "base", "bitlinear_layers", "cache", "gated_delta", "mla", "pipeline",
    "rope_utils", "switch_layers", "ssm",
}  # fmt: skip
LAYERS = 4
TINY: dict[str, Any] = {
    "hidden_size": 64, "num_hidden_layers": LAYERS, "intermediate_size": 128, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-5, "layer_norm_eps": 1e-5, "norm_eps": 1e-5,
    "layer_norm_epsilon": 1e-5, "layernorm_epsilon": 1e-5, "norm_epsilon": 1e-5, "rope_theta": 10000.0,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False, "moe_intermediate_size": 64, "num_experts": 4, "num_local_experts": 4,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1, "shared_expert_intermediate_size": 64,
    "sliding_window": 16, "n_group": 2, "topk_group": 1, "kv_lora_rank": 16, "q_lora_rank": 32,
    "qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "v_head_dim": 16, "first_k_dense_replace": 1, "d_model": 64,
    "n_layers": LAYERS, "n_heads": 4, "n_kv_heads": 2, "num_layers": LAYERS, "ffn_hidden_size": 128,
    "hidden_dim": 128, "dim": 64, "n_embd": 64, "n_head": 4, "n_layer": LAYERS, "n_inner": 128,
    "n_positions": 2048, "expert_intermediate_size": 64, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "full_attention_interval": 2,
    "partial_rotary_factor": 0.5, "sliding_window_pattern": 2, "query_pre_attn_scalar": 16,
    "attention_window_size": 16, "num_shared_experts": 1, "moe_topk": 2, "moe_num_experts": 4,
    "num_dense_layers": 1, "attention_bias": False, "mlp_bias": False, "norm_topk_prob": True,
    "routed_scaling_factor": 1.0, "use_qk_norm": True, "qk_norm": True, "post_norm": False, "use_bias": False,
    "hidden_act": "silu", "n_ctx": 2048, "rotary_emb_base": 10000.0, "rotary_pct": 0.5, "logits_scaling": 1.0,
    "attention_multiplier": 0.25, "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "dim_model_base": 64,
    "scale_depth": 1.0, "scale_emb": 1.0, "shared_intermediate_size": 64, "rotary_dim": 8,
    "use_expert_bias": False, "conv_bias": False, "conv_L_cache": 3, "num_shared_expert": 1,
    "use_mixed_mlp_moe": False, "use_cla": False, "cla_share_factor": 1, "intermediate_size_mlp": 128,
    "no_rope_layers": [1] * (LAYERS - 1) + [0], "use_qkv_bias": False, "num_attention_groups": 2,
    "block_size": 2048, "layer_types": ["sliding_attention", "full_attention"] * (LAYERS // 2),
    "linear_allow_neg_eigval": False, "dense_attention_every_n_layers": 2, "ff_intermediate_size": 128,
    "gegelu_limit": 20.0, "layer_group_size": 2, "group_norm_size": 1, "sliding_window_layers": [0, 2],
    "conv_window": 2, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "is_moe_layer": [False, True] * (LAYERS // 2), "moe_layer_freq": 1,
}  # fmt: skip
MAX_PARAMETERS = 30_000_000
ROPE = {"rope_theta": 10000.0, "rope_type": "default"}
LLAMA4_ROPE = {**ROPE, "llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 16}
SLIDING = ["sliding_attention", "full_attention"] * (LAYERS // 2)
# What the tiny configuration above leaves wrong for a model type (None: the class's default).
OVERRIDES: dict[str, dict[str, Any]] = {
    "deepseek_v2": {"rope_scaling": {"factor": 1.0, "mscale_all_dim": 0, "type": "yarn", "mscale": 1}},
    "deepseek_v32": {"index_head_dim": 16, "index_n_heads": 2, "index_topk": 8},
    "exaone4": {
        "rope_scaling": None, "sliding_window_pattern": "LLLG",
        "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
    },
    "gemma4_text": {
        "num_hidden_layers": 6, "layer_types": None, "num_kv_shared_layers": 2, "hidden_size_per_layer_input": 16,
        "vocab_size_per_layer_input": 49152, "global_head_dim": 32, "sliding_window_pattern": 3,
        "num_key_value_heads": 1, "rope_parameters": None,
    },
    "glm4_moe": {"rope_scaling": None},
    "glm_moe_dsa": {
        "index_head_dim": 16, "index_n_heads": 2, "index_topk": 8, "topk_method": "noaux_tc",
        "scoring_func": "sigmoid", "rope_parameters": ROPE, "n_group": 1,
    },
    "granitemoehybrid": {
        "layer_types": ["mamba", "attention"] * (LAYERS // 2), "shared_intermediate_size": 64, "mamba_n_heads": 8,
        "mamba_d_head": 16, "mamba_proj_bias": False, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_n_groups": 1,
        "mamba_conv_bias": True,
    },
    "hunyuan": {"rope_scaling": {"alpha": 1.0, "factor": 1.0, "type": "dynamic"}},
    "kimi_linear": {
        "linear_attn_config": {"kda_layers": [1, 3], "num_heads": 4, "head_dim": 16, "short_conv_kernel_size": 4},
        "model_max_length": 2048, "num_experts_per_token": 2, "rope_scaling": None,
    },
    "minicpm3": {"rope_scaling": {"original_max_position_embeddings": 2048, "short_factor": 1.0, "long_factor": 1.0}},
    "mimo_v2_flash": {
        "hybrid_layer_pattern": [1, 0] * (LAYERS // 2), "moe_layer_freq": [0, 1] * (LAYERS // 2),
        "add_swa_attention_sink_bias": True, "add_full_attention_sink_bias": False, "sliding_window_size": 16,
        "topk_method": "noaux_tc", "scoring_func": "sigmoid", "swa_rope_theta": 10000.0,
        "swa_num_attention_heads": 4, "swa_num_key_value_heads": 2, "swa_head_dim": 16, "swa_v_head_dim": 16,
        "partial_rotary_factor": 1, "n_group": 1,
    },
    "ministral3": {"rope_parameters": LLAMA4_ROPE},
    "mistral4": {"rope_parameters": LLAMA4_ROPE, "n_group": 1},
    "nemotron-nas": {
        "block_configs": [
            {"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 1.0}},
            {"attention": {"no_op": True}, "ffn": {"ffn_mult": 1.0}},
            {"attention": {"replace_with_linear": True}, "ffn": {"no_op": True}},
            {"attention": {"n_heads_in_group": 4}, "ffn": {"replace_with_linear": True}},
        ],
    },
    "afm7": {"num_kv_reuse_layers": 2, "num_heads": 4, "num_kv_heads": 2},
    "olmo_hybrid": {"layer_types": ["linear_attention", "full_attention"] * (LAYERS // 2), "rope_parameters": None},
    "spark2_5": {"hidden_act": "gelu", "layer_types": SLIDING, "rope_parameters": dict.fromkeys(set(SLIDING), ROPE)},
    "step3p5": {"moe_top_k": 2, "share_expert_dim": 64, "moe_intermediate_size": 32, "layer_types": SLIDING},
    "dbrx": {
        "ffn_config": {"ffn_hidden_size": 64, "moe_num_experts": 4, "moe_top_k": 2},
        "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 10000.0},
    },
    "openelm": {
        "num_transformer_layers": LAYERS, "model_dim": 64, "ffn_dim_divisor": 8, "num_query_heads": [4] * LAYERS,
        "num_kv_heads": [2] * LAYERS, "ffn_multipliers": [2.0] * LAYERS,
    },
    "longcat_flash": {
        "attention_method": "MLA", "zero_expert_type": "identity", "expert_ffn_hidden_size": 64,
        "zero_expert_num": 2, "mla_scale_q_lora": True, "mla_scale_kv_lora": True,
    },
    "longcat_flash_ngram": {
        "ngram_vocab_size_ratio": 2, "expert_ffn_hidden_size": 64, "zero_expert_num": 2, "mla_scale_q_lora": True,
        "mla_scale_kv_lora": True,
    },
    "mellum": {"rope_parameters": dict.fromkeys(set(SLIDING), ROPE)},
    "plamo": {"n_shared_head": 2},
    "kimi_k3": {
        "hidden_act": "situ", "num_experts": 4, "num_experts_per_token": 2, "moe_intermediate_size": 32,
        "linear_attn_config": {"kda_layers": [1, 3], "num_heads": 4, "head_dim": 16, "short_conv_kernel_size": 4},
        "attn_res_block_size": 2,
    },
    "minimax_m3_vl": {
        "moe_layer_freq": None, "dense_intermediate_size": 128, "num_local_experts": 4,
        "sparse_attention_config": {
            "sparse_num_index_heads": 2, "sparse_index_dim": 16, "sparse_block_size": 4, "sparse_topk_blocks": 2,
        },
    },
    "muse_spark": {
        "post_norm_eps": 1e-5, "layer_rope_theta": [10000.0, 0.0] * (LAYERS // 2), "final_logit_softcapping": 30.0,
        "output_multiplier": 1.0, "moe_hidden_size": 32, "moe_intermediate_size": 32, "num_local_experts": 4,
        "rope_parameters": ROPE, "mlp_layer_types": ["sparse"] * LAYERS, "num_shared_experts": 0,
    },
    "qwen": {"kv_channels": 16},
    "phixtral": {"num_vocab": 49152, "model_dim": 64, "num_heads": 4, "num_layers": LAYERS, "rotary_dim": 8},
}  # fmt: skip
# What a wrapper's config.json holds beside its text configuration, for transformers' checks.
TOP: dict[str, dict[str, Any]] = {"muse_spark": {"audio_config": {"out_hidden_size": 64}}}
# Multimodal wrappers read by mlx-lm as language models: their text configuration is the tiny
# configuration of the model type named here (the wrapped language model's).
TEXT_OF = {
    "gemma3": "gemma3_text", "gemma4": "gemma4_text", "kimi_k25": "deepseek_v3", "kimi_vl": "deepseek_v3",
    "lfm2-vl": "lfm2", "mistral3": "ministral3", "pixtral": "llama", "qwen2_vl": "qwen2", "qwen3_vl": "qwen3",
    "qwen3_vl_moe": "qwen3_moe",
}  # fmt: skip
QWEN3_5 = {
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": LAYERS, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "linear_num_value_heads": 4, "linear_num_key_heads": 2,
    "linear_key_head_dim": 16, "linear_value_head_dim": 16, "full_attention_interval": 2,
    "rope_parameters": {
        "type": "default", "mrope_section": [2, 1, 1], "rope_theta": 10000, "partial_rotary_factor": 0.5,
    },
}  # fmt: skip
# Model types whose arguments are a nested text configuration (or read a flat one as such).
WHOLE: dict[str, dict[str, Any]] = {
    "qwen3_5": QWEN3_5,
    "qwen3_5_moe": {
        **QWEN3_5, "num_experts": 4, "num_experts_per_tok": 2, "shared_expert_intermediate_size": 64,
        "moe_intermediate_size": 32,
    },
    "gemma3n": {
        "text_config": {
            "model_type": "gemma3n_text", "hidden_size": 64, "num_hidden_layers": 6, "intermediate_size": 128,
            "num_attention_heads": 4, "head_dim": 16, "rms_norm_eps": 1e-6, "vocab_size": 49152,
            "num_key_value_heads": 2, "num_kv_shared_layers": 2, "vocab_size_per_layer_input": 49152,
            "sliding_window": 16, "max_position_embeddings": 2048, "rope_local_base_freq": 10000.0,
            "rope_theta": 100000.0, "final_logit_softcapping": 30.0,
            "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
            "activation_sparsity_pattern": [0.95, 0.95, 0.0, 0.0, 0.0, 0.0], "hidden_size_per_layer_input": 16,
            "altup_num_inputs": 4, "altup_coef_clip": 120.0, "altup_correct_scale": True, "altup_active_idx": 0,
            "laurel_rank": 8,
        },
    },
}  # fmt: skip


def config(name: str) -> dict[str, Any]:
    """The tiny configuration of model type ``name``: the matrix test's where it has one."""
    sys.path.insert(0, str(TESTS))
    import tiny_models

    if name in tiny_models.CONFIGS:
        return tiny_models.config_for(name)
    cfg: dict[str, Any] = {"model_type": name, "vocab_size": tiny_models.VOCAB}
    if name in WHOLE:
        return {**cfg, **WHOLE[name]}
    if name in TEXT_OF:
        return {**cfg, "text_config": config(TEXT_OF[name])}
    module = importlib.import_module(f"mlx_lm.models.{name}")
    text_args = getattr(module, "TextArgs", None)
    if text_args is not None and "text_config" in {f.name for f in dataclasses.fields(module.ModelArgs)}:
        # A wrapper with its own text class: the tiny configuration goes one level down.
        text = fill(text_args, {"vocab_size": tiny_models.VOCAB}, OVERRIDES.get(name, {}))
        return {**cfg, **TOP.get(name, {}), "text_config": text}
    return fill(module.ModelArgs, cfg, OVERRIDES.get(name, {}))


def fill(args: Any, cfg: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` with every field of dataclass ``args`` that the tiny configuration or ``extra`` sets."""
    cfg = dict(cfg)
    missing = []
    for f in dataclasses.fields(args):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.name in cfg:
            continue
        if f.name in extra and (extra[f.name] is not None or required):
            cfg[f.name] = extra[f.name]
        elif f.name in TINY and f.name not in extra:
            cfg[f.name] = TINY[f.name]
        elif required:
            missing.append(f.name)
    if missing:
        raise LookupError(f"MISSING {missing}")
    # What the class does not read but another reader of config.json does (transformers' own).
    names = {f.name for f in dataclasses.fields(args)}
    return {**cfg, **{k: v for k, v in extra.items() if k not in names and v is not None}}


def one(name: str) -> str:
    """Build and compare model type ``name`` (in this process); its result row."""
    sys.path.insert(0, str(TESTS))
    import test_mlx_arch_matrix as matrix
    import tiny_models
    from mlx.utils import tree_flatten

    try:
        cfg = config(name)
    except LookupError as e:
        return str(e)
    try:
        module = importlib.import_module(f"mlx_lm.models.{name}")
        size = sum(v.size for _, v in tree_flatten(module.Model(module.ModelArgs.from_dict(cfg)).parameters()))
        if size > MAX_PARAMETERS:
            return f"TOOBIG {size} parameters"
        tiny_models.CONFIGS[name] = cfg
        out = tiny_models.build(name, Path(tempfile.mkdtemp(prefix=f"tiny-{name}-")))
    except Exception as e:
        return f"BUILD {type(e).__name__}: {str(e)[:200]}"
    ids = matrix.prompts()
    try:
        want = matrix.mlx_lm_greedy(out, ids)
    except Exception as e:
        return f"MLXLM {type(e).__name__}: {str(e)[:200]}"
    got, running = matrix.engine_greedy(out, ids)
    wrong = [
        f"{len(p)} tokens at {matrix.first_difference(g, w)}"
        for p, (g, _), w in zip(ids, got, want, strict=True)
        if g != w
    ]
    vacuous = " (every prompt gives the same tokens)" if len({tuple(w) for w in want}) < 2 else ""
    return (f"DIFF {wrong}" if wrong else "OK") + f", {running} at once{vacuous}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="these model types (default: every one)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per model type")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child process's model type
    args = parser.parse_args()
    if args.one:
        print("RESULT " + json.dumps(one(args.one)))
        return
    import mlx_lm.models

    names = args.only or sorted(
        f[:-3]
        for f in os.listdir(Path(mlx_lm.models.__file__).parent)
        if f.endswith(".py") and f[:-3] not in NOT_MODELS
    )
    for name in names:
        try:
            run = subprocess.run(
                [sys.executable, __file__, "--one", name], capture_output=True, text=True, timeout=args.timeout
            )
            rows = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
            result = json.loads(rows[-1][7:]) if rows else f"CRASH (exit {run.returncode})"
        except subprocess.TimeoutExpired:
            result = f"TIMEOUT after {args.timeout:.0f} s"
        print(f"{name:24} {result}", flush=True)


if __name__ == "__main__":
    main()
