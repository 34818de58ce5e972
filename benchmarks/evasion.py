"""Evasion-suite table for the lexical model, without and with normalization.

Usage: ``python benchmarks/evasion.py [--n 300] [--seed 0] [--data ../shared/data]``

Offensive texts: ``n`` tweets of class 1 ("offensive language") from Davidson
et al. 2017 (``text/davidson/labeled_data.csv``), drawn with ``seed``; benign
texts: :mod:`engine.text.benign`. Scorer: alt-profanity-check
(:class:`engine.models.profanity.ProfanityScorer`) at threshold 0.5.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.models.profanity import ProfanityScorer  # noqa: E402
from engine.text.robustness import evasion_report, format_reports, normalized  # noqa: E402


def davidson_offensive(csv_path: Path, n: int, seed: int) -> list[str]:
    """``n`` tweets of class 1 (offensive, not hate) drawn with ``seed``; raises FileNotFoundError."""
    with csv_path.open(newline="", encoding="utf-8") as f:
        texts = [row["tweet"] for row in csv.DictReader(f) if row["class"] == "1"]
    return random.Random(seed).sample(texts, min(n, len(texts)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    offensive = davidson_offensive(args.data / "text" / "davidson" / "labeled_data.csv", args.n, args.seed)
    scorer = ProfanityScorer()
    t0 = time.perf_counter()
    reports = [
        evasion_report(scorer.score_texts, offensive, label="raw", seed=args.seed, threshold=args.threshold),
        evasion_report(
            normalized(scorer.score_texts), offensive, label="normalized", seed=args.seed, threshold=args.threshold
        ),
    ]
    elapsed = time.perf_counter() - t0
    print(f"alt-profanity-check, threshold {args.threshold}, {len(offensive)} Davidson class-1 tweets "
          f"(seed {args.seed}), {reports[0].n_benign} benign texts; {elapsed:.1f} s")
    print(format_reports(reports))
    for r in reports:
        cats = ", ".join(f"{c} {v:.2f}" for c, v in r.benign_fp_by_category.items() if v)
        print(f"{r.label}: benign flagged by category: {cats or 'none'}")
        for t in r.benign_flagged:
            print(f"  flagged: {t!r}")


if __name__ == "__main__":
    main()
