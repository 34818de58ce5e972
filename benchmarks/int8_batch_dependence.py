"""Does a text's score depend on what it is batched with? fp32 and int8, batched and one text per run (one run).

Usage: ``python benchmarks/int8_batch_dependence.py [--data ../shared/data] [--chitchat N]``

The int8 graph quantizes its activations with one scale per onnxruntime run (``DynamicQuantizeLinear`` over the
whole ``[batch, tokens, 384]`` tensor, padding included), so in a batch a text's embedding moves with its
neighbours. This scores the same texts with :class:`rtaudit.engine.text.scoring.TextScorer` (one onnxruntime
thread, no evidence) in calls of 64 texts, and again one text per call, and prints per encoder mode:

* ``texts/s``: the calls of 64, end to end (normalization, windows, encoder, heads);
* ``decisions changed``: texts with some category on the other side of 0.5 alone than in the call of 64;
* ``max score change``: the largest change of any category's score between the two.

Modes: fp32 in batches of 64; int8 in batches of 64 (the serving path before 2026-12-03); int8 one text per
onnxruntime run (:data:`rtaudit.engine.text.encoder.INT8_ROWS_PER_RUN`, the serving path since).

Texts: the project's own (the functional suite, the benign list, the benign emoji chat messages), plus, where
``--data`` holds them, HatemojiBuild's test split and ``--chitchat`` Chit-Chat test messages (from
``$RTAUDIT_SAFETY_DATA`` or ``~/.cache/rtaudit/data``). One run, modes measured one after another on a shared
machine: compare within the run. Measured 2026-12-03 in docs/benchmarks.md, section "The int8 text encoder".
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def texts_to_score(data: Path, chitchat: int) -> tuple[list[str], str]:
    """The texts and a line saying where they come from."""
    from rtaudit.modelbuild.text import benign
    from rtaudit.modelbuild.text import data as D
    from rtaudit.modelbuild.text.functional import build_suite

    texts = [c.text for c in build_suite()] + list(benign.BENIGN_TEXTS) + benign.emoji_chat()
    parts = [f"{len(texts)} of the project's own"]
    try:
        hmb = [r.text for r in D.load("hatemoji_build", data, "test")]
        texts += hmb
        parts.append(f"{len(hmb)} HatemojiBuild test")
    except FileNotFoundError:
        pass
    safety = Path(os.environ.get("RTAUDIT_SAFETY_DATA", Path.home() / ".cache" / "rtaudit" / "data"))
    try:
        chat = [r.text for r in D.load("chitchat", safety, "test")][:chitchat]
        texts += chat
        parts.append(f"{len(chat)} Chit-Chat test")
    except FileNotFoundError:
        pass
    return texts, ", ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--chitchat", type=int, default=1000, help="Chit-Chat test messages to add")
    args = ap.parse_args()

    from rtaudit.engine.text.scoring import TextScorer

    texts, where = texts_to_score(args.data, args.chitchat)
    print(f"{len(texts)} texts: {where}")
    scorers = {"fp32": TextScorer(prefer_gpu=False, intra_op_threads=1, encoder_precision="fp32"),
               "int8": TextScorer(prefer_gpu=False, intra_op_threads=1, encoder_precision="int8")}
    modes = [("fp32, batches of 64", "fp32", 64), ("int8, batches of 64 (before)", "int8", 64),
             ("int8, one text per run (now)", "int8", 1)]
    print("| mode | texts/s | decisions changed (alone vs in 64) | max score change |\n|---|---|---|---|")
    for name, precision, rows in modes:
        scorer = scorers[precision]
        scorer.encoder.rows_per_run = rows

        def matrix(results) -> np.ndarray:  # type: ignore[no-untyped-def]
            cats = sorted({c for r in results for c in r.scores})
            return np.array([[r.scores.get(c, 0.0) for c in cats] for r in results])

        started = time.perf_counter()
        batched = [r for lo in range(0, len(texts), 64) for r in scorer.score(texts[lo:lo + 64], evidence=False)]
        rate = len(texts) / (time.perf_counter() - started)
        alone = [scorer.score([t], evidence=False)[0] for t in texts]
        b, a = matrix(batched), matrix(alone)
        changed = int(((b >= 0.5) != (a >= 0.5)).any(axis=1).sum())
        print(f"| {name} | {rate:.0f} | {changed} of {len(texts)} | {np.abs(b - a).max():.3f} |", flush=True)


if __name__ == "__main__":
    main()
