"""Every model type of the installed mlx-lm, tiny and random, batched by MLXEngine against mlx-lm alone.

`tests/test_mlx_arch_matrix.py` keeps one model of each family, with configurations written by hand.
This sweep goes wider, for an mlx-lm upgrade: for each module of `mlx_lm.models` it fills the
fields of its `ModelArgs` from one tiny configuration (hidden size 64, 4 layers, 4 experts, a
16-token sliding window, ...), builds the model with `tests/tiny_models.py`, and compares the
engine's greedy tokens for four prompts submitted together with mlx-lm's `generate_step` for each
alone, as the matrix test does. Each model runs in its own process (a crash or a hang is one row).

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
    "layer_norm_epsilon": 1e-5, "norm_epsilon": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 2048,
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


def config(name: str) -> dict[str, Any]:
    """The tiny configuration of model type ``name``: the matrix test's where it has one."""
    sys.path.insert(0, str(TESTS))
    import tiny_models

    if name in tiny_models.CONFIGS:
        return tiny_models.config_for(name)
    args = importlib.import_module(f"mlx_lm.models.{name}").ModelArgs
    cfg: dict[str, Any] = {"model_type": name, "vocab_size": tiny_models.VOCAB}
    missing = []
    for f in dataclasses.fields(args):
        if f.name in cfg:
            continue
        if f.name in TINY:
            cfg[f.name] = TINY[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            missing.append(f.name)
    if missing:
        raise LookupError(f"MISSING {missing}")
    return cfg


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
