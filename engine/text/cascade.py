"""The English second stage: texts the fast path (MiniLM + alt-profanity-check) is unsure of are read again
by a stronger model, multilingual-e5-small with English heads, and the two scores are blended.

* **Band** (:class:`CascadeBand`): a text goes to the strong model when its highest fast category score lies in
  ``[low, high]`` (the fast path's uncertain region around its 0.5 operating point). The policy names one of
  :data:`PROFILES` (``text_cascade`` setting); ``off`` sends nothing.
* **Strong head** (:class:`StrongHead`): one logistic regression per category on the L2-normalised e5 embedding
  (``float32[384]``), ``sigmoid(w·e + b - shift)``, ``shift`` the logit of the category's threshold so 0.5 is its
  operating point like every other text score; fitted by ``rtaudit text train-cascade``
  (:mod:`rtaudit.modelbuild.text.cascade_train`) on the train splits of Davidson, OLID and HateXplain.
* **Blend** (:func:`blend`): per category the strong head has, the mean of the fast and strong probabilities (an
  equal-weight average fixed a priori, not tuned on any split); the other categories keep the fast score.

The measured Pareto table (macro-F1 on the English dev sets against texts/s per profile) is printed by
``rtaudit eval --cascade`` and kept in docs/text-moderation.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from rtaudit.engine.text.e5_stage import MultilingualStage

log = logging.getLogger(__name__)

#: file of the strong English head, in the e5 artifacts directory (``multilingual_e5/``), listed in its manifest.
STRONG_HEAD = "en_cascade.npz"


@dataclass(frozen=True)
class CascadeBand:
    """Fast-path scores in ``[low, high]`` (probabilities) are sent to the strong model.

    Raises:
        ValueError: not ``0 <= low < 0.5 < high <= 1`` (the band must hold the 0.5 operating point).
    """

    low: float
    high: float

    def __post_init__(self) -> None:
        if not (0.0 <= self.low < 0.5 < self.high <= 1.0):
            raise ValueError(f"cascade band [{self.low}, {self.high}] must satisfy 0 <= low < 0.5 < high <= 1")

    def selects(self, fast: np.ndarray) -> np.ndarray:
        """``bool[n]``: rows of ``fast`` (``float64[n, C]`` category probabilities) whose highest score is in the band."""
        if len(fast) == 0:
            return np.zeros(0, dtype=bool)
        top = np.asarray(fast, dtype=np.float64).max(axis=1)
        return np.asarray((top >= self.low) & (top <= self.high), dtype=bool)


#: the policy's profiles (the seed's names): narrower band = fewer texts sent = closer to the fast path's speed.
PROFILES: dict[str, CascadeBand | None] = {
    "off": None,
    "conservative": CascadeBand(0.4, 0.6),
    "balanced": CascadeBand(0.25, 0.75),
    "aggressive": CascadeBand(0.1, 0.9),
}


def profile(name: str) -> CascadeBand | None:
    """The band of profile ``name`` (``None`` for ``off``).

    Raises:
        ValueError: an unknown profile (the message lists the known ones).
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown cascade profile {name!r}: one of {', '.join(PROFILES)}") from None


@dataclass(frozen=True)
class StrongHead:
    """Per-category logistic regressions on e5 embeddings.

    Attributes:
        categories: output order.
        w: ``float32[C, 384]``. b, shift: ``float64[C]`` (logit units).
    """

    categories: tuple[str, ...]
    w: np.ndarray
    b: np.ndarray
    shift: np.ndarray

    def predict(self, emb: np.ndarray) -> np.ndarray:
        """``float32[n, 384]`` unit-norm embeddings → ``float64[n, C]`` probabilities (0.5: each category's threshold)."""
        z = np.asarray(emb, dtype=np.float64) @ self.w.astype(np.float64).T + self.b - self.shift
        return np.asarray(1.0 / (1.0 + np.exp(-z)), dtype=np.float64)

    def save(self, path: Path) -> None:
        np.savez(path, categories=np.array(self.categories), w=self.w.astype(np.float32),
                 b=self.b.astype(np.float64), shift=self.shift.astype(np.float64))

    @classmethod
    def load(cls, path: Path) -> "StrongHead":
        z = np.load(path, allow_pickle=False)
        return cls(tuple(str(c) for c in z["categories"]), z["w"].astype(np.float32), z["b"].astype(np.float64),
                   z["shift"].astype(np.float64))


def blend(fast: np.ndarray, fast_categories: tuple[str, ...], strong: np.ndarray,
          strong_categories: tuple[str, ...]) -> np.ndarray:
    """``float64[n, C_fast]``: ``fast`` with each category the strong head also scores replaced by the mean of the two.

    Raises:
        ValueError: ``fast`` and ``strong`` have different row counts.
    """
    if len(fast) != len(strong):
        raise ValueError(f"blend: {len(fast)} fast rows but {len(strong)} strong rows")
    out = np.array(fast, dtype=np.float64, copy=True)
    for j, c in enumerate(strong_categories):
        if c in fast_categories:
            k = fast_categories.index(c)
            out[:, k] = (out[:, k] + strong[:, j]) / 2.0
    return out


def cascade(fast: np.ndarray, fast_categories: tuple[str, ...], band: CascadeBand | None,
            strong_scores: Callable[[np.ndarray], np.ndarray], head: StrongHead) -> tuple[np.ndarray, np.ndarray]:
    """Apply the band: ``(scores float64[n, C_fast], sent bool[n])``.

    ``strong_scores(idx) -> float64[k, C_strong]`` scores the selected rows ``idx`` (``int[k]``) with the strong
    model; it is not called when nothing is selected (or ``band`` is ``None``).
    """
    sent = band.selects(fast) if band is not None else np.zeros(len(fast), dtype=bool)
    if not sent.any():
        return np.asarray(fast, dtype=np.float64), sent
    idx = np.flatnonzero(sent)
    out = np.array(fast, dtype=np.float64, copy=True)
    out[idx] = blend(out[idx], fast_categories, strong_scores(idx), head.categories)
    return out, sent


def load_cascade(name: str, semantic: "MultilingualStage | None",
                 base: Path | None = None) -> tuple[CascadeBand | None, StrongHead | None]:
    """The band of profile ``name`` and the strong head of ``<base>/multilingual_e5`` (default: the shipped
    artifacts). ``(None, None)`` for ``off``, and where the e5 stage cannot run (``semantic`` is ``None``) or the
    artifacts hold no strong head: logged, the fast path alone serves.

    Raises:
        ValueError: an unknown profile.
        rtaudit.engine.text.heads.ArtifactError: the head fails its sha256.
    """
    band = profile(name)
    if band is None:
        return None, None
    from rtaudit.engine.text.e5_heads import artifacts_dir
    from rtaudit.engine.text.heads import load_manifest, verified_path

    root = artifacts_dir(base)
    if semantic is None or STRONG_HEAD not in load_manifest(root).get("artifacts", {}):
        log.warning("cascade %r off: %s", name, "no multilingual encoder" if semantic is None else f"no {STRONG_HEAD} in {root}")
        return None, None
    return band, StrongHead.load(verified_path(STRONG_HEAD, root))
