"""Drift of a stage's traffic: what it reads (embeddings) and what it answers (category scores).

Pure code: no Kafka, no environment, no clock but the caller's. The worker feeds each stage's
batches in; Prometheus gauges and the heartbeat read the scores out.

* **Semantic drift** (:class:`SemanticDrift`): the target design's score, 1 − the mean cosine
  similarity between the mean embeddings of consecutive windows of ``window`` items, averaged
  over the last ``pairs`` consecutive pairs. With unit-norm sentence embeddings (MiniLM-L6,
  384-d) two windows of one distribution have nearly the same mean (score near 0); a switch of
  language or topic moves the mean (measured at 256-item windows, tests/unit/test_drift.py:
  Davidson tweets → COLD Chinese posts 0.53, generated English → Chinese posts 0.47; two samples
  of one distribution at most 0.0075 in 20 seeded runs). A window's mean is a running sum:
  ``O(d)`` memory per key, whatever the window size.
* **Score drift** (:func:`psi`, :class:`ScoreDrift`): the population stability index of each
  category score against a reference window captured when a model version goes live,
  ``PSI = Σ_b (a_b − e_b) · ln(a_b / e_b)`` over the bins ``b`` of ``[0, 1]`` (``e``: the
  reference's share of scores in the bin, ``a``: the current window's; shares floored at
  ``PSI_FLOOR`` so an empty bin is finite). Source: N. Siddiqi, *Credit Risk Scorecards*
  (Wiley, 2006), ch. 8, with the usual reading: < 0.1 stable, 0.1–0.25 moderate shift,
  > 0.25 major shift.
* **Joint alert matrix** (:func:`alert_level`): the target design's latency-glitch × drift
  matrix, the same thresholds as ``deploy/prometheus/drift-alerts.yml``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

#: the semantic drift score above which the target design raises an alert.
DRIFT_ALERT = 0.3
#: ``[p99_low_s, p99_high_s)`` and ``[drift_low, drift_high)`` of the ticket cell of the matrix;
#: the page cell is ``p99 > p99_high_s`` with ``drift >= drift_high``.
TICKET_P99_S = (0.8, 2.0)
TICKET_DRIFT = (0.25, 0.4)
#: equal-width bins of ``[0, 1]`` for the PSI of a category score.
PSI_BINS = 10
#: smallest share of a bin in the PSI (an empty bin would make the index infinite).
PSI_FLOOR = 1e-4

AlertLevel = Literal["page", "ticket"]


class SemanticDrift:
    """1 − mean cosine similarity of consecutive windows' mean embeddings.

    The score compares *consecutive* windows: it rises for the window pair that straddles a switch
    and falls back once both windows hold the new traffic. :attr:`held` is the highest score of the
    last ``hold`` windows, so a switch stays visible long enough for an alert's ``for:``.

    Args:
        window: items per window (>= 1).
        pairs: consecutive window pairs averaged in :attr:`score` (>= 1).
        hold: windows :attr:`held` looks back over (>= 1).
    Raises:
        ValueError: ``window`` or ``pairs`` below 1; :meth:`add` with a non-2-D array or a
            dimension other than the first call's.
    """

    def __init__(self, window: int = 256, pairs: int = 1, hold: int = 1) -> None:
        if window < 1 or pairs < 1 or hold < 1:
            raise ValueError(f"window, pairs and hold must be >= 1, got window={window}, pairs={pairs}, hold={hold}")
        self.window, self.pairs = window, pairs
        self._recent: deque[float] = deque(maxlen=hold)
        self._sum: np.ndarray | None = None
        self._n = 0
        self._previous: np.ndarray | None = None
        self._similarities: deque[float] = deque(maxlen=pairs)
        #: windows closed so far.
        self.windows = 0

    @property
    def score(self) -> float | None:
        """The drift score in ``[0, 2]`` (0: same direction; ``None`` until two windows closed)."""
        if not self._similarities:
            return None
        return float(1.0 - sum(self._similarities) / len(self._similarities))

    @property
    def held(self) -> float | None:
        """The highest :attr:`score` of the last ``hold`` closed windows (``None`` before two windows)."""
        return max(self._recent) if self._recent else None

    def add(self, embeddings: np.ndarray) -> list[float]:
        """Add ``float[n, d]`` embeddings (any norm; each row counts once) in order; returns the
        score after each window they closed (empty when none closed or no window came before)."""
        emb = np.asarray(embeddings, dtype=np.float64)
        if emb.ndim != 2:
            raise ValueError(f"embeddings must be float[n, d], got shape {emb.shape}")
        if self._sum is not None and emb.shape[1] != self._sum.shape[0]:
            raise ValueError(f"embedding dimension {emb.shape[1]} differs from the first batch's {self._sum.shape[0]}")
        scores: list[float] = []
        start = 0
        while start < len(emb):
            take = min(self.window - self._n, len(emb) - start)
            chunk = emb[start:start + take].sum(axis=0)
            self._sum = chunk if self._sum is None or self._n == 0 else self._sum + chunk
            self._n += take
            start += take
            if self._n == self.window:
                mean = self._sum / self._n
                if self._previous is not None:
                    self._similarities.append(cosine(self._previous, mean))
                    score = 1.0 - sum(self._similarities) / len(self._similarities)  # = self.score, never None here
                    scores.append(score)
                    self._recent.append(score)
                self._previous, self._n = mean, 0
                self.windows += 1
        return scores


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two ``float[d]`` vectors; 0.0 when either is all zeros."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def histogram(scores: np.ndarray, bins: int = PSI_BINS) -> np.ndarray:
    """Share of ``scores`` (``float[n]`` in ``[0, 1]``; values outside are clipped) in each of
    ``bins`` equal-width bins of ``[0, 1]``, floored at :data:`PSI_FLOOR`; ``float64[bins]``.
    Raises ``ValueError`` for an empty array."""
    s = np.clip(np.asarray(scores, dtype=np.float64), 0.0, 1.0)
    if s.size == 0:
        raise ValueError("no scores to bin")
    counts = np.bincount(np.minimum((s * bins).astype(np.int64), bins - 1), minlength=bins)
    return np.maximum(counts / s.size, PSI_FLOOR)


def psi(reference: np.ndarray, current: np.ndarray, bins: int = PSI_BINS) -> float:
    """Population stability index of ``current`` against ``reference`` (both ``float[n]`` scores
    in ``[0, 1]``; see the module docstring for the formula and its source). >= 0; 0 for the
    same histogram. Raises ``ValueError`` when either is empty."""
    e, a = histogram(reference, bins), histogram(current, bins)
    return float(np.sum((a - e) * np.log(a / e)))


@dataclass
class ScoreDrift:
    """PSI of each category score against a reference window of one model version.

    The first ``reference_size`` items scored by a version are its reference; after that
    the last ``window`` items are the current window. :meth:`add` with another version
    starts a new reference (a new model changes the score distribution on purpose).

    Attributes:
        reference_size: items in the reference window (>= 1).
        window: items in the current window (>= 1).
        version: the model version whose reference is held (``None`` before the first item).
    """

    reference_size: int = 1000
    window: int = 1000
    version: str | None = None
    _reference: dict[str, list[float]] = field(default_factory=dict)
    _current: dict[str, deque[float]] = field(default_factory=dict)
    _reference_n: int = 0

    def __post_init__(self) -> None:
        if self.reference_size < 1 or self.window < 1:
            raise ValueError(f"reference_size and window must be >= 1, got {self.reference_size}, {self.window}")

    @property
    def reference_ready(self) -> bool:
        return self._reference_n >= self.reference_size

    def add(self, version: str, scores: list[dict[str, float]]) -> None:
        """Add one batch's per-item category scores (category → score in ``[0, 1]``) of ``version``."""
        if version != self.version:
            self.version, self._reference, self._current, self._reference_n = version, {}, {}, 0
        for item in scores:
            if self._reference_n < self.reference_size:
                for cat, s in item.items():
                    self._reference.setdefault(cat, []).append(float(s))
                self._reference_n += 1
                continue
            for cat, s in item.items():
                self._current.setdefault(cat, deque(maxlen=self.window)).append(float(s))

    def psi(self) -> dict[str, float]:
        """Category → PSI of the current window against the reference; only categories with a
        full reference and at least one current score (empty before)."""
        if not self.reference_ready:
            return {}
        return {cat: psi(np.asarray(self._reference[cat]), np.asarray(cur))
                for cat, cur in self._current.items() if cur and self._reference.get(cat)}


@dataclass
class DriftReading:
    """One ``(stage, tenant)``'s drift: the semantic score (``None`` before two windows) and PSI per category."""

    stage: str
    tenant: str
    semantic: float | None
    psi: dict[str, float]
    windows: int


class DriftBook:
    """Semantic and score drift per ``(stage, tenant)``; a reading's semantic score is the held one.

    Args:
        window: items per semantic window.
        hold: windows a semantic score is held for (:attr:`SemanticDrift.held`).
        reference_size: items in a version's reference window (PSI).
        psi_window: items in the PSI's current window.
    """

    def __init__(self, window: int = 256, reference_size: int = 1000, psi_window: int = 1000, hold: int = 1) -> None:
        self.window, self.reference_size, self.psi_window, self.hold = window, reference_size, psi_window, hold
        self._semantic: dict[tuple[str, str], SemanticDrift] = {}
        self._scores: dict[tuple[str, str], ScoreDrift] = {}

    def add_embeddings(self, stage: str, tenant: str, embeddings: np.ndarray) -> list[float]:
        """Feed ``float[n, d]`` embeddings of ``tenant``'s items; returns the scores of windows closed."""
        key = (stage, tenant)
        if key not in self._semantic:
            self._semantic[key] = SemanticDrift(self.window, hold=self.hold)
        return self._semantic[key].add(embeddings)

    def add_scores(self, stage: str, tenant: str, version: str, scores: list[dict[str, float]]) -> None:
        """Feed the category scores of ``tenant``'s items scored by ``version``."""
        key = (stage, tenant)
        if key not in self._scores:
            self._scores[key] = ScoreDrift(self.reference_size, self.psi_window)
        self._scores[key].add(version, scores)

    def readings(self) -> list[DriftReading]:
        """Every ``(stage, tenant)`` seen, sorted."""
        out = []
        for key in sorted(set(self._semantic) | set(self._scores)):
            sem, sc = self._semantic.get(key), self._scores.get(key)
            out.append(DriftReading(key[0], key[1], sem.held if sem else None, sc.psi() if sc else {},
                                    sem.windows if sem else 0))
        return out


def alert_level(p99_s: float, drift: float) -> AlertLevel | None:
    """The joint matrix's cell: ``page`` (and trip the circuit breaker) for P99 > 2 s with drift
    >= 0.4; ``ticket`` (and mark samples for review) for P99 in [0.8, 2] s with drift in
    [0.25, 0.4); ``None`` otherwise. ``p99_s`` in seconds, ``drift`` the semantic score."""
    if p99_s > TICKET_P99_S[1] and drift >= TICKET_DRIFT[1]:
        return "page"
    if TICKET_P99_S[0] <= p99_s <= TICKET_P99_S[1] and TICKET_DRIFT[0] <= drift < TICKET_DRIFT[1]:
        return "ticket"
    return None
