"""Fit the romanized-script routers (:class:`rtaudit.engine.text.romanized.RomanizedRouter`; ``rtaudit text train-e5``).

One character n-gram model per romanized language (:data:`rtaudit.engine.text.romanized.ROMANIZED`), one
against the rest: that language's train rows (abusive and not) against English posts (OLID and Davidson
train, from the labelled English data, ``--english-data``), the other romanized languages, and the
Latin-script languages' rows (es, fr, de, pt, it; at most :data:`PER_SOURCE` per language). 1-4-grams
hashed to 2^17, TF-IDF, logistic regression (scikit-learn, balanced classes). Threshold: the lowest that sends
at most :data:`~rtaudit.engine.text.romanized.ROUTE_EN_MAX` of the English dev posts and of each Latin-script
language's dev rows (the union's rate) to the romanized route; it becomes the model's ``shift``.

Also the character n-gram abuse models of :data:`NGRAM_HEADS` (Hinglish and Arabizi: e5 reads them poorly), which the
e5 stage serves those languages with instead of their e5 heads (:func:`fit_ngram_head`, :func:`train_ngram_heads`).
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import numpy as np

from rtaudit.modelbuild.text import multilingual_data as MD
from rtaudit.engine.text import romanized as R
from rtaudit.modelbuild.text import romanized_data as RD
from rtaudit.engine.text.heads import CharNgramModel, char_vectorizer, lexical_logit, smooth_idf

log = logging.getLogger(__name__)

N_FEATURES = 2**17
NGRAMS = (1, 4)
PER_SOURCE = 3000
LATIN = ("es", "fr", "de", "pt", "it")
SEED = 20261205


def _english(english_root: Path, split: str) -> list[str]:
    from rtaudit.modelbuild.text import data as D
    from rtaudit.engine.text.multilingual import model_text
    from rtaudit.engine.text.normalize import normalize

    out = []
    for name in ("olid", "davidson"):
        out += [model_text(normalize(e.text).text) for e in D.load(name, english_root, split=split)]
    return [t for t in out if t]


def fit_routers(root: Path, english_root: Path,
                languages: tuple[str, ...] = R.ROMANIZED) -> dict[str, tuple[CharNgramModel, dict]]:
    """``{lang: (router model, report)}`` for each romanized language of ``languages`` (the negatives hold every
    romanized language's rows all the same, so one new language can be fitted without refitting the others).

    Raises:
        FileNotFoundError: a source file is missing (romanized, Latin-script or English data).
    """
    from sklearn.linear_model import LogisticRegression

    rng = random.Random(SEED)
    rows = {lang: RD.load(root, lang) for lang in R.ROMANIZED}
    latin = {lang: MD.load(root, lang) for lang in LATIN}

    def texts(rs: list, split: str) -> list[str]:
        sel = [r.text for r in rs if r.split == split]
        rng.shuffle(sel)
        return sel[:PER_SOURCE] if split == "train" else sel[:PER_SOURCE // 3]

    en_train, en_dev = _english(english_root, "train"), _english(english_root, "dev")
    other_train = en_train + [t for rs in latin.values() for t in texts(rs, "train")]
    other_dev = en_dev + [t for rs in latin.values() for t in texts(rs, "dev")]
    out = {}
    for lang in languages:
        rest = [x for x in R.ROMANIZED if x != lang]
        pos_tr, pos_dv = texts(rows[lang], "train"), texts(rows[lang], "dev")
        neg_tr = other_train + [t for x in rest for t in texts(rows[x], "train")]
        neg_dv = other_dev + [t for x in rest for t in texts(rows[x], "dev")]
        train = pos_tr + neg_tr
        y = np.array([1] * len(pos_tr) + [0] * len(neg_tr))
        counts = char_vectorizer(N_FEATURES, NGRAMS).transform(train)
        idf = smooth_idf(counts).astype(np.float16).astype(np.float32)
        base = CharNgramModel(idf, np.zeros(N_FEATURES, np.float32), 0.0, 0.0, NGRAMS)
        lr = LogisticRegression(C=8.0, max_iter=3000, solver="liblinear", class_weight="balanced").fit(base.transform(train), y)
        p_neg = lr.predict_proba(base.transform(neg_dv))[:, 1]
        p_en = p_neg[:len(en_dev)]
        s = np.sort(p_neg)[::-1]
        t = float(min(max(s[int(R.ROUTE_EN_MAX * len(s))] + 1e-4, 0.05), 0.9999))
        model = CharNgramModel(idf, lr.coef_[0].astype(np.float32), float(lr.intercept_[0]),
                               float(lexical_logit(np.array([t]))[0]), NGRAMS)
        recall = float((model.predict(pos_dv) >= 0.5).mean())
        report = {"threshold": round(t, 4), "dev_routed": round(recall, 4), "dev_english_routed": round(float((p_en >= t).mean()), 4),
                  "dev_other_routed": round(float((p_neg >= t).mean()), 4), "train_rows": len(train),
                  "features": f"char {NGRAMS[0]}-{NGRAMS[1]}-grams hashed to {N_FEATURES}",
                  "negatives": "OLID + Davidson (English), es fr de pt it rows, the other romanized languages"}
        log.info("router %s: %s", lang, report)
        out[lang] = (model, report)
    return out


def train_routers(root: Path, english_root: Path, out: Path, languages: tuple[str, ...] = R.ROMANIZED) -> dict:
    """Fit the routers of ``languages`` (:func:`fit_routers`), write ``<out>/route_<lang>.npz`` and add them to
    ``<out>/manifest.json`` (which :func:`rtaudit.modelbuild.text.e5_train.train_all` wrote). Returns the manifest."""
    import json

    from rtaudit.engine.hashing import sha256_file

    manifest = json.loads((out / "manifest.json").read_text())
    for lang, (model, report) in fit_routers(root, english_root, languages).items():
        path = out / R.router_file(lang)
        model.save(path)
        manifest["artifacts"][R.router_file(lang)] = {
            "sha256": sha256_file(path), "bytes": path.stat().st_size, "language": lang,
            "model": "char n-gram TF-IDF (hashed) + logistic regression: romanized-script detector", "report": report}
    manifest["datasets"].update({s.name: {"repo": f"https://github.com/{s.repo}", "commit": s.commit, "licence": s.licence}
                                 for s in RD.SOURCES})
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest


#: romanized languages whose abuse score comes from a character n-gram model (``ngram_<lang>.npz``) alone, not from
#: their e5 head: Hinglish and Arabizi, which e5 reads poorly (on every dev row, 2026-12-06: dev AUC 0.68 and 0.72 for
#: the e5 heads against the n-gram models' 0.84 and 0.85; at the same dev non-abusive FP, 10 %, the larger of head and
#: model recalled 0.51 and 0.59 of the dev abuse, the model alone 0.59 and 0.60; and the ar_latn e5 head flagged 23 %
#: of TUNIZI's positive dev comments, the model 11 %).
NGRAM_HEADS = ("hi_latn", "ar_latn")
#: the threshold rule of the n-gram models: the lowest flagging at most this share of the abuse sets' non-abusive dev
#: rows (the languages have no ordinary sentences). 10 %, not the e5 heads' 5 % (e5_train.NEG_FP_MAX): it is the
#: dev non-abusive FP the stage already spent when it max'ed a 5 % head with a 5 % model (10.1 % ar_latn, 13.1 %
#: hi_latn), now spent on the one better model.
NGRAM_NEG_FP_MAX = 0.10
#: the abuse models' character n-grams: 1-5 (dev ROC-AUC, C = 4: hi_latn 0.841 vs 0.835 for 1-4, ar_latn 0.849 vs
#: 0.844; 1-3 and 2-5 lower or equal; the routers keep :data:`NGRAMS`).
HEAD_NGRAMS = (1, 5)
#: regularisation of the abuse models (dev ROC-AUC over 1, 4, 16: 4 best or within 0.003 for both languages).
HEAD_C = 4.0
#: non-abusive false-positive rates at which :func:`fit_ngram_head` reports dev recall (what another rule would give).
FP_LEVELS = (0.05, 0.10, 0.20)


def fit_ngram_head(root: Path, lang: str) -> tuple[CharNgramModel, dict]:
    """A character n-gram abuse model of a romanized language (:data:`NGRAM_HEADS`): every train row of ``lang``'s abuse
    sets (:func:`~rtaudit.modelbuild.text.romanized_data.load`; :data:`HEAD_NGRAMS` hashed to :data:`N_FEATURES`,
    TF-IDF, logistic regression, balanced classes, ``C`` :data:`HEAD_C`), threshold the lowest flagging at most
    :data:`NGRAM_NEG_FP_MAX` of the dev non-abusive rows. The report also gives the dev
    recall at each of :data:`FP_LEVELS` and, where ``lang`` has benign sources
    (:func:`~rtaudit.modelbuild.text.romanized_data.benign`: never fitted on), the share of their dev rows flagged.

    Raises:
        FileNotFoundError: a source file of ``lang`` is missing.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    from rtaudit.modelbuild.text.e5_train import threshold_at_fp

    rows = RD.load(root, lang)
    train = [r for r in rows if r.split == "train"]
    dev = [r for r in rows if r.split == "dev"]
    benign_dev = [r.text for r in RD.benign(root, lang) if r.split == "dev"]
    y, y_dev = np.array([r.label for r in train]), np.array([r.label for r in dev])
    counts = char_vectorizer(N_FEATURES, HEAD_NGRAMS).transform([r.text for r in train])
    idf = smooth_idf(counts).astype(np.float16).astype(np.float32)
    base = CharNgramModel(idf, np.zeros(N_FEATURES, np.float32), 0.0, 0.0, HEAD_NGRAMS)
    lr = LogisticRegression(C=HEAD_C, max_iter=3000, solver="liblinear", class_weight="balanced").fit(
        base.transform([r.text for r in train]), y)
    p_dev = lr.predict_proba(base.transform([r.text for r in dev]))[:, 1]
    t = threshold_at_fp(p_dev[y_dev == 0], NGRAM_NEG_FP_MAX)
    model = CharNgramModel(idf, lr.coef_[0].astype(np.float32), float(lr.intercept_[0]),
                           float(lexical_logit(np.array([t]))[0]), HEAD_NGRAMS)
    flagged = model.predict([r.text for r in dev]) >= 0.5
    at_fp = {f"{fp:.2f}": round(float((p_dev[y_dev == 1] >= threshold_at_fp(p_dev[y_dev == 0], fp)).mean()), 4)
             for fp in FP_LEVELS}
    report = {"C": HEAD_C, "dev_auc": round(float(roc_auc_score(y_dev, p_dev)), 4), "threshold": round(t, 4),
              "dev_recall": round(float(flagged[y_dev == 1].mean()), 4), "dev_ordinary_fp": None,
              "dev_neg_fp": round(float(flagged[y_dev == 0].mean()), 4),
              "dev_benign_fp": round(float((model.predict(benign_dev) >= 0.5).mean()), 4) if benign_dev else None,
              "dev_recall_at_neg_fp": at_fp, "train_rows": len(train), "dev_rows": len(dev),
              "features": f"char {HEAD_NGRAMS[0]}-{HEAD_NGRAMS[1]}-grams hashed to {N_FEATURES}",
              "threshold_rule": f"lowest with dev abuse-set non-abusive FP <= {NGRAM_NEG_FP_MAX} (no ordinary sentences)"}
    log.info("n-gram head %s: %s", lang, report)
    return model, report


def train_ngram_heads(root: Path, out: Path, languages: tuple[str, ...] = NGRAM_HEADS) -> dict:
    """Fit the n-gram abuse models of ``languages`` (:func:`fit_ngram_head`), write ``<out>/ngram_<lang>.npz``, add them
    (``"combine": "alone"``: the stage scores the language with the model, not its e5 head) and their sources to
    ``<out>/manifest.json`` and name them in its version (``+ngram-<lang>-...``: partials and
    caches keyed by the version change). Deterministic: a refit on the same data writes the same bytes. Returns the
    manifest.

    Raises:
        FileNotFoundError: a source file of one of ``languages`` is missing, or ``<out>/manifest.json``.
    """
    import json

    from rtaudit.engine.hashing import sha256_file

    manifest = json.loads((out / "manifest.json").read_text())
    for lang in languages:
        model, report = fit_ngram_head(root, lang)
        path = out / R.ngram_file(lang)
        model.save(path)
        manifest["artifacts"][R.ngram_file(lang)] = {
            "sha256": sha256_file(path), "bytes": path.stat().st_size, "language": lang,
            "model": "char n-gram TF-IDF (hashed) + logistic regression, offensive (serves the language alone)",
            "combine": "alone", "report": report}
    manifest.setdefault("datasets", {}).update({s.name: {"repo": f"https://github.com/{s.repo}", "commit": s.commit,
                                                         "licence": s.licence} for s in RD.SOURCES if s.language in languages})
    listed = [lang for lang in R.ROMANIZED if R.ngram_file(lang) in manifest["artifacts"]]
    manifest["version"] = str(manifest["version"]).split("+ngram-")[0] + "+ngram-" + "-".join(listed)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest
