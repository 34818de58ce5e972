"""Contrast pairs in fine-tuning (``rtaudit text finetune --pair-weight``): which rows are paired, how a batch takes
in its rows' twins, and the pairwise loss on them. Pure but for :func:`pair_loss` (torch); the pairs themselves come
from :func:`rtaudit.modelbuild.text.training_data.contrast_pairs` (docs/text-moderation.md, "Contrast pairs with a
pairwise loss")."""

from __future__ import annotations

import numpy as np


def contrast_pair_columns(examples, train: np.ndarray) -> dict[int, np.ndarray]:
    """Category column → its contrast twins ``int64[P, 2]`` (positive row, negative row) among the ``train``
    rows (``bool[n]``; :func:`rtaudit.modelbuild.text.training_data.contrast_pairs`), for every category that has any."""
    from rtaudit.modelbuild.text import data as D
    from rtaudit.modelbuild.text.training_data import contrast_pairs

    out = {c: contrast_pairs(examples, cat, train) for c, cat in enumerate(D.CATEGORIES)}
    return {c: p for c, p in out.items() if len(p)}


def twin_index(pairs: dict[int, np.ndarray]) -> dict[int, list[int]]:
    """Row index → the row indices it is paired with in any category of ``pairs`` (column → ``int64[P, 2]``), both
    directions."""
    out: dict[int, list[int]] = {}
    for p in pairs.values():
        for a, b in p.tolist():
            out.setdefault(a, []).append(b)
            out.setdefault(b, []).append(a)
    return out


def with_twins(rows: np.ndarray, twins: dict[int, list[int]]) -> np.ndarray:
    """``rows`` (row indices, ``int64[k]``) followed by their twins (:func:`twin_index`) not already among them, each
    once, in order of first mention: ``int64[k + extra]``, ``rows`` itself when nothing is added."""
    if not twins:
        return rows
    seen = set(rows.tolist())
    extra = []
    for r in rows.tolist():
        for t in twins.get(r, ()):
            if t not in seen:
                seen.add(t)
                extra.append(t)
    return np.concatenate([rows, np.array(extra, dtype=rows.dtype)]) if extra else rows


def pair_loss(logits, rows: np.ndarray, pairs: dict[int, np.ndarray]):
    """Summed logistic pairwise loss ``softplus(z_neg - z_pos)`` (RankNet's, Burges et al. 2005, ICML) of every
    contrast pair whose two rows are both in ``rows`` (``logits``: ``float32[len(rows), C]``, the pair's category
    column; ``pairs``: column → ``int64[P, 2]`` (positive row, negative row)): a 0-d tensor, 0.69 per tied pair, → 0
    as the hateful twin's logit rises above the non-hateful one's, 0 when no pair has both rows in ``rows``."""
    import torch

    at = {r: k for k, r in enumerate(rows.tolist())}
    total = logits.new_zeros(())
    for c, p in pairs.items():
        both = [(at[a], at[b]) for a, b in p.tolist() if a in at and b in at]
        if both:
            idx = torch.tensor(both)
            total = total + torch.nn.functional.softplus(logits[idx[:, 1], c] - logits[idx[:, 0], c]).sum()
    return total
