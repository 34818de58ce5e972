"""Before/after of the fine-tuned encoder (issue 12 item 5): the same measurements, in one run, for each
artifact directory given (its manifest names its encoder: the plain wheel MiniLM or the fine-tuned delta).

Usage: ``python benchmarks/finetune_compare.py NAME=ARTIFACTS_DIR [NAME=DIR ...] [--data ../shared/data]
[--threads 1] [--json out.json]``

Per directory: dev macro-F1 per English dev set (``rtaudit eval``'s classification: Davidson, OLID, HateXplain),
HatemojiBuild test macro-F1 (flagged = any category >= 0.5), violence / self-harm P and R on the held-out
test splits, benign false-positive rate and the evasion suite's worst relative recall, the functional
suite's functionalities at target, the share of Chit-Chat's held-out messages flagged (``rtaudit eval``'s
conversation table), texts/s at batch 64 (with evidence; no embedding memo; the scorers
alternate over ``--rounds`` rounds and the median is given: the cores are shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rtaudit.modelbuild.text import data as D  # noqa: E402
from rtaudit.modelbuild.text import evaluation as ev  # noqa: E402
from rtaudit.modelbuild.text import functional as fs  # noqa: E402
from rtaudit.engine.text.scoring import TextScorer  # noqa: E402
from rtaudit.workers.settings import load_settings  # noqa: E402


def quality(scorer: TextScorer, root: Path, safety: Path) -> dict:
    out: dict = {"version": scorer.version}
    memo = scorer.encoder.use_cache()
    _, sets = ev.classification(scorer, root)
    out["dev_macro_f1"] = {r.dataset: round(r.macro_f1, 4) for r in sets}
    out["hatemoji_test"] = {k: round(v, 4) for k, v in ev.hatemoji(scorer, root, "test").items()}
    rows, benign = ev.safety(scorer, root, safety)
    out["safety"] = {f"{r.dataset}/{r.category}": {"P": round(r.model.precision, 4), "R": round(r.model.recall, 4),
                                                   "F1": round(r.model.f1, 4), "FP": round(r.false_positive_rate, 4)}
                     for r in rows}
    out["safety_benign_fp"] = round(sum(len(benign[c]) for c in D.SAFETY_CATEGORIES) / benign["n"], 4)
    ours, _ = ev.evasion(scorer, root)
    out["benign_fp"] = round(ours.benign_fp_rate, 4)
    out["benign_flagged"] = list(ours.benign_flagged)
    out["evasion_worst_relative"] = round(ours.worst_relative, 4)
    out["evasion_relative"] = {k: round(v, 4) for k, v in ours.relative.items()}
    conv = ev.conversation(scorer, safety)
    out["conversation_fp"] = {r.subset: round(r.any_rate, 4) for r in conv}
    out["conversation_flagged"] = {r.subset: list(r.examples) for r in conv}
    rep = fs.evaluate(fs.scorer_scores(scorer))
    out["functional_met"] = f"{rep.met}/{len(rep.rows)}"
    out["functional"] = {r.functionality: round(r.pass_rate, 3) for r in rep.rows}
    memo.save()
    scorer.encoder.memo = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", help="NAME=ARTIFACTS_DIR")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--safety-data", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precision", choices=("fp32", "int8"), default="fp32", help="the encoder graph every scorer runs")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    safety = args.safety_data or D.safety_data_dir(load_settings().safety_data)
    scorers = {}
    for item in args.dirs:
        name, _, d = item.partition("=")
        scorers[name] = TextScorer(prefer_gpu=False, intra_op_threads=args.threads, encoder_precision=args.precision,
                                   artifacts_dir=Path(d))
    results = {name: quality(s, args.data, safety) for name, s in scorers.items()}
    texts = [r.text for d in ("davidson", "olid", "hatexplain") for r in ev.sample(D.load(d, args.data, "dev"), 96)]
    rates: dict[str, list[float]] = {n: [] for n in scorers}
    for s in scorers.values():
        s.score(texts[:8])
    for _ in range(args.rounds):
        for name, s in scorers.items():
            started = time.perf_counter()
            for lo in range(0, len(texts), 64):
                s.score(texts[lo:lo + 64])
            rates[name].append(len(texts) / (time.perf_counter() - started))
    for name in scorers:
        results[name]["texts_per_s_batch64"] = round(statistics.median(rates[name]), 1)
        results[name]["texts_per_s_batch64_rounds"] = [round(r, 1) for r in rates[name]]
    results["load_average"] = os.getloadavg()
    print(json.dumps(results, indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
