"""Character n-gram models vs multilingual-e5-small heads, per language, at the same benign false-positive rate.

Usage: ``python benchmarks/e5_multilingual.py [--data DIR] [--artifacts DIR] [--fp 0.01] [--markdown]``

Data: the per-language sets (``$RTAUDIT_MULTILINGUAL_DATA`` or ``~/.cache/rtaudit/multilingual``;
docs/text-moderation.md says where each file comes from), the seeded sample of
:func:`rtaudit.modelbuild.text.e5_train.sample` (the rows ``rtaudit text train-e5`` embedded: their embeddings are
cached, so this runs in about a minute once training ran). Models are scored on what they read
(:func:`rtaudit.engine.text.multilingual.model_text`), without routing (``rtaudit eval`` scores through the
router). Per language, test split only:

* **char (shipped)**: the shipped n-gram model at its own operating point (score ≥ 0.5);
* **char @ FP**: the same model with its threshold re-chosen on the dev sample by the e5 heads' rule (the
  lowest that flags at most ``--fp`` of the dev ordinary sentences), so both columns are recall at the same
  benign rate;
* **e5**: the e5 head at its operating point.

Recall on the abusive test rows; FP on the ordinary test sentences (Universal Dependencies, Tatoeba), on
the abuse sets' own non-abusive test rows, and on the 50 benign sentences per language written for this
project (evaluation only: never fitted, never used for a threshold).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--artifacts", type=Path, default=None,
                    help="artifacts directory holding multilingual_e5/ (default: the shipped engine/text/artifacts)")
    ap.add_argument("--fp", type=float, default=0.01)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from rtaudit.engine.text import e5
    from rtaudit.modelbuild.text import e5_train
    from rtaudit.workers.settings import Settings
    from rtaudit.modelbuild.text import multilingual_data as MD
    from rtaudit.engine.text.e5_heads import E5Heads, artifacts_dir

    root = args.data or MD.default_data_dir(Settings().multilingual_data)
    if MD.missing(root):
        print(f"per-language data not found: {MD.missing(root)[0]}", file=sys.stderr)
        return 2
    enc = e5.E5Encoder()
    enc.use_cache()
    heads = E5Heads.load(args.artifacts)
    if heads is None:
        print(f"no e5 heads in {artifacts_dir(args.artifacts)}", file=sys.stderr)
        return 2
    print(f"load average before: {load_avg()}; encoder {enc.version}; heads {heads.version}")
    header = ["lang", "test pos", "test ordinary", "char shipped R", "ordinary FP", "benign FP",
              f"char @ dev FP<={args.fp:.0%} R", "ordinary FP", "abuse-set neg FP", "benign FP",
              "e5 R", "ordinary FP", "abuse-set neg FP", "benign FP"]
    lines = []
    for e in e5_train.compare_languages(root, enc, heads, args.fp):
        line = [e["lang"], str(e["pos"]), str(e["ordinary"])]
        for name, neg in (("char", False), ("char_fp", True), ("e5", True)):
            m = e[name]
            line += [f"{m['recall']:.3f}", f"{m['ordinary_fp']:.1%}"] + ([f"{m['neg_fp']:.1%}"] if neg else []) + \
                [f"{m['benign_fp']:.0%}"]
        lines.append(line)
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
        print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
        for line in lines:
            print("  ".join(c.rjust(w) for c, w in zip(line, widths)))
    print(f"load average after: {load_avg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
