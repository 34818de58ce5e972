"""Train and evaluate the per-language models (``rtaudit text train-multilingual``, ``rtaudit eval``).

Per language: the train split is fitted with per-(dataset, class) balanced sample weights
(:func:`rtaudit.modelbuild.text.training_data.balanced_weights`); the dev split chooses the n-gram range, the
regularisation strength ``C`` and the threshold (:func:`best_macro_threshold`: best dev macro-F1 among
the thresholds that flag at most 1 % of the dev split's ordinary UD sentences and reach
:data:`DEV_RECALL_FLOOR` recall on the dev split's abusive rows as routed; the threshold becomes the
model's ``shift``, so 0.5 is its operating point like every other text score); the test split is only
reported (:func:`test_report`, through the whole :class:`~rtaudit.engine.text.scoring.TextScorer`:
language detection, routing, max with the lexical score). The benign sentences of
:mod:`rtaudit.modelbuild.text.benign_multilingual` are an evaluation set only.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

from rtaudit.engine.hashing import sha256_file
from rtaudit.modelbuild.text import data as D
from rtaudit.engine.text import multilingual as ML
from rtaudit.modelbuild.text import multilingual_data as MD
from rtaudit.engine.text.heads import (
    ZH_FEATURES, ZH_NGRAMS, ChineseModel, CharNgramModel, char_vectorizer, lexical_logit, smooth_idf, zh_vectorizer,
)
from rtaudit.modelbuild.text.metrics import best_threshold, prf

log = logging.getLogger(__name__)

#: hashed buckets of every per-language model (2^18: ~1 MB compressed per model).
N_FEATURES = 2**18
#: n-gram ranges and C values tried on dev.
NGRAMS = ((1, 4), (2, 5))
CS = (2.0, 8.0, 32.0)
#: the targets per served language (issue 39: recall >= 0.75 at <= 3 % false positives on benign sentences).
TARGET_RECALL = 0.75
TARGET_BENIGN_FP = 0.03


#: the most of the dev split's ordinary sentences (Universal Dependencies) a threshold may flag.
ORDINARY_FP_MAX = 0.01
#: the least recall a threshold must reach on the dev split's abusive rows, an abusive row that the
#: router does not send to the language's own model counted as missed (the held-out table scores
#: through the router). 3 points above :data:`TARGET_RECALL`: the standard error of a recall on the
#: ~400 abusive rows of a dev split is ~2.5 points. Set before the test split was read with it.
DEV_RECALL_FLOOR = TARGET_RECALL + 0.03


def best_macro_threshold(y: np.ndarray, p: np.ndarray, grid: np.ndarray | None = None,
                         ordinary: np.ndarray | None = None, routed: np.ndarray | None = None,
                         recall_floor: float | None = None) -> tuple[float, float]:
    """``(threshold, macro-F1)`` maximising the mean of both classes' F1 of ``p >= threshold`` (``y``:
    0/1 labels, ``p``: probabilities, both ``[n]`` over the dev rows; ``grid``: the thresholds tried,
    default 0.02-0.98 by 0.01).

    Candidates: the thresholds that flag at most :data:`ORDINARY_FP_MAX` of the ``ordinary`` rows (a
    mask of the dev rows from the ordinary-text sources; none: no such limit) and, with
    ``recall_floor``, whose recall on the ``y == 1`` rows reaches it, a positive row outside ``routed``
    (a mask of the dev rows the router sends to this language's model; none: every row) counted as
    missed. No candidate meets the recall floor: of those within the ordinary limit, the best macro-F1 among the
    ones with the highest such recall (the floor is the target: get as near it as the limit allows); none
    within that either: the one that flags the fewest ordinary rows (the lowest such threshold).

    Not the positive class's F1 alone: where a set is mostly abusive (MLMA French: 78 % of dev), the
    positive F1 is best at a threshold that flags nearly everything (0.09, recall 0.99), which no
    benign text survives. Macro-F1 (the shared tasks' own metric) weighs the benign class too. The
    recall floor keeps a sparse, mild abusive class (EmoEvent's) from being traded away for
    precision below the issue's recall target."""
    grid = np.arange(0.02, 0.99, 0.01) if grid is None else grid
    pos = y == 1
    reach = pos & (routed if routed is not None else np.ones(len(y), bool))
    best, floored, fallback = (0.5, -1.0), (0.5, -1.0), (0.99, -1.0, 2.0)
    best_recall = -1.0
    for t in grid:
        pred = p >= t
        f = (prf(y, pred).f1 + prf(1 - y, ~pred).f1) / 2
        fp = float(pred[ordinary].mean()) if ordinary is not None and ordinary.any() else 0.0
        recall = float((pred & reach).sum() / max(pos.sum(), 1))
        key = ((recall, f) if recall_floor is not None else (f,)) > ((best_recall, best[1]) if recall_floor is not None else (best[1],))
        if fp <= ORDINARY_FP_MAX and key:
            best, best_recall = (float(t), float(f)), recall
        if fp <= ORDINARY_FP_MAX and recall_floor is not None and recall >= recall_floor and f > floored[1]:
            floored = (float(t), float(f))
        if fp < fallback[2]:
            fallback = (float(t), float(f), fp)
    if floored[1] >= 0:
        return floored
    return best if best[1] >= 0 else fallback[:2]


def fit_char_model(train_texts: list[str], y_train: np.ndarray, dev_texts: list[str], y_dev: np.ndarray,
                   weights: np.ndarray | None = None, ngrams_grid=NGRAMS, cs=CS,
                   n_features: int = N_FEATURES, dev_ordinary: np.ndarray | None = None,
                   dev_routed: np.ndarray | None = None, recall_floor: float | None = DEV_RECALL_FLOOR,
                   ) -> tuple[CharNgramModel, dict]:
    """Fit a :class:`CharNgramModel` on train, choose n-grams, ``C`` and the threshold on dev (best
    macro-F1 under the ordinary-text and recall limits: :func:`best_macro_threshold`; ``dev_ordinary``
    and ``dev_routed`` are its masks over the dev rows)."""
    from sklearn.linear_model import LogisticRegression

    best = None
    for ngrams in ngrams_grid:
        counts = char_vectorizer(n_features, ngrams).transform(train_texts)
        idf = smooth_idf(counts).astype(np.float16).astype(np.float32)  # as stored
        base = CharNgramModel(idf, np.zeros(n_features, np.float32), 0.0, 0.0, tuple(ngrams))
        Xtr, Xdv = base.transform(train_texts), base.transform(dev_texts)
        for C in cs:
            lr = LogisticRegression(C=C, max_iter=3000, solver="liblinear").fit(Xtr, y_train, sample_weight=weights)
            t, f1 = best_macro_threshold(y_dev, lr.predict_proba(Xdv)[:, 1], ordinary=dev_ordinary,
                                         routed=dev_routed, recall_floor=recall_floor)
            log.info("ngrams=%s C=%s dev macro-F1 %.4f at %.2f", ngrams, C, f1, t)
            if best is None or f1 > best[0]:
                best = (f1, ngrams, C, t, idf, lr)
    f1, ngrams, C, t, idf, lr = best  # type: ignore[misc]  # best is set by the first grid point (the grid is never empty)
    model = CharNgramModel(idf, lr.coef_[0].astype(np.float32), float(lr.intercept_[0]),
                           float(lexical_logit(np.array([t]))[0]), tuple(ngrams))
    p_dev = model.predict(dev_texts)
    dev = prf(y_dev, p_dev >= 0.5)
    ordinary_fp = float((p_dev[dev_ordinary] >= 0.5).mean()) if dev_ordinary is not None and dev_ordinary.any() else None
    reach = (y_dev == 1) & (dev_routed if dev_routed is not None else True)
    routed_recall = float(((p_dev >= 0.5) & reach).sum() / max((y_dev == 1).sum(), 1))
    return model, {"ngrams": list(ngrams), "C": C, "threshold": round(float(t), 3), "dev_macro_f1": round(float(f1), 4),
                   "dev_ordinary_fp": None if ordinary_fp is None else round(ordinary_fp, 4),
                   "dev_f1": round(dev.f1, 4), "dev_precision": round(dev.precision, 4), "dev_recall": round(dev.recall, 4),
                   "dev_routed_recall": round(routed_recall, 4),
                   "threshold_rule": f"best dev macro-F1 with dev ordinary FP <= {ORDINARY_FP_MAX}"
                                     + (f" and routed dev recall >= {recall_floor:.2f} (where reachable; else the highest"
                                        " routed dev recall within that FP)" if recall_floor else ""),
                   "train_rows": len(train_texts), "dev_rows": len(dev_texts),
                   "features": f"char {ngrams[0]}-{ngrams[1]}-grams hashed to {n_features}"}


def train_language(root: Path, lang: str) -> tuple[CharNgramModel, dict]:
    """Fit ``lang``'s model on the train split of its sources under ``root`` plus its written
    negatives (:mod:`rtaudit.modelbuild.text.multilingual_negatives`, train only, dataset ``written_<lang>``),
    choose it on the dev split (:func:`fit_char_model`; the dev rows routed as the scorer routes them).

    Raises:
        FileNotFoundError: a source file of ``lang`` is missing under ``root``.
    """
    from rtaudit.modelbuild.text.multilingual_negatives import negatives
    from rtaudit.engine.text.normalize import normalize
    from rtaudit.engine.text.normalize import detection_view
    from rtaudit.engine.text.scoring import route_normalized
    from rtaudit.modelbuild.text.training_data import balanced_weights

    from rtaudit.modelbuild.text.benign_multilingual import benign

    # the benign sentences are an evaluation set: a source sentence that reads the same is never fitted
    # nor used for a threshold (Tatoeba holds everyday sentences of the same kind)
    evaluation = {ML.model_text(normalize(t).text) for t in benign(lang)}
    rows = [r for r in MD.load(root, lang) if r.text not in evaluation]
    written = sorted({ML.model_text(normalize(t).text) for t in negatives(lang)} - {r.text for r in rows})
    tr = [r for r in rows if r.split == "train"] + [MD.Row(f"written_{lang}", lang, t, 0, "train") for t in written]
    dv = [r for r in rows if r.split == "dev"]
    y = np.array([r.label for r in tr])
    w = balanced_weights(y, np.array([r.source for r in tr]))
    ordinary = {s.name for s in MD.sources(lang) if s.benign_only}
    dev_texts = [r.text for r in dv]
    # routed as the scorer routes what a producer sends: the published text (the normalized one spells emoji
    # as English names, which pulls lingua to the English route)
    published = [normalize(r.raw or r.text) for r in dv]
    routed = ML.LanguageRouter().languages([detection_view(n.original) for n in published],
                                           [route_normalized(n) for n in published])
    model, report = fit_char_model([r.text for r in tr], y, dev_texts, np.array([r.label for r in dv]), w,
                                   dev_ordinary=np.array([r.source in ordinary for r in dv]),
                                   dev_routed=np.array([r == lang for r in routed]))
    report["rows"] = {s: {split: sum(1 for r in rows if r.source == s and r.split == split)
                          for split in ("train", "dev", "test")} for s in sorted({r.source for r in rows})}
    if written:
        report["rows"][f"written_{lang}"] = {"train": len(written), "dev": 0, "test": 0}
        report["written_negatives"] = "rtaudit.modelbuild.text.multilingual_negatives (train only)"
    return model, report


def train_all(root: Path, out: Path | None = None, languages: tuple[str, ...] = ML.LANGUAGES) -> dict:
    """Train every language whose data is under ``root``; write ``<out>/<lang>_char_lr.npz`` and
    ``<out>/manifest.json`` (default: the shipped ``artifacts/multilingual``). A language whose files
    are missing keeps its shipped model (and manifest entry) and is named under ``skipped``."""
    out = out or ML.artifacts_dir()
    out.mkdir(parents=True, exist_ok=True)
    old = json.loads((out / "manifest.json").read_text()) if (out / "manifest.json").exists() else {}
    artifacts = dict(old.get("artifacts", {}))
    skipped = {}
    started = time.perf_counter()
    for lang in languages:
        gone = MD.missing(root, lang)
        if gone:
            skipped[lang] = f"{gone[0]} not found"
            log.warning("%s: %s; kept as shipped", lang, skipped[lang])
            continue
        t0 = time.perf_counter()
        model, report = train_language(root, lang)
        path = out / ML.model_file(lang)
        model.save(path)
        artifacts[ML.model_file(lang)] = {
            "sha256": sha256_file(path), "bytes": path.stat().st_size, "language": lang,
            "model": "char n-gram TF-IDF (hashed) + logistic regression, offensive",
            "datasets": [s.name for s in MD.sources(lang)], "report": report,
            "training_time_s": round(time.perf_counter() - t0, 1)}
        log.info("%s: %s", lang, report)
    datasets = {s.name: {"language": s.language, "title": s.title, "repo": f"https://github.com/{s.repo}",
                         "commit": s.commit, "licence": s.licence, "labels": s.labels,
                         "files": {local: {"path_in_repo": remote,
                                           "sha256": sha256_file(root / s.name / local) if (root / s.name / local).is_file() else None}
                                   for local, remote in s.files}}
                for s in MD.SOURCES}
    stamp = datetime.now(timezone.utc)
    manifest = {
        "version": f"{stamp:%Y-%m-%d}-{hashlib_short(artifacts)}",
        "trained_at": stamp.isoformat(timespec="seconds"),
        "artifacts": artifacts,
        "datasets": datasets if not skipped else {**old.get("datasets", {}), **datasets},
        "split": {"seed": MD.SPLIT_SEED, "test": MD.TEST_SHARE, "dev": MD.DEV_SHARE,
                  "rule": "sha256(f'{seed}:{source}:{normalized text}') -> test | dev | train"},
        "routing": {"detector": f"lingua-language-detector {metadata.version('lingua-language-detector')}",
                    "detected": list(ML.DETECTED), "latin_margin": ML.LATIN_MARGIN},
        "libraries": {"scikit-learn": metadata.version("scikit-learn"), "numpy": metadata.version("numpy")},
        "skipped": skipped,
        "training_time_s": round(time.perf_counter() - started, 1),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest


def hashlib_short(artifacts: dict) -> str:
    import hashlib

    return hashlib.sha256("".join(sorted(a["sha256"] for a in artifacts.values())).encode()).hexdigest()[:8]


# -- evaluation ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LanguageReport:
    language: str
    datasets: str
    n: int
    pos: int
    routed: float  # share of test rows routed to the language's own model
    precision: float
    recall: float
    f1: float
    benign_n: int
    benign_fp: float
    ud_n: int = 0  # held-out Universal Dependencies sentences (ordinary text)
    ud_fp: float = 0.0

    @property
    def met(self) -> bool:
        return self.recall >= TARGET_RECALL and self.benign_fp <= TARGET_BENIGN_FP


def _flagged(results) -> np.ndarray:
    return np.array([max(r.scores.values()) >= 0.5 for r in results])


def test_report(scorer, root: Path, quick: bool = False,
                languages: tuple[str, ...] = ML.LANGUAGES, rows_of=None) -> list[LanguageReport]:
    """Per language (of ``languages``, default all): P/R/F1 of ``scorer`` (any category >= 0.5) on the
    held-out test split and its false-positive rate on the language's benign sentences. ``quick``: the
    first 300 test rows. ``rows_of``: ``lang -> rows`` to take the test rows from (default: every row of the
    language's sets; ``rtaudit eval`` passes the seeded sample of :func:`rtaudit.modelbuild.text.e5_train.sample`
    when the multilingual encoder serves, whose embeddings are cached)."""
    from rtaudit.modelbuild.text.benign_multilingual import benign

    out = []
    for lang in languages:
        ordinary = {s.name for s in MD.sources(lang) if s.benign_only}
        test = [r for r in (rows_of(lang) if rows_of else MD.load(root, lang)) if r.split == "test"]
        rows = [r for r in test if r.source not in ordinary]
        ud = [r for r in test if r.source in ordinary]
        if quick:
            rows, ud = rows[:300], ud[:100]
        # the published text, as a producer sends it: the normalized one has emoji spelt out as English names,
        # which pulls lingua to the English route
        results = scorer.score([r.raw or r.text for r in rows], evidence=False)
        m = prf(np.array([r.label for r in rows]), _flagged(results))
        sentences = benign(lang)
        fp = _flagged(scorer.score(sentences, evidence=False))
        ud_fp = _flagged(scorer.score([r.raw or r.text for r in ud], evidence=False)) if ud else np.zeros(0)
        out.append(LanguageReport(lang, "+".join(s.name for s in MD.sources(lang) if not s.benign_only), len(rows),
                                  sum(r.label for r in rows),
                                  float(np.mean([r.language == lang for r in results])) if rows else 0.0,
                                  m.precision, m.recall, m.f1, len(sentences), float(fp.mean()),
                                  len(ud), float(ud_fp.mean()) if len(ud) else 0.0))
    return out


def benign_report(scorer) -> dict[str, tuple[int, float]]:
    """``{lang: (sentences, flagged share)}`` on the benign sentences alone (needs no data)."""
    from rtaudit.modelbuild.text.benign_multilingual import benign

    out = {}
    for lang in ML.LANGUAGES:
        sentences = benign(lang)
        out[lang] = (len(sentences), float(_flagged(scorer.score(sentences, evidence=False)).mean()))
    return out


def train_chinese(root: Path) -> tuple[ChineseModel, dict]:
    """Char 1–3-gram TF-IDF + logistic regression on COLD train; C and threshold on COLD dev (the
    Chinese model, beside the other languages' char n-gram models; called by ``train.train_all``)."""
    from sklearn.linear_model import LogisticRegression

    from rtaudit.engine.text.normalize import normalize

    rows = D.load("cold", root)
    texts = [normalize(e.text).text for e in rows]
    y = np.array([e.labels["offensive"] for e in rows])
    tr = np.array([e.split == "train" for e in rows])
    counts = zh_vectorizer().transform([t for t, m in zip(texts, tr) if m])
    n = counts.shape[0]
    df = np.bincount(counts.indices, minlength=ZH_FEATURES)
    idf = (np.log((1 + n) / (1 + df)) + 1).astype(np.float32)  # scikit-learn's smooth idf
    base = ChineseModel(idf.astype(np.float16).astype(np.float32), np.zeros(ZH_FEATURES, np.float32), 0.0, 0.0)
    Xtr, Xdv = base.transform([t for t, m in zip(texts, tr) if m]), base.transform([t for t, m in zip(texts, tr) if not m])
    best = None
    for C in (2.0, 8.0, 32.0):
        model = LogisticRegression(C=C, max_iter=3000, solver="liblinear").fit(Xtr, y[tr])
        t, f1 = best_threshold(y[~tr], model.predict_proba(Xdv)[:, 1])
        log.info("zh C=%s dev F1 %.4f at %.2f", C, f1, t)
        if best is None or f1 > best[0]:
            best = (f1, C, t, model)
    f1, C, t, model = best  # type: ignore[misc]  # best is set by the first grid point (the grid is never empty)
    zh = ChineseModel(base.idf, model.coef_[0].astype(np.float32), float(model.intercept_[0]),
                      float(lexical_logit(np.array([t]))[0]))
    return zh, {"C": C, "threshold": round(t, 3), "dev_f1": round(f1, 4), "train_rows": int(tr.sum()),
                "dev_rows": int((~tr).sum()), "features": f"char {ZH_NGRAMS[0]}-{ZH_NGRAMS[1]}-grams hashed to {ZH_FEATURES}"}
