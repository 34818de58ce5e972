"""Binary classification and token-overlap metrics (precision, recall, F1) and F1-optimal thresholds."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PRF:
    """Precision, recall, F1 of the positive class, with the support (positives) and n."""

    precision: float
    recall: float
    f1: float
    support: int
    n: int


def prf(y_true: np.ndarray, y_pred: np.ndarray) -> PRF:
    """P/R/F1 of the positive class for 0/1 arrays of equal length (0.0 where undefined)."""
    y_true = np.asarray(y_true).astype(bool)
    y_pred = np.asarray(y_pred).astype(bool)
    tp = int(np.sum(y_true & y_pred))
    fp = int(np.sum(~y_true & y_pred))
    fn = int(np.sum(y_true & ~y_pred))
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return PRF(p, r, f, int(y_true.sum()), len(y_true))


def best_threshold(y_true: np.ndarray, scores: np.ndarray, grid: np.ndarray | None = None) -> tuple[float, float]:
    """``(threshold, F1)`` maximising F1 of ``scores >= threshold`` over ``grid`` (default 0.02..0.98)."""
    grid = np.arange(0.02, 0.99, 0.01) if grid is None else grid
    f1s = [prf(y_true, scores >= t).f1 for t in grid]
    k = int(np.argmax(f1s))
    return float(grid[k]), float(f1s[k])


def best_threshold_macro(y_true: np.ndarray, scores: np.ndarray, groups: np.ndarray,
                         grid: np.ndarray | None = None) -> tuple[float, float]:
    """``(threshold, mean F1)`` maximising the mean over ``groups`` (e.g. datasets) of each group's F1,
    so a large group does not set the operating point for all (default grid 0.02..0.98)."""
    grid = np.arange(0.02, 0.99, 0.01) if grid is None else grid
    names = sorted(set(groups.tolist()))
    masks = [groups == g for g in names]
    f1s = [float(np.mean([prf(y_true[m], scores[m] >= t).f1 for m in masks])) for t in grid]
    k = int(np.argmax(f1s))
    return float(grid[k]), f1s[k]
