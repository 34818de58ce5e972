"""Identity terms and the identity-balanced sample weights: a group named in a text is not itself a reason for a label
(training_data.identity_balanced, Zhang et al. 2020). Inputs are made here; nothing reads ../shared."""

from __future__ import annotations

import numpy as np
import pytest

from rtaudit.modelbuild.text import data as D
from rtaudit.modelbuild.text import training_data as T
from rtaudit.modelbuild.text.identity_terms import IDENTITY_TERMS, identity_key


@pytest.mark.parametrize(("text", "key"), [
    ("Jews and Muslims live here", "jewish"), ("I met two MUSLIMS today", "muslim"), ("women in tech", "women"),
    ("black people are welcome", "black"), ("Refugees arrived", "refugee"), ("the trans community", "trans"),
    ("immigration policy", "immigrant"), ("gay and lesbian couples", "gay"), ("a deaf student", "deaf"),
])
def test_identity_key_is_the_first_group_named(text, key):
    assert identity_key(text) == key


@pytest.mark.parametrize("text", ["the menu is great", "transport was late", "a blacksmith", "nice weather today",
                                  "womenswear sale", "the island"])
def test_identity_key_needs_a_whole_word(text):
    assert identity_key(text) is None


def test_every_key_is_a_valid_group_name():
    assert all(k.isidentifier() for k in IDENTITY_TERMS)


def _rows(rng, n, share_positive):
    return (rng.random(n) < share_positive).astype(int)


def test_identity_balanced_makes_the_label_independent_of_the_group():
    rng = np.random.default_rng(7)
    # dataset "a": rows naming "black" are 80 % positive, rows naming "women" 70 %, the rest 40 %
    y = np.concatenate([_rows(rng, 2000, 0.8), _rows(rng, 1500, 0.7), _rows(rng, 6000, 0.4)])
    keys = np.array(["black"] * 2000 + ["women"] * 1500 + [""] * 6000)
    datasets = np.array(["a"] * len(y))
    base = T.balanced_weights(y, datasets)
    w = base * T.identity_balanced(y, datasets, keys)
    prior = (base * y).sum() / base.sum()
    for z in ("black", "women", ""):
        m = keys == z
        before = (base[m] * y[m]).sum() / base[m].sum()
        after = (w[m] * y[m]).sum() / w[m].sum()
        assert abs(after - prior) < 0.03, (z, before, after, prior)
    for c in (0, 1):  # each (dataset, class) cell keeps its total
        assert w[y == c].sum() == pytest.approx(base[y == c].sum())


def test_identity_balanced_is_neutral_where_there_is_nothing_to_balance():
    y = np.array([1] * 50 + [0] * 50 + [1] * 30)
    keys = np.array(["black"] * 25 + [""] * 25 + ["black"] * 25 + [""] * 25 + ["women"] * 30)
    datasets = np.array(["a"] * 100 + ["positives_only"] * 30)
    f = T.identity_balanced(y, datasets, keys)
    np.testing.assert_allclose(f, 1.0)


def test_identity_balanced_factors_are_bounded():
    y = np.array([1] * 200 + [0] * 1 + [0] * 500 + [1] * 20)
    keys = np.array(["black"] * 201 + [""] * 520)
    f = T.identity_balanced(y, np.array(["a"] * len(y)), keys)
    ratio = f.max() / f.min()
    assert ratio <= T.IDENTITY_MAX_FACTOR ** 2 + 1e-9


def test_category_weights_balance_identity_only_where_listed():
    texts = ["Muslims are vermin"] * 8 + ["Muslims run the bakery"] * 2 + ["you are vermin"] * 2 + ["nice day"] * 8
    y = np.array([1] * 8 + [0] * 2 + [1] * 2 + [0] * 8)
    train = np.ones(2 * len(texts), bool)
    rows = [D.Example(t, {"hate": int(v), "offensive": int(v)}, d, "train", f"{d}{i}")
            for d in ("dynahate", "davidson") for i, (t, v) in enumerate(zip(texts, y))]
    y2 = np.concatenate([y, y])
    hate = T.category_weights("hate", rows, y2, train)
    plain = T.balanced_weights(y2, np.array([r.dataset for r in rows]))
    assert T.IDENTITY_BALANCED["hate"] == {"dynahate"}
    # DynaHate's rare non-hateful statement naming Muslims counts more than before, the common hateful one less
    assert hate[8] > plain[8] and hate[0] < plain[0]
    np.testing.assert_allclose(hate[len(texts):], plain[len(texts):])  # Davidson is not balanced
    for cat in ("offensive", "violence"):
        assert cat not in T.IDENTITY_BALANCED
        np.testing.assert_allclose(T.category_weights(cat, rows, y2, train), plain)
