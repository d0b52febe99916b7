"""Prompt lookup's drafts against an exact editor (#35): forward passes per answer, no model run.

A model that performs an edit exactly (rename a word in a function, keep the rest) writes a known
answer. This replays that answer token by token through :class:`smgpy.mlx.lookup.Lookup` as the
engine does: each pass, the lookup drafts up to ``k`` tokens, the drafts that equal the answer's
next tokens are kept, plus one token of the model's own. The count of passes is what speculation
saves where a wider forward pass costs about what one token does (an accelerator, a small batch);
on this project's CPU a wider pass costs more, which ``benches/speculative.py`` measures with the
real model. It needs no model run, so it is exact and repeatable: a change to the lookup shows as
a change of passes, without this machine's noise. The demo model's tokenizer and chat template
make the prompts (SmolLM2-135M-Instruct does not make the edit itself: asked to, it copies parts of
the file, rewrites others its own way, and does not rename).

    python benches/lookup_drafts.py
    python benches/lookup_drafts.py --base BASE/python   # also a worktree BASE of another commit
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path


def cases() -> dict[str, tuple[str, str]]:
    """Each case's question and the exact answer."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import speculative as s

    renamed = s.CODE.replace("compute_value", "calc_value")
    return {
        "rename a parameter (60 lines)": (s.EDIT, s.EDITED),
        "rename a call (40 alike lines)": (
            s.ALIKE,
            f"```python\ndef process(items):\n{renamed}\n    return total_39\n```",
        ),
        "quote every other sentence": (s.SUMMARY, " ".join(s.DOC.split(". ")[::2])),
    }


def replay(context: list[int], answer: list[int], k: int) -> tuple[int, int, int]:
    """Passes, drafted and kept tokens for ``answer`` after ``context``; its first token is the
    prefill's."""
    from smgpy.mlx.lookup import Lookup

    lookup = Lookup([*context, answer[0]])
    i, passes, drafted, kept = 1, 0, 0, 0
    while i < len(answer):
        passes += 1
        draft = lookup.propose(k)
        if not draft:
            lookup.extend([answer[i]])
            i += 1
            continue
        n = 0
        while n < len(draft) and i + n < len(answer) and draft[n] == answer[i + n]:
            n += 1
        drafted, kept = drafted + len(draft), kept + n
        lookup.verified(n, len(draft))
        lookup.extend(answer[i : i + n + 1])
        i += n + 1
    return passes, drafted, kept


def measure(ks: list[int]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from conftest import demo_engine
    from smgpy import _native

    engine = demo_engine()
    try:
        template = _native.ChatTemplate(engine.chat_template, engine.special_tokens)
        tokenizer = engine.tokenizer
        for name, (question, answer) in cases().items():
            prompt = template.render([{"role": "user", "content": question}], add_generation_prompt=True)
            context = tokenizer.encode(prompt, add_special_tokens=False)
            ids = tokenizer.encode(answer, add_special_tokens=False)
            for k in ks:
                passes, drafted, kept = replay(context, ids, k)
                print(
                    f"{name:32s} k={k}: {len(ids):5d} tokens in {passes:4d} passes ({len(ids) / passes:4.2f} a pass), "
                    f"{kept}/{drafted} drafts kept",
                    flush=True,
                )
    finally:
        engine.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8], help="draft tokens per pass at most")
    ap.add_argument("--base", help="another tree's python/ directory, measured the same way after this one")
    ap.add_argument("--label", default="this tree", help=argparse.SUPPRESS)
    args = ap.parse_args()
    print(f"{args.label}:", flush=True)
    measure(args.k)
    if args.base:
        env = {**os.environ, "PYTHONPATH": args.base}
        ks = [str(k) for k in args.k]
        subprocess.run([sys.executable, __file__, "--k", *ks, "--label", f"base ({args.base})"], env=env, check=True)


if __name__ == "__main__":
    main()
