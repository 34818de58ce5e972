"""Fit the strong English head of the cascade (``rtaudit text train-cascade``): :class:`rtaudit.engine.text.cascade.StrongHead`.

Data: the ``train`` splits of Davidson, OLID and HateXplain (:mod:`rtaudit.modelbuild.text.data`; sources and
licences in ``../shared/data/README.md``), a seeded sample of :data:`ROWS_PER_SET` rows of each (the first by
``sha256(seed:uid)``), normalized as the scorer reads them. The dev and test splits are never read here.

Per category (``offensive``: all three sets; ``hate``: Davidson, HateXplain; ``targeted_insult``: OLID), a
scikit-learn logistic regression (``class_weight="balanced"``) on the multilingual-e5-small embedding, ``C`` chosen
from :data:`C_GRID` by 5-fold cross-validated ROC-AUC on the train sample, and the threshold that maximises the
cross-validated F1 on that sample (out-of-fold probabilities) becomes the head's ``shift``.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from rtaudit.engine.hashing import sha256_file
from rtaudit.engine.text.cascade import STRONG_HEAD, StrongHead
from rtaudit.engine.text.normalize import normalize
from rtaudit.modelbuild.text import data as D
from rtaudit.modelbuild.text.evaluation import sample
from rtaudit.modelbuild.text.metrics import best_threshold

SETS = ("davidson", "olid", "hatexplain")
CATEGORIES = ("offensive", "hate", "targeted_insult")
ROWS_PER_SET = 2000
C_GRID = (0.5, 2.0, 8.0)
SEED = 20261206
#: thresholds tried on the out-of-fold probabilities
THRESHOLD_GRID = np.linspace(0.05, 0.95, 91)


def train_rows(root: Path, per_set: int = ROWS_PER_SET) -> list[D.Example]:
    """The seeded train sample of every set of :data:`SETS`."""
    return [r for name in SETS for r in sample(D.load(name, root, "train"), per_set, seed=SEED)]


def fit(emb: np.ndarray, rows: list[D.Example]) -> tuple[StrongHead, dict]:
    """The head fitted on ``emb`` (``float32[n, 384]``, row ``i`` of ``rows[i]``) and its report per category."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    ws, bs, shifts, report = [], [], [], {}
    for c in CATEGORIES:
        idx = np.array([i for i, r in enumerate(rows) if c in r.labels])
        X, y = emb[idx], np.array([rows[i].labels[c] for i in idx])
        folds = StratifiedKFold(5, shuffle=True, random_state=SEED)
        aucs = {}
        oof = {}
        for C in C_GRID:
            lr = LogisticRegression(C=C, class_weight="balanced", max_iter=2000)
            p = cross_val_predict(lr, X, y, cv=folds, method="predict_proba")[:, 1]
            aucs[C], oof[C] = float(roc_auc_score(y, p)), p
        C = max(aucs, key=aucs.__getitem__)
        t, _ = best_threshold(y, oof[C], grid=THRESHOLD_GRID)
        lr = LogisticRegression(C=C, class_weight="balanced", max_iter=2000).fit(X, y)
        ws.append(lr.coef_[0])
        bs.append(float(lr.intercept_[0]))
        shifts.append(float(np.log(t / (1 - t))))
        report[c] = {"C": C, "cv_auc": round(aucs[C], 4), "threshold": round(t, 4), "train_rows": int(len(idx)),
                     "positives": int(y.sum())}
    head = StrongHead(CATEGORIES, np.array(ws, dtype=np.float32), np.array(bs), np.array(shifts))
    return head, report


def train(root: Path, out_dir: Path, encoder, per_set: int = ROWS_PER_SET) -> dict:
    """Fit the head, write ``out_dir/`` :data:`STRONG_HEAD` and its entry in ``out_dir/manifest.json`` (the e5
    heads' manifest); returns the entry. ``encoder``: :class:`rtaudit.engine.text.e5.E5Encoder`."""
    started = time.perf_counter()
    rows = train_rows(root, per_set)
    emb = encoder.encode([normalize(r.text).text for r in rows])
    head, report = fit(emb, rows)
    path = out_dir / STRONG_HEAD
    head.save(path)
    entry = {"sha256": sha256_file(path), "bytes": path.stat().st_size, "language": "en",
             "model": "logistic regression per category on multilingual-e5-small embeddings (cascade strong head)",
             "encoder": encoder.version, "trained_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
             "data": {name: f"train split, {per_set} rows (seed {SEED})" for name in SETS},
             "threshold_rule": "max 5-fold out-of-fold F1 on the train sample", "report": report,
             "seconds": round(time.perf_counter() - started, 1)}
    manifest_path = out_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest.setdefault("artifacts", {})[STRONG_HEAD] = entry
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return entry
