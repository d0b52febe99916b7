"""A sentence-transformers model directory, read and run as sentence-transformers would: the
encoder (:mod:`smgpy.mlx.bert`), then the pooling of ``1_Pooling/config.json`` and the ``Normalize``
module when ``modules.json`` lists one.

A plain Hugging Face BERT directory (``config.json`` with ``BertModel``, no ``modules.json``) is read
as sentence-transformers reads one: mean pooling, no normalisation.

Tokens: the model's ``tokenizer.json`` in Rust (:class:`smgpy.Tokenizer`), without special tokens;
the special tokens the tokenizer's post-processor declares (``[CLS] ... [SEP]`` for BERT) are added
here, so token ids from clients and from the server get the same treatment. Inputs longer than the
model's ``max_seq_length`` are refused (sentence-transformers cuts them silently).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Pooling", "SentenceModel", "is_embedding_model_dir"]

_ST = "sentence_transformers.models."
# sentence-transformers' Pooling config keys and the mode each turns on.
_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


def _json(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def is_embedding_model_dir(path: str | Path) -> bool:
    """Whether ``path`` holds a sentence-embedding model smgpy serves on ``/v1/embeddings``: a
    sentence-transformers directory (``modules.json`` with a Pooling module) or a bare BERT encoder
    (``config.json`` whose architectures are ``BertModel``)."""
    p = Path(path)
    if not p.is_dir():
        return False
    modules = p / "modules.json"
    if modules.is_file():
        try:
            return any(str(m.get("type", "")).endswith(".Pooling") for m in _json(modules))
        except (OSError, ValueError, AttributeError):
            return False
    config = p / "config.json"
    if config.is_file():
        try:
            cfg = _json(config)
        except (OSError, ValueError):
            return False
        return bool(cfg.get("model_type") == "bert" and cfg.get("architectures") == ["BertModel"])
    return False


@dataclass(frozen=True)
class Pooling:
    """``1_Pooling/config.json``: exactly one mode (sentence-transformers concatenates several;
    no served model does that, so it is refused rather than guessed)."""

    mode: str  # "mean", "cls", "max", "mean_sqrt_len" or "lasttoken"

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Pooling:
        modes = [mode for key, mode in _POOLING_KEYS.items() if cfg.get(key)]
        if len(modes) != 1 or modes[0] == "weightedmean":
            raise ValueError(
                f"pooling config {cfg} asks for {modes or 'no mode'}; smgpy supports exactly one of "
                "cls, mean, max, mean_sqrt_len and lasttoken"
            )
        return cls(modes[0])


class SentenceModel:
    """One embedding model: token ids in, pooled (and, when the model says so, unit-length) vectors out.

    Not thread-safe: the embedder runs it on one thread (MLX's streams belong to their thread)."""

    def __init__(self, path: str | Path) -> None:
        import mlx.core as mx

        from smgpy import _native
        from smgpy.mlx.bert import BertConfig, BertEncoder, load_bert_weights

        self.path = Path(path)
        p = self.path
        modules = _json(p / "modules.json") if (p / "modules.json").is_file() else None
        base = p
        pooling = Pooling("mean")
        self.normalize = False
        if modules is not None:
            for m in modules:
                kind = str(m.get("type", "")).removeprefix(_ST)
                sub = p / str(m.get("path", ""))
                if kind == "Transformer":
                    base = sub
                elif kind == "Pooling":
                    pooling = Pooling.from_config(_json(sub / "config.json"))
                elif kind == "Normalize":
                    self.normalize = True
                else:
                    raise ValueError(
                        f"{p}: modules.json lists {m.get('type')!r}; smgpy runs Transformer, Pooling and Normalize only"
                    )
        self.pooling = pooling
        cfg = _json(base / "config.json")
        if cfg.get("model_type") != "bert":
            raise ValueError(f"{base}: model_type {cfg.get('model_type')!r}; smgpy's MLX encoder runs BERT models")
        self.config = BertConfig.from_dict(cfg)
        weights_file = base / "model.safetensors"
        if not weights_file.is_file():
            raise FileNotFoundError(
                f"{base} has no model.safetensors (smgpy reads safetensors, not PyTorch pickles): convert the "
                "weights once, e.g. with safetensors' torch helpers"
            )
        st_cfg = base / "sentence_bert_config.json"
        max_len = _json(st_cfg).get("max_seq_length") if st_cfg.is_file() else None
        self.max_seq_length = int(max_len or self.config.max_position_embeddings)
        self.max_seq_length = min(self.max_seq_length, self.config.max_position_embeddings)
        tok_file = base / "tokenizer.json"
        self.tokenizer = _native.Tokenizer.from_file(str(tok_file))
        self.prefix, self.suffix = _special_tokens(_json(tok_file).get("post_processor"))
        self.max_input_tokens = self.max_seq_length - len(self.prefix) - len(self.suffix)
        self.dimensions = self.config.hidden_size
        self.model_name = p.name if p.name != "model" else p.parent.name
        self.model = BertEncoder(self.config)
        load_bert_weights(self.model, dict(mx.load(str(weights_file)).items()))  # type: ignore[union-attr]
        self.model.eval()
        mx.eval(self.model.parameters())  # type: ignore[no-untyped-call]

    def encode_text(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def embed(self, batch: list[list[int]]) -> Any:
        """One padded forward pass over ``batch`` (ids without special tokens, each at most
        ``max_input_tokens`` long): a float32 NumPy array (len(batch), dimensions)."""
        import mlx.core as mx
        import numpy as np

        rows = [self.prefix + ids + self.suffix for ids in batch]
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int32)
        mask = np.zeros((len(rows), width), dtype=np.float32)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1.0
        m = mx.array(mask)
        h = self.model(mx.array(ids), m)
        v = _pool(h, m, self.pooling.mode)
        if self.normalize:
            v = v / mx.maximum(mx.sqrt(mx.sum(v * v, axis=-1, keepdims=True)), 1e-12)
        return np.array(v.astype(mx.float32), copy=True)


def _pool(h: Any, mask: Any, mode: str) -> Any:
    import mlx.core as mx

    m = mask[..., None]
    if mode == "cls":
        return h[:, 0]
    if mode == "max":
        return mx.max(h * m + (m - 1.0) * 1e9, axis=1)
    lengths = mx.maximum(mx.sum(m, axis=1), 1e-9)
    summed = mx.sum(h * m, axis=1)
    if mode == "mean":
        return summed / lengths
    if mode == "mean_sqrt_len":
        return summed / mx.sqrt(lengths)
    if mode == "lasttoken":
        last = (mx.sum(mask, axis=1) - 1).astype(mx.int32)
        return mx.take_along_axis(h, last[:, None, None], axis=1)[:, 0]
    raise ValueError(f"pooling mode {mode!r} is not supported")


def _special_tokens(post: Any) -> tuple[list[int], list[int]]:
    """Ids the tokenizer's post-processor puts before and after one sequence."""
    if not isinstance(post, dict):
        return [], []
    kind = post.get("type")
    if kind in ("BertProcessing", "RobertaProcessing"):
        return [int(post["cls"][1])], [int(post["sep"][1])]
    if kind == "TemplateProcessing":
        specials = post.get("special_tokens", {})
        before: list[int] = []
        after: list[int] = []
        seen = False
        for piece in post.get("single", []):
            if "Sequence" in piece:
                seen = True
            elif "SpecialToken" in piece:
                ids = [int(i) for i in specials[piece["SpecialToken"]["id"]]["ids"]]
                (after if seen else before).extend(ids)
        return before, after
    if kind == "Sequence":
        for p in post.get("processors", []):
            found = _special_tokens(p)
            if found != ([], []):
                return found
    return [], []
