"""Online model of a batch's duration, ``d(n) = a·n + b`` seconds (used by the batcher to close
a batch in time for its earliest deadline)."""

from __future__ import annotations

import math
from collections import deque

import numpy as np


class CostModel:
    """Expected batch duration ``d(n) = a·n + b`` seconds, fitted online.

    Fit: least squares of ``seconds ≈ a·n + b`` over the last ``fit_points``
    observations, constrained to ``a >= 0, b >= 0`` (a two-variable non-negative
    least squares solved by its active sets: the unconstrained fit if it is
    feasible, else the better of ``b = 0`` (``a = Σn·s / Σn²``) and ``a = 0``
    (``b = mean s``)). Before ``min_fit_points`` observations with at least two
    distinct sizes, the prior ``(prior_a_s, prior_b_s)`` is used, or, once some
    observations exist but all of one size ``n0``, the proportional guess
    ``a = mean s / n0, b = 0`` (it over-estimates small batches, which only closes
    deadline batches earlier). Non-finite or negative observations are ignored.
    """

    def __init__(self, fit_points: int = 64, min_fit_points: int = 4, prior_a_s: float = 0.0, prior_b_s: float = 0.0) -> None:
        self._obs: deque[tuple[int, float]] = deque(maxlen=fit_points)
        self._min_points = min_fit_points
        self._prior = (prior_a_s, prior_b_s)
        self._coef: tuple[float, float] | None = None

    def observe(self, n: int, seconds: float) -> None:
        """Record that a batch of ``n`` items took ``seconds`` of model time."""
        if n >= 1 and math.isfinite(seconds) and seconds >= 0:
            self._obs.append((n, float(seconds)))
            self._coef = None

    @property
    def points(self) -> int:
        """Observations in the fit window."""
        return len(self._obs)

    @property
    def coefficients(self) -> tuple[float, float]:
        """``(a, b)`` in seconds per item and seconds per batch, both >= 0."""
        if self._coef is None:
            self._coef = self._fit()
        return self._coef

    def predict_s(self, n: int) -> float:
        """Expected seconds for a batch of ``n`` items."""
        a, b = self.coefficients
        return a * n + b if n > 0 else 0.0

    def _fit(self) -> tuple[float, float]:
        if not self._obs:
            return self._prior
        ns = np.fromiter((o[0] for o in self._obs), dtype=np.float64)
        ss = np.fromiter((o[1] for o in self._obs), dtype=np.float64)
        if len(self._obs) < self._min_points or np.unique(ns).size < 2:
            if len(self._obs) < self._min_points and self._prior != (0.0, 0.0):
                return self._prior
            return float(ss.mean() / ns.mean()), 0.0
        design = np.stack([ns, np.ones_like(ns)], axis=1)
        (a, b), *_ = np.linalg.lstsq(design, ss, rcond=None)
        if np.isfinite(a) and np.isfinite(b) and a >= 0 and b >= 0:
            return float(a), float(b)
        a0 = float(ns @ ss / (ns @ ns))  # b = 0
        b0 = float(ss.mean())  # a = 0
        r_a = float(np.sum((ss - a0 * ns) ** 2))
        r_b = float(np.sum((ss - b0) ** 2))
        return (max(a0, 0.0), 0.0) if r_a <= r_b else (0.0, max(b0, 0.0))
