"""Measure a text scorer against the evasion suite and the benign list.

``evasion_report(score, offensive, seed=0, threshold=0.5)`` scores the clean
offensive texts and every :mod:`rtaudit.modelbuild.text.evasion` variant of them, and the
:mod:`rtaudit.modelbuild.text.benign` list; it returns recall per technique, recall relative
to the clean forms (issue 4's target: ≥ 0.95) and the false-positive rate on the
benign list (target: ≤ 1 %). ``score`` is any batch function
``list[str] -> float[n]`` (probability of the offensive class; for a model
with several categories pass the largest category score, "flagged for
anything"); :func:`normalized` wraps a raw model so that it scores the
normalized model view. A pipeline that already normalizes (the text stage) is
passed as it is; normalizing twice changes nothing, as ``normalize`` is
idempotent on its own output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rtaudit.modelbuild.text.benign import BENIGN
from rtaudit.modelbuild.text.evasion import TECHNIQUES, evasion_variant
from rtaudit.engine.text.normalize import normalize

__all__ = ["EvasionReport", "ScoreFn", "evasion_report", "format_reports", "newly_flagged", "normalized"]

#: a batch scorer: ``n`` texts → ``float[n]`` probabilities of the offensive class
ScoreFn = Callable[[list[str]], np.ndarray]


def normalized(score: ScoreFn) -> ScoreFn:
    """``score`` applied to :func:`rtaudit.engine.text.normalize.normalize`'s model view of each text."""

    def score_normalized(texts: list[str]) -> np.ndarray:
        return score([normalize(t).text for t in texts])

    return score_normalized


@dataclass(frozen=True)
class EvasionReport:
    """Results of one scorer on the suite.

    ``recall[name]`` is the fraction of the ``n_offensive`` texts scoring at
    least ``threshold`` for ``name`` in ``("clean", *TECHNIQUES)``;
    ``relative[t] = recall[t] / recall["clean"]``. ``benign_fp_rate`` is the
    fraction of the ``n_benign`` benign texts flagged, ``benign_fp_by_category``
    the same per category, and ``benign_flagged`` the flagged texts themselves.
    """

    label: str
    threshold: float
    n_offensive: int
    n_benign: int
    recall: dict[str, float]
    relative: dict[str, float]
    benign_fp_rate: float
    benign_fp_by_category: dict[str, float]
    benign_flagged: tuple[str, ...]

    @property
    def worst_relative(self) -> float:
        """The smallest recall relative to clean across techniques."""
        return min(self.relative.values())


def evasion_report(
    score: ScoreFn,
    offensive: Sequence[str],
    *,
    label: str = "",
    seed: int = 0,
    threshold: float = 0.5,
    techniques: Sequence[str] = TECHNIQUES,
) -> EvasionReport:
    """Score ``offensive`` clean and under each technique, and the benign list, in one batch call each.

    Raises ``ValueError`` if ``offensive`` is empty or ``score`` returns the wrong number of scores.
    """
    if not offensive:
        raise ValueError("evasion_report needs at least one offensive text")
    sets = {"clean": list(offensive)}
    sets.update({t: [evasion_variant(x, t, seed) for x in offensive] for t in techniques})
    benign = [b.text for b in BENIGN]

    def flagged(texts: list[str]) -> np.ndarray:
        scores = np.asarray(score(texts), dtype=np.float64)
        if scores.shape != (len(texts),):
            raise ValueError(f"scorer returned shape {scores.shape} for {len(texts)} texts")
        return scores >= threshold

    recall = {name: float(flagged(texts).mean()) for name, texts in sets.items()}
    clean = recall["clean"]
    relative = {t: (recall[t] / clean if clean else 0.0) for t in techniques}
    benign_hits = flagged(benign)
    by_category: dict[str, list[bool]] = {}
    for b, hit in zip(BENIGN, benign_hits):
        by_category.setdefault(b.category, []).append(bool(hit))
    return EvasionReport(
        label=label,
        threshold=threshold,
        n_offensive=len(offensive),
        n_benign=len(benign),
        recall=recall,
        relative=relative,
        benign_fp_rate=float(benign_hits.mean()),
        benign_fp_by_category={c: sum(h) / len(h) for c, h in by_category.items()},
        benign_flagged=tuple(t for t, hit in zip(benign, benign_hits) if hit),
    )


def format_reports(reports: Sequence[EvasionReport]) -> str:
    """A plain-text table: a row per clean/technique with each report's recall and recall relative to clean."""
    cols = [f"{r.label} {what}" for r in reports for what in ("recall", "rel.")]
    width = max(12, *(len(c) for c in cols))
    lines = [f"{'technique':<14}" + "".join(f" {c:>{width}}" for c in cols)]
    lines.append("-" * len(lines[0]))
    for name in reports[0].recall:
        cells = []
        for r in reports:
            cells += [f"{r.recall[name]:.3f}", "" if name == "clean" else f"{r.relative[name]:.2f}"]
        lines.append(f"{name:<14}" + "".join(f" {c:>{width}}" for c in cells))
    cells = []
    for r in reports:
        cells += [f"{r.benign_fp_rate:.3f}", ""]
    lines.append(f"{'benign FP':<14}" + "".join(f" {c:>{width}}" for c in cells))
    return "\n".join(lines)


def newly_flagged(score: ScoreFn, benign: Sequence[str], *, threshold: float = 0.5) -> tuple[float, float, list[str]]:
    """Does normalization invent flags? Score ``benign`` raw and normalized.

    Returns ``(raw_rate, normalized_rate, texts)``: the flag rates without and
    with normalization, and the texts flagged only after normalization.
    """
    raw = np.asarray(score(list(benign))) >= threshold
    norm = np.asarray(normalized(score)(list(benign))) >= threshold
    return float(raw.mean()), float(norm.mean()), [t for t, r, n in zip(benign, raw, norm) if n and not r]
