"""Evasion-suite table for the lexical model, without and with normalization.

Usage: ``python benchmarks/evasion.py [--n 300] [--seed 0] [--data ../shared/data]``

Offensive texts: ``n`` tweets of class 1 ("offensive language") from Davidson
et al. 2017 (``text/davidson/labeled_data.csv``), drawn with ``seed``; benign
texts: :mod:`rtaudit.modelbuild.text.benign`; and, to check that normalization invents no
flags, every class-2 ("neither") tweet scored raw and normalized. Scorer: alt-profanity-check
(:class:`rtaudit.engine.models.profanity.ProfanityScorer`) at threshold 0.5.
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

from rtaudit.engine.models.profanity import ProfanityScorer  # noqa: E402
from rtaudit.modelbuild.text.robustness import evasion_report, format_reports, newly_flagged, normalized  # noqa: E402


def davidson(csv_path: Path, label: str, n: int | None = None, seed: int = 0) -> list[str]:
    """Tweets of class ``label`` ("0" hate, "1" offensive, "2" neither), ``n`` of them drawn with ``seed``.

    Raises FileNotFoundError when the CSV is missing.
    """
    with csv_path.open(newline="", encoding="utf-8") as f:
        texts = [row["tweet"] for row in csv.DictReader(f) if row["class"] == label]
    return texts if n is None else random.Random(seed).sample(texts, min(n, len(texts)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    csv_path = args.data / "text" / "davidson" / "labeled_data.csv"
    offensive = davidson(csv_path, "1", args.n, args.seed)
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
    neither = davidson(csv_path, "2")
    raw_rate, norm_rate, new = newly_flagged(scorer.score_texts, neither, threshold=args.threshold)
    print(f"Davidson class 2 ('neither', {len(neither)} tweets) flagged: raw {raw_rate:.4f}, "
          f"normalized {norm_rate:.4f}; flagged only after normalization: {len(new)}")
    for t in new:
        print(f"  newly flagged: {t!r}")


if __name__ == "__main__":
    main()
