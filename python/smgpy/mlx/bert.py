"""A BERT encoder in MLX (``mlx.nn``), for sentence-embedding models such as all-MiniLM-L6-v2.

Why smgpy's own and not ``mlx-embeddings``: that package (0.1.0) imports ``mlx_vlm`` and
``huggingface_hub`` at load and requires ``transformers[sentencepiece]``, which pulls a second model
stack into a server that needs one encoder; and its BERT model always mean-pools and normalises,
whatever the model's ``modules.json`` and ``1_Pooling/config.json`` say, so a CLS-pooled or
unnormalised model would come out wrong without an error. This file is the encoder only (about a
hundred lines of MLX); :mod:`smgpy.mlx.sentence` reads the model directory and applies the pooling
and normalisation the model declares.

The weights are the Hugging Face ``BertModel`` layout in ``model.safetensors`` (``bert.`` prefixes of
task models are stripped; the unused pooler is dropped). Query, key and value projections are fused
into one matrix at load: one product per layer instead of three, the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

# The layer classes from their own modules: mypy does not see through ``mlx.nn``'s star imports.
from mlx.nn.layers.activations import gelu, gelu_approx, relu
from mlx.nn.layers.base import Module
from mlx.nn.layers.embedding import Embedding
from mlx.nn.layers.linear import Linear
from mlx.nn.layers.normalization import LayerNorm

__all__ = ["BertConfig", "BertEncoder", "load_bert_weights"]


@dataclass(frozen=True)
class BertConfig:
    """The fields of a BERT ``config.json`` that the encoder needs."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"

    @classmethod
    def from_dict(cls, cfg: dict[str, Any]) -> BertConfig:
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in cfg.items() if k in names})


def _activation(name: str) -> Any:
    # Hugging Face's "gelu" is the exact (erf) form; "gelu_new" / "gelu_pytorch_tanh" the tanh one.
    table = {"gelu": gelu, "gelu_new": gelu_approx, "gelu_pytorch_tanh": gelu_approx, "relu": relu}
    if name not in table:
        raise ValueError(f"BERT hidden_act {name!r} is not supported (supported: {', '.join(sorted(table))})")
    return table[name]


class _Embeddings(Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.word_embeddings = Embedding(c.vocab_size, c.hidden_size)
        self.position_embeddings = Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = Embedding(c.type_vocab_size, c.hidden_size)
        self.norm = LayerNorm(c.hidden_size, eps=c.layer_norm_eps)

    def __call__(self, ids: mx.array) -> mx.array:
        positions = mx.arange(ids.shape[1])
        # One segment: every token has type 0.
        x = self.word_embeddings(ids) + self.position_embeddings(positions) + self.token_type_embeddings.weight[0]
        out: mx.array = self.norm(x)
        return out


class _Layer(Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.heads = c.num_attention_heads
        self.qkv = Linear(c.hidden_size, 3 * c.hidden_size)
        self.attn_out = Linear(c.hidden_size, c.hidden_size)
        self.attn_norm = LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.up = Linear(c.hidden_size, c.intermediate_size)
        self.down = Linear(c.intermediate_size, c.hidden_size)
        self.out_norm = LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.act = _activation(c.hidden_act)

    def __call__(self, x: mx.array, mask: mx.array) -> mx.array:
        b, n, d = x.shape
        hd = d // self.heads
        q, k, v = mx.split(self.qkv(x).reshape(b, n, 3, self.heads, hd).transpose(2, 0, 3, 1, 4), 3)
        a = mx.fast.scaled_dot_product_attention(q[0], k[0], v[0], scale=1.0 / math.sqrt(hd), mask=mask)
        x = self.attn_norm(x + self.attn_out(a.transpose(0, 2, 1, 3).reshape(b, n, d)))
        out: mx.array = self.out_norm(x + self.down(self.act(self.up(x))))
        return out


class BertEncoder(Module):
    """Token ids (padded, with an attention mask) to the last layer's hidden states."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.config = config
        self.embeddings = _Embeddings(config)
        self.layers = [_Layer(config) for _ in range(config.num_hidden_layers)]

    def __call__(self, ids: mx.array, mask: mx.array) -> mx.array:
        """``ids``: (batch, length) int32; ``mask``: (batch, length), 1 for tokens, 0 for padding."""
        # Padding keys get -inf-like scores; every row has at least its first token, so no row is all masked.
        bias = ((1.0 - mask.astype(mx.float32)) * -1e9)[:, None, None, :]
        x = self.embeddings(ids)
        for layer in self.layers:
            x = layer(x, bias)
        return x


def _rename(key: str) -> str | None:
    """A Hugging Face BertModel weight name in this module's layout (None: not used)."""
    if key.startswith("bert."):
        key = key[len("bert.") :]
    if key.startswith(("pooler.", "cls.")) or key.endswith("position_ids"):
        return None
    key = key.replace("embeddings.LayerNorm.", "embeddings.norm.")
    key = key.replace("encoder.layer.", "layers.")
    for old, new in (
        ("attention.output.dense.", "attn_out."),
        ("attention.output.LayerNorm.", "attn_norm."),
        ("intermediate.dense.", "up."),
        ("output.dense.", "down."),
        ("output.LayerNorm.", "out_norm."),
    ):
        key = key.replace(old, new)
    return key


def load_bert_weights(model: BertEncoder, weights: dict[str, mx.array]) -> None:
    """Load a Hugging Face BertModel's weights into ``model`` (strict: a missing or unknown tensor
    raises ``ValueError`` naming it)."""
    renamed: dict[str, mx.array] = {}
    for key, value in weights.items():
        new = _rename(key)
        if new is not None:
            renamed[new] = value
    for i in range(model.config.num_hidden_layers):
        parts = [f"layers.{i}.attention.self.{p}" for p in ("query", "key", "value")]
        for kind in ("weight", "bias"):
            names = [f"{p}.{kind}" for p in parts]
            missing = [n for n in names if n not in renamed]
            if missing:
                raise ValueError(f"the BERT weights lack {missing[0]} (is this a BertModel checkpoint?)")
            renamed[f"layers.{i}.qkv.{kind}"] = mx.concatenate([renamed.pop(n) for n in names], axis=0)
    model.load_weights(list(renamed.items()), strict=True)
