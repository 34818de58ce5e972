"""Contrast twins (a statement and its minimal label-flipping edit) and the pairwise loss that keeps them apart in
fine-tuning (training_data.contrast_pairs, contrast_loss.pair_loss). Inputs are made here; nothing reads ../shared."""

from __future__ import annotations

import numpy as np
import pytest

from rtaudit.modelbuild.text import data as D
from rtaudit.modelbuild.text import contrast_loss as F
from rtaudit.modelbuild.text import training_data as T
from tests.unit.builders import write_dynahate


def _ex(text, hate, uid, twin="", dataset="dynahate", split="train"):
    return D.Example(text, {"hate": hate}, dataset, split, uid, twin=twin)


def test_dynahate_neighbours_with_opposite_labels_are_twins(tmp_path):
    rows = [("I adore the idea of burning all the trans people", 1), ("I abhor the idea of burning all the trans people", 0),
            ("non binary are scum", 1), ("non binary are awesome", 0), ("non binary are great", 0)]
    write_dynahate(tmp_path, rows, [("x are vermin", 1)])
    by_text = {e.text: e for e in D.load("dynahate", tmp_path)}
    uid = {t: by_text[t].uid for t, _ in rows}
    assert by_text["I abhor the idea of burning all the trans people"].twin == uid["I adore the idea of burning all the trans people"]
    assert by_text["non binary are awesome"].twin == uid["non binary are scum"]
    # same label as the row before: no twin; the first row of a file has none
    assert by_text["non binary are great"].twin == "" and by_text["I adore the idea of burning all the trans people"].twin == ""
    # the 0/1 flip across a statement boundary ("... trans people" 0 -> "non binary are scum" 1) is a twin by position
    assert by_text["non binary are scum"].twin == uid["I abhor the idea of burning all the trans people"]


def test_contrast_pairs_keep_alike_train_twins_with_opposite_labels_once():
    ex = [_ex("I adore the idea of burning all the trans people", 1, "0"),
          _ex("I abhor the idea of burning all the trans people", 0, "1", twin="0"),
          _ex("non binary are scum", 1, "2", twin="1"),  # a new statement after the previous: not alike
          _ex("non binary are awesome", 0, "3", twin="2"),
          _ex("women are vermin", 1, "4"), _ex("women are lovely", 0, "5", twin="4", split="dev"),  # dev twin
          _ex("I would love to 🔪 some 👳🏾", 1, "10", twin="11", dataset="hatemoji_build"),
          _ex("I would love to 👏🏽 some 👳🏾", 0, "11", twin="10", dataset="hatemoji_build"),  # both name each other
          _ex("gay men are such crybabies", 1, "6", dataset="davidson"), _ex("gay men are kind", 0, "7", twin="6", dataset="davidson")]
    train = np.array([e.split == "train" for e in ex])
    pairs = T.contrast_pairs(ex, "hate", train)
    assert pairs.dtype == np.int64 and pairs.shape == (3, 2)
    assert sorted(map(tuple, pairs.tolist())) == [(0, 1), (2, 3), (6, 7)]
    assert all(ex[p].labels["hate"] == 1 and ex[n].labels["hate"] == 0 for p, n in pairs)
    # a category no dataset is paired for, and rows outside the train mask, give nothing
    assert T.contrast_pairs(ex, "offensive", train).shape == (0, 2)
    assert T.contrast_pairs(ex, "hate", np.zeros(len(ex), bool)).shape == (0, 2)


def test_with_twins_appends_each_missing_twin_once():
    twins = F.twin_index({0: np.array([[1, 2], [3, 2], [5, 6]])})
    out = F.with_twins(np.array([2, 1, 9]), twins)
    assert out.tolist() == [2, 1, 9, 3]  # 2's twins are 1 (already there) and 3; 9 has none
    assert F.with_twins(np.array([4]), {}).tolist() == [4]


def test_pair_loss_is_ranknet_on_the_paired_column_only():
    torch = pytest.importorskip("torch")
    rows = np.array([10, 11, 12, 13])
    logits = torch.tensor([[0.0, 3.0], [0.0, 1.0], [5.0, -2.0], [0.0, 0.0]], requires_grad=True)
    pairs = {1: np.array([[10, 11], [12, 13], [12, 99]])}  # (12, 99): 99 is not in the batch
    loss = F.pair_loss(logits, rows, pairs)
    want = np.log1p(np.exp(1.0 - 3.0)) + np.log1p(np.exp(0.0 - -2.0))
    assert float(loss.detach()) == pytest.approx(want, rel=1e-6)
    loss.backward()
    # column 0 has no pairs: no gradient; the hateful twin is pushed up, the non-hateful one down
    assert logits.grad[:, 0].abs().sum() == 0
    assert logits.grad[0, 1] < 0 < logits.grad[1, 1] and logits.grad[2, 1] < 0 < logits.grad[3, 1]
    # a tie costs log 2; no pair in the batch costs 0
    assert float(F.pair_loss(torch.zeros(2, 2), np.array([10, 11]), pairs)) == pytest.approx(np.log(2))
    assert float(F.pair_loss(torch.zeros(1, 2), np.array([50]), pairs)) == 0.0
