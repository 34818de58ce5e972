"""What ``rtaudit eval`` measures, as plain functions over a :class:`~rtaudit.engine.text.scoring.TextScorer`.

* :func:`classification` — per dataset and category on the dev splits (COLD's dev,
  the Jigsaw sample as an extra test): precision, recall, F1 at the calibrated
  threshold (score ≥ 0.5), and macro-F1 = the mean F1 over the categories the
  dataset labels. Baseline: alt-profanity-check alone on the raw text, its
  probability ≥ 0.5 taken as the prediction for every category.
* :func:`evidence_f1` — token-level F1 against HateXplain's rationales on its dev
  (val) split: posts whose majority label is hatespeech/offensive and that have
  rationales (a fixed sample of :data:`EVIDENCE_N`); a token is gold when a majority
  of the annotators who gave rationales marked it, predicted when an evidence span
  overlaps it; micro-averaged over tokens. Baseline: alt-profanity-check's per-word spans.
* :func:`evasion` — the evasion suite and benign list of
  :mod:`rtaudit.modelbuild.text.robustness` on offensive dev texts (recall relative to clean).
* :func:`hatemoji` — HatemojiBuild (Kirk et al. 2022, CC BY 4.0; emoji-based hate) validation
  or test split: macro-F1 over both classes of ``label_gold`` (scikit-learn ``average="macro"``),
  flagged = ``hate`` ≥ 0.5 (the target's reading: ``label_gold`` marks hate at a protected group, and the
  set's non-hateful rows include abuse aimed elsewhere, "I wanna 🔥 the politicians", that ``offensive`` or
  ``violence`` rightly flag) and = any category ≥ 0.5 (the policy's view). The test split is for reporting
  only: training and model selection never read it.
* :func:`safety` — ``violence`` and ``self-harm`` on the held-out (``test``) splits of the safety sets
  (ThreatGram 101, Suicide Detection; :mod:`rtaudit.modelbuild.text.data`; never trained or tuned on):
  precision, recall, F1 and false-positive rate at score ≥ 0.5, and each category's false positives
  on the benign list. Also HatemojiBuild's test threats (``violence``), reported only.
* :func:`conversation` — the held-out (``test``) split of the Chit-Chat corpus (people chatting; negatives
  only, never read by training): the share of messages flagged by each category and by any, and by
  alt-profanity-check alone (baseline), for a hash sample and for its messages that laugh (:data:`LAUGHTER`).
* :func:`emoji_chat` — written benign chat with gesture and person emoji, in no tone and each skin tone: the share
  flagged per tone (:func:`rtaudit.modelbuild.text.benign.emoji_chat`).
* :func:`probes` — the threat and self-harm sentences of issue 12 and their benign controls.
* :func:`throughput` — texts/s of the scorer with evidence, batch 1 vs batch 64.

``quick=True`` uses fixed samples (the first items by a seeded hash of their id)
so the whole run takes well under a minute on 2 CPU cores.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rtaudit.modelbuild.text import data as D
from rtaudit.modelbuild.text.metrics import PRF, prf
from rtaudit.engine.text.scoring import TextScorer

EVAL_SETS: tuple[tuple[str, str], ...] = (("davidson", "dev"), ("olid", "dev"), ("hatexplain", "dev"), ("cold", "dev"),
                                          ("jigsaw_sample", "test"))
QUICK_N = 100
#: HateXplain dev posts for evidence F1 (occlusion re-encodes every word: ~25 encoder passes per post).
EVIDENCE_N, EVIDENCE_QUICK_N = 200, 30


def sample(rows: list, n: int | None, seed: int = D.SPLIT_SEED) -> list:
    """The first ``n`` rows ordered by sha256(seed:uid) (all rows, in that order, if ``n`` is None)."""
    key = lambda r: hashlib.sha256(f"{seed}:{r.uid}".encode()).digest()  # noqa: E731
    rows = sorted(rows, key=key)
    return rows if n is None else rows[:n]


@dataclass(frozen=True)
class CategoryRow:
    dataset: str
    split: str
    category: str
    model: PRF
    baseline: PRF


@dataclass(frozen=True)
class DatasetRow:
    dataset: str
    split: str
    n: int
    macro_f1: float
    baseline_macro_f1: float


def score_matrix(scorer: TextScorer, texts: list[str], batch_size: int = 256) -> list[dict[str, float]]:
    """Category scores per text (no evidence), in batches."""
    out: list[dict[str, float]] = []
    for lo in range(0, len(texts), batch_size):
        out.extend(dict(r.scores) for r in scorer.score(texts[lo:lo + batch_size], evidence=False))
    return out


def classification(scorer: TextScorer, root: Path, *, quick: bool = False,
                   max_rows: int | None = None) -> tuple[list[CategoryRow], list[DatasetRow]]:
    """Per-category and per-dataset rows for every set of :data:`EVAL_SETS` (see the module docstring).

    ``max_rows`` caps each set at its first rows in the seeded hash order (``quick``: :data:`QUICK_N`).
    """
    cats: list[CategoryRow] = []
    sets: list[DatasetRow] = []
    for name, split in EVAL_SETS:
        rows = sample(D.load(name, root, split), QUICK_N if quick else max_rows)
        texts = [r.text for r in rows]
        ours = score_matrix(scorer, texts)
        base = scorer.lexical.score_texts(texts) >= 0.5
        categories = [c for c in D.CATEGORIES if any(c in r.labels for r in rows)]
        f1s, bf1s = [], []
        for c in categories:
            y = np.array([r.labels[c] for r in rows])
            pred = np.array([s.get(c, 0.0) >= 0.5 for s in ours])
            m, b = prf(y, pred), prf(y, base)
            cats.append(CategoryRow(name, split, c, m, b))
            f1s.append(m.f1)
            bf1s.append(b.f1)
        sets.append(DatasetRow(name, split, len(rows), float(np.mean(f1s)), float(np.mean(bf1s))))
    return cats, sets


def _token_offsets(tokens: tuple[str, ...]) -> list[tuple[int, int]]:
    out, pos = [], 0
    for t in tokens:
        out.append((pos, pos + len(t)))
        pos += len(t) + 1
    return out


def _token_prf(rows: list, spans_per_row: list[list[tuple[int, int]]]) -> PRF:
    gold, pred = [], []
    for r, spans in zip(rows, spans_per_row):
        for (s, e), g in zip(_token_offsets(r.tokens), r.rationale):
            gold.append(g)
            pred.append(any(s < se and ss < e for ss, se in spans))
    return prf(np.array(gold), np.array(pred))


def evidence_rows(root: Path, quick: bool = False) -> list:
    """HateXplain dev posts used for evidence F1 (abusive majority label, with a majority rationale)."""
    rows = [r for r in D.load("hatexplain", root, "dev") if r.labels["offensive"] and r.rationale and any(r.rationale)]
    return sample(rows, EVIDENCE_QUICK_N if quick else EVIDENCE_N)


def evidence_f1(scorer: TextScorer, root: Path, *, quick: bool = False) -> tuple[PRF, PRF, int]:
    """``(model, baseline, posts)`` token-level P/R/F1 against HateXplain rationales (module docstring)."""
    rows = evidence_rows(root, quick)
    texts = [r.text for r in rows]
    ours: list[list[tuple[int, int]]] = []
    for lo in range(0, len(texts), 64):
        ours.extend([(s.start, s.end) for s in res.spans] for res in scorer.score(texts[lo:lo + 64]))
    base = [[ev.span for ev in out.evidence if ev.span is not None] for out in scorer.lexical.score_with_spans(texts)]
    return _token_prf(rows, ours), _token_prf(rows, base), len(rows)


def evasion(scorer: TextScorer, root: Path, *, quick: bool = False):
    """``(model report, baseline report)`` of :func:`rtaudit.modelbuild.text.robustness.evasion_report`.

    Offensive texts: dev rows labelled offensive from Davidson, OLID and HateXplain
    (40 each, 10 with ``quick``); "flagged" = any category ≥ 0.5 (model) or
    alt-profanity-check ≥ 0.5 on the raw text (baseline).
    """
    from rtaudit.modelbuild.text.robustness import evasion_report

    n = 10 if quick else 40
    offensive = [r.text for d in ("davidson", "olid", "hatexplain")
                 for r in sample([r for r in D.load(d, root, "dev") if r.labels["offensive"]], n)]

    def ours(texts: list[str]) -> np.ndarray:
        return np.array([max(s.values()) for s in score_matrix(scorer, texts)])

    return (evasion_report(ours, offensive, label="rtaudit-text"),
            evasion_report(scorer.lexical.score_texts, offensive, label="alt-profanity-check"))


def hatemoji(scorer: TextScorer, root: Path, split: str = "dev") -> dict[str, float]:
    """``{"rows", "macro_f1", "macro_f1_hate", "flagged_non_hateful"}`` on HatemojiBuild's ``split``
    (``dev`` = its validation file, ``test``); see the module docstring. ``flagged_non_hateful`` is
    the share of non-hateful rows with some category ≥ 0.5."""
    from sklearn.metrics import f1_score

    rows = D.load("hatemoji_build", root, split)
    y = np.array([r.labels["hate"] for r in rows])
    scores = score_matrix(scorer, [r.text for r in rows], batch_size=128)
    flagged = np.array([max(s.values()) >= 0.5 for s in scores])
    hate = np.array([s.get("hate", 0.0) >= 0.5 for s in scores])
    return {"rows": len(rows), "macro_f1": float(f1_score(y, flagged, average="macro")),
            "macro_f1_hate": float(f1_score(y, hate, average="macro")), "flagged_non_hateful": float(flagged[y == 0].mean())}


#: the held-out splits :func:`safety` reads: (dataset, split, category, root: "safety" | "shared").
SAFETY_SETS: tuple[tuple[str, str, str, str], ...] = (("threatgram101", "test", "violence", "safety"),
                                                      ("suicide_detection", "test", "self-harm", "safety"),
                                                      ("hatemoji_build", "test", "violence", "shared"),
                                                      ("dynahate", "test", "hate", "safety"),
                                                      ("toxigen", "test", "hate", "safety"))
#: issue 12's threat and self-harm sentences (text, the category that must flag it) and benign
#: controls that share their words (no new category may flag them).
PROBES: tuple[tuple[str, str | None], ...] = (
    ("I will kill you", "violence"), ("I'll shoot you tomorrow", "violence"), ("kys", "self-harm"),
    ("I want to end my life", "self-harm"),
    ("I will kill it at the gym tomorrow", None), ("this song kills", None), ("I could die laughing", None),
    ("shoot me an email", None))


@dataclass(frozen=True)
class SafetyRow:
    dataset: str
    split: str
    category: str
    model: PRF
    false_positive_rate: float


def safety(scorer: TextScorer, root: Path, safety_root: Path, *, quick: bool = False) -> tuple[list[SafetyRow], dict]:
    """``(rows, benign)``: one :class:`SafetyRow` per set of :data:`SAFETY_SETS` (a set of
    :data:`~rtaudit.modelbuild.text.data.EVALUATION_ONLY_SETS` whose files are absent is left out; ``quick``: the first
    :data:`QUICK_N` × 3 rows in seeded hash order), and ``benign`` = ``{"n": texts, category: [flagged
    texts]}`` for each safety category on the benign list (score ≥ 0.5)."""
    from rtaudit.modelbuild.text.benign import BENIGN_TEXTS

    out: list[SafetyRow] = []
    for name, split, cat, where in SAFETY_SETS:
        if name in D.EVALUATION_ONLY_SETS and not all(p.is_file() for p in D.safety_files(safety_root)[name]):
            continue  # an evaluation-only set not fetched: its row alone is left out
        rows = sample(D.load(name, safety_root if where == "safety" else root, split), 3 * QUICK_N if quick else None)
        y = np.array([r.labels[cat] for r in rows])
        pred = np.array([s.get(cat, 0.0) >= 0.5 for s in score_matrix(scorer, [r.text for r in rows])])
        out.append(SafetyRow(name, split, cat, prf(y, pred), float(pred[y == 0].mean()) if (y == 0).any() else 0.0))
    scores = score_matrix(scorer, list(BENIGN_TEXTS))
    benign: dict = {"n": len(BENIGN_TEXTS)}
    for cat in D.SAFETY_CATEGORIES:
        benign[cat] = [t for t, s in zip(BENIGN_TEXTS, scores) if s.get(cat, 0.0) >= 0.5]
    return out, benign


#: a message that laughs: the tweet sets' laughter is mostly at someone, and a head fitted on them read
#: "lol" and "haha so funny" as abuse (docs/text-moderation.md).
LAUGHTER = re.compile(r"\b(?:l+o+l+(?:o+l+)*|lmf?a+o+|rofl|(?:ha){2,}a*h?|(?:he){2,}h?|hilarious|funny)\b", re.IGNORECASE)
#: Chit-Chat test messages :func:`conversation` reads (a seeded hash sample; ``quick``: :data:`QUICK_N` × 3).
CONVERSATION_N = 3000


@dataclass(frozen=True)
class ConversationRow:
    """One row of the conversation table of ``rtaudit eval``: shares (0-1) of Chit-Chat test messages flagged."""

    subset: str  # "messages" | "messages that laugh"
    n: int
    flagged_rate: dict[str, float]  # category -> share of messages at score >= 0.5
    any_rate: float
    baseline_rate: float  # share alt-profanity-check alone scores >= 0.5
    examples: tuple[str, ...]  # up to 5 flagged messages


def conversation(scorer: TextScorer, safety_root: Path, *, quick: bool = False) -> list[ConversationRow]:
    """False positives on conversation, Chit-Chat's test split: one :class:`ConversationRow` for the first
    :data:`CONVERSATION_N` messages in seeded hash order (``quick``: :data:`QUICK_N` × 3) and one for as many
    of its messages matching :data:`LAUGHTER`.

    Raises:
        FileNotFoundError: the Chit-Chat file is not under ``safety_root``."""
    from rtaudit.engine.models.profanity import ProfanityScorer

    n = 3 * QUICK_N if quick else CONVERSATION_N
    rows = sample(D.load("chitchat", safety_root, "test"), None)
    out = []
    for subset, picked in (("messages", rows[:n]), ("messages that laugh", [r for r in rows if LAUGHTER.search(r.text)][:n])):
        texts = [r.text for r in picked]
        scores = score_matrix(scorer, texts)
        flagged = [max(s.values(), default=0.0) >= 0.5 for s in scores]
        cats = sorted({c for s in scores for c in s})
        out.append(ConversationRow(subset, len(texts), {c: float(np.mean([s.get(c, 0.0) >= 0.5 for s in scores])) for c in cats},
                                   float(np.mean(flagged)) if texts else 0.0,
                                   float(np.mean(np.asarray(ProfanityScorer().score_texts(texts)) >= 0.5)) if texts else 0.0,
                                   tuple(t for t, f in zip(texts, flagged) if f)[:5]))
    return out


def emoji_chat(scorer: TextScorer) -> list[tuple[str, int, float, tuple[str, ...]]]:
    """False positives on benign chat with emoji in each skin tone (:func:`rtaudit.modelbuild.text.benign.emoji_chat`):
    ``(tone, n, share flagged by any category ≥ 0.5, up to 3 flagged texts)`` per key of
    :data:`~rtaudit.modelbuild.text.benign.SKIN_TONES`, each tone's texts scored as one batch."""
    from rtaudit.modelbuild.text.benign import SKIN_TONES
    from rtaudit.modelbuild.text.benign import emoji_chat as chat_texts

    out = []
    for tone in SKIN_TONES:
        texts = chat_texts(tone)
        flagged = [max(s.values(), default=0.0) >= 0.5 for s in score_matrix(scorer, texts)]
        out.append((tone, len(texts), float(np.mean(flagged)), tuple(t for t, f in zip(texts, flagged) if f)[:3]))
    return out


def probes(scorer: TextScorer) -> list[tuple[str, str | None, dict[str, float]]]:
    """``(text, expected category or None, scores)`` for each of :data:`PROBES`."""
    return [(t, c, s) for (t, c), s in zip(PROBES, score_matrix(scorer, [t for t, _ in PROBES]))]


def throughput(scorer: TextScorer, root: Path, *, quick: bool = False, batch_size: int = 64) -> dict[str, float]:
    """Texts/s with evidence on, batch 1 vs ``batch_size`` (the worker's text micro-batch), on dev texts
    (a mix of Davidson, OLID and HateXplain)."""
    texts = [r.text for d in ("davidson", "olid", "hatexplain") for r in sample(D.load(d, root, "dev"), 24 if quick else 96)]
    single = texts[: len(texts) // 4]
    scorer.score(texts[:8])  # warm-up

    def rate(items: list[str], bs: int) -> float:
        started = time.perf_counter()
        for lo in range(0, len(items), bs):
            scorer.score(items[lo:lo + bs])
        return len(items) / (time.perf_counter() - started)

    one, batched = rate(single, 1), rate(texts, batch_size)
    return {"batch_1_texts_per_s": one, f"batch_{batch_size}_texts_per_s": batched, "speedup": batched / one}
