"""Convert a llama-architecture GGUF file into an mlx-lm model directory, once.

mlx can read GGUF tensors (``mx.load(path, return_metadata=True)``), but mlx-lm loads models
from a directory with ``config.json``, safetensors weights and a Hugging Face tokenizer. This
module builds that directory from the GGUF alone: tensor names are mapped to mlx-lm's llama
names, quantized triples keep their per-tensor bit width (or are dequantized, e.g. to
float32, which is faster on CPU), and the tokenizer (``tokenizer.json`` +
``tokenizer_config.json``) is rebuilt from the GGUF metadata.

The result is cached under ``$SMGPY_CACHE/gguf`` (default ``~/.cache/smgpy/gguf``), keyed by
the file's content fingerprint and the target dtype, and written atomically (temporary
directory, then rename), so a crash never leaves a half-written model behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["GGUFConversionError", "cache_root", "convert_gguf"]

# Bumped whenever the produced directory layout changes, so stale conversions are redone.
_FORMAT_VERSION = 1
_GROUP_SIZE = 32

_LAYER_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_DTYPES = ("float32", "float16", "bfloat16")


class GGUFConversionError(ValueError):
    """The GGUF file cannot be turned into an mlx-lm model (unsupported architecture or data)."""


def cache_root() -> Path:
    """Where converted models live: ``$SMGPY_CACHE/gguf`` or ``~/.cache/smgpy/gguf``."""
    base = os.environ.get("SMGPY_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "smgpy") / "gguf"


def _fingerprint(path: Path) -> str:
    """A cheap content key: size plus the hash of the first and last MiB.

    Hashing a multi-GB file on every start would cost seconds; the ends of a GGUF hold its
    header, metadata and last tensors, which differ between any two real models.
    """
    size = path.stat().st_size
    h = hashlib.sha256(f"{_FORMAT_VERSION}:{size}".encode())
    with path.open("rb") as f:
        h.update(f.read(1 << 20))
        f.seek(max(0, size - (1 << 20)))
        h.update(f.read(1 << 20))
    return h.hexdigest()[:16]


def _scalar(meta: dict[str, Any], key: str, default: Any = None) -> Any:
    value = meta.get(key, default)
    if hasattr(value, "item"):
        return value.item()
    return value


def _mlx_name(name: str) -> str:
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)\.(weight|scales|biases|bias)", name)
    if m:
        layer, part, kind = m.groups()
        if part not in _LAYER_NAMES:
            raise GGUFConversionError(f"unsupported GGUF tensor {name!r} (only llama-style blocks are supported)")
        return f"model.layers.{layer}.{_LAYER_NAMES[part]}.{kind}"
    m = re.fullmatch(r"(\w+)\.(weight|scales|biases|bias)", name)
    if m and m.group(1) in _TOP_NAMES:
        return f"{_TOP_NAMES[m.group(1)]}.{m.group(2)}"
    raise GGUFConversionError(f"unsupported GGUF tensor {name!r}")


def _progress(total: int, desc: str) -> Any:
    """A tqdm bar on stderr when tqdm is installed (it comes with huggingface_hub), else a no-op."""
    try:
        from tqdm import tqdm  # type: ignore[import-untyped,unused-ignore]

        return tqdm(total=total, desc=desc, unit="tensor", file=sys.stderr)
    except ImportError:  # pragma: no cover - tqdm ships with mlx-lm's dependencies

        class _Null:
            def update(self, n: int = 1) -> None:
                pass

            def close(self) -> None:
                pass

        return _Null()


def _config(meta: dict[str, Any], quantization: dict[str, Any] | None, tied: bool) -> dict[str, Any]:
    arch = _scalar(meta, "general.architecture")
    if arch != "llama":
        raise GGUFConversionError(f"GGUF architecture {arch!r} is not supported yet (only 'llama')")

    def g(key: str, default: Any = None) -> Any:
        return _scalar(meta, f"llama.{key}", default)

    heads = int(g("attention.head_count"))
    hidden = int(g("embedding_length"))
    config: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": int(g("block_count")),
        "intermediate_size": int(g("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(g("attention.head_count_kv", heads)),
        "head_dim": int(g("rope.dimension_count", hidden // heads)),
        "rms_norm_eps": float(g("attention.layer_norm_rms_epsilon", 1e-5)),
        "vocab_size": int(g("vocab_size", len(meta.get("tokenizer.ggml.tokens", [])))),
        "rope_theta": float(g("rope.freq_base", 10000.0)),
        # GGUF stores Q/K rows in the interleaved layout, which is the "traditional" rotary form.
        "rope_traditional": True,
        "max_position_embeddings": int(g("context_length", 4096)),
        "tie_word_embeddings": tied,
        "bos_token_id": _scalar(meta, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": _scalar(meta, "tokenizer.ggml.eos_token_id"),
    }
    if quantization:
        config["quantization"] = quantization
    return config


def _tokenizer_files(meta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Build a byte-level BPE ``tokenizer.json`` and its ``tokenizer_config.json``."""
    if _scalar(meta, "tokenizer.ggml.model") != "gpt2":
        raise GGUFConversionError("only byte-level BPE GGUF tokenizers (tokenizer.ggml.model = gpt2) are supported")
    tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
    merges: list[str] = list(meta["tokenizer.ggml.merges"])
    types_raw = meta.get("tokenizer.ggml.token_type")
    types = types_raw.tolist() if types_raw is not None else [1] * len(tokens)
    added = [
        {
            "id": i,
            "content": tok,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, (tok, kind) in enumerate(zip(tokens, types, strict=False))
        if kind in (3, 4)  # 3 = control, 4 = user-defined
    ]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    pre = _scalar(meta, "tokenizer.ggml.pre", "default")
    # llama.cpp's smollm / starcoder pre-tokenizers split digits one by one before the byte-level split.
    if pre in ("smollm", "starcoder", "refact", "codeshell"):
        pre_tokenizer: dict[str, Any] = {
            "type": "Sequence",
            "pretokenizers": [{"type": "Digits", "individual_digits": True}, byte_level],
        }
    else:
        pre_tokenizer = byte_level
    tokenizer_json = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {tok: i for i, tok in enumerate(tokens)},
            "merges": merges,
        },
    }

    def tok(key: str) -> str | None:
        idx = _scalar(meta, f"tokenizer.ggml.{key}_token_id")
        return tokens[int(idx)] if idx is not None and 0 <= int(idx) < len(tokens) else None

    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": tok("bos"),
        "eos_token": tok("eos"),
        "pad_token": tok("padding"),
        "unk_token": tok("unknown"),
        "add_bos_token": bool(_scalar(meta, "tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(_scalar(meta, "llama.context_length", 4096)),
        "additional_special_tokens": [a["content"] for a in added if a["content"] not in {tok("bos"), tok("eos")}],
    }
    template = meta.get("tokenizer.chat_template")
    if template:
        config["chat_template"] = str(template)
    return tokenizer_json, {k: v for k, v in config.items() if v is not None}


def _convert_weights(
    weights: dict[str, Any], dtype: str | None, bar: Any
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Rename tensors; dequantize to ``dtype`` or keep the quantized triples with their bit widths."""
    import mlx.core as mx

    out: dict[str, Any] = {}
    quant: dict[str, Any] = {}
    target = getattr(mx, dtype) if dtype else None
    bases = sorted({k.rsplit(".", 1)[0] for k in weights})
    for base in bases:
        mlx_base = _mlx_name(base + ".weight").rsplit(".", 1)[0]
        w = weights[base + ".weight"]
        scales = weights.get(base + ".scales")
        if scales is not None:
            biases = weights[base + ".biases"]
            bits = w.shape[-1] * 32 // (scales.shape[-1] * _GROUP_SIZE)
            if target is not None:
                out[mlx_base + ".weight"] = mx.dequantize(w, scales, biases, group_size=_GROUP_SIZE, bits=bits).astype(
                    target
                )
            else:
                out[mlx_base + ".weight"] = w
                out[mlx_base + ".scales"] = scales
                out[mlx_base + ".biases"] = biases
                quant[mlx_base] = {"group_size": _GROUP_SIZE, "bits": int(bits)}
        else:
            out[mlx_base + ".weight"] = w.astype(target) if target is not None else w
        if base + ".bias" in weights:
            out[mlx_base + ".bias"] = weights[base + ".bias"]
        mx.eval(list(out.values())[-3:])
        bar.update(1)
    if not quant:
        return out, None
    bit_counts: dict[int, int] = {}
    for q in quant.values():
        bit_counts[q["bits"]] = bit_counts.get(q["bits"], 0) + 1
    common = max(bit_counts, key=lambda b: bit_counts[b])
    quantization: dict[str, Any] = {"group_size": _GROUP_SIZE, "bits": common}
    quantization.update({name: q for name, q in quant.items() if q["bits"] != common})
    return out, quantization


def convert_gguf(path: str | os.PathLike[str], *, dtype: str | None = "float32", cache_dir: Path | None = None) -> Path:
    """Return an mlx-lm model directory for the GGUF file at ``path``, converting it on first use.

    ``dtype`` is ``"float32"`` (default; fastest on CPU), ``"float16"``, ``"bfloat16"`` or ``None``
    to keep the GGUF's quantized weights (smallest, fastest on Apple silicon).
    """
    import mlx.core as mx

    src = Path(path).expanduser().resolve()
    if not src.is_file():
        raise GGUFConversionError(f"GGUF file not found: {src}")
    if dtype is not None and dtype not in _DTYPES:
        raise GGUFConversionError(f"dtype must be one of {', '.join(_DTYPES)} or None, not {dtype!r}")
    root = cache_dir or cache_root()
    dest = root / f"{src.stem}-{_fingerprint(src)}-{dtype or 'quantized'}"
    if (dest / "config.json").is_file():
        return dest

    print(f"smgpy: converting {src.name} to an mlx-lm model in {dest} (once)", file=sys.stderr)
    loaded: Any = mx.load(str(src), return_metadata=True)
    weights: dict[str, Any] = loaded[0]
    meta: dict[str, Any] = loaded[1]
    bases = {k.rsplit(".", 1)[0] for k in weights}
    bar = _progress(len(bases), "converting GGUF")
    try:
        out, quantization = _convert_weights(weights, dtype, bar)
    finally:
        bar.close()
    tied = "lm_head.weight" not in out
    config = _config(meta, quantization, tied)
    tokenizer_json, tokenizer_config = _tokenizer_files(meta)

    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        mx.save_safetensors(str(tmp / "model.safetensors"), out, metadata={"format": "mlx"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        (tmp / "tokenizer.json").write_text(json.dumps(tokenizer_json, ensure_ascii=False))
        (tmp / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2, ensure_ascii=False))
        special = {
            k: tokenizer_config[k]
            for k in ("bos_token", "eos_token", "pad_token", "unk_token")
            if k in tokenizer_config
        }
        (tmp / "special_tokens_map.json").write_text(json.dumps(special, indent=2))
        try:
            tmp.rename(dest)
        except OSError:
            # Another process finished the same conversion first: keep theirs.
            if not (dest / "config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest
