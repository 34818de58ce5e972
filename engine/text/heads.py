"""The small trained text classifiers, stored as plain numpy arrays (``.npz``), and their manifest.

* :class:`EnglishHead` — stacked logistic regression over ``[MiniLM embedding (384),
  logit(alt-profanity-check probability)]`` → one probability per category of
  :data:`rtaudit.modelbuild.text.data.CATEGORIES`. A per-category ``shift`` (the logit of the
  threshold that maximised F1 on the dev split) is subtracted, so a calibrated score
  of 0.5 is the dev-optimal operating point and tenant policies can use one
  threshold for every category. ``targeted_insult`` is a sub-category of ``offensive`` in
  its source annotation (OLID's B level is only annotated under OFF), so its score is capped by
  the ``offensive`` score (its threshold is chosen on dev with that cap in place). ``hate`` is a
  decision of its own (issue 12 item 4): HatemojiBuild's hateful posts are often not profane
  ("☪️ => 💀") and were capped by an ``offensive`` score under its line.
* :class:`CharNgramModel` (``ChineseModel``) — character n-gram hashing (scikit-learn's
  ``HashingVectorizer``: murmurhash3, stateless, so no fitted vocabulary to pickle)
  → TF-IDF (idf stored) → logistic regression: COLD's ``offensive`` label (1–3-grams), and one
  model per language of :mod:`rtaudit.engine.text.multilingual` (``artifacts/multilingual/``).

Arrays, not pickles: an ``.npz`` loads with ``allow_pickle=False`` under any
numpy/scikit-learn version. ``artifacts/manifest.json`` records the sha256 of each
file, the training data files with their sha256, the split seed and the metrics.
"""

from __future__ import annotations

from typing import Any

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rtaudit.engine.hashing import sha256_file as sha256_file  # the artifacts' check; training imports it from here

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
MANIFEST = ARTIFACTS / "manifest.json"
EN_HEAD = "en_head.npz"
ZH_MODEL = "zh_char_lr.npz"


class ArtifactError(RuntimeError):
    """An artifact is missing or its sha256 does not match the manifest."""


def load_manifest(artifacts_dir: Path | None = None) -> dict[str, Any]:
    """``manifest.json`` of ``artifacts_dir`` (default: the shipped ``artifacts/``) as a dict.
    Raises :class:`ArtifactError` if absent."""
    manifest = (artifacts_dir or ARTIFACTS) / "manifest.json"
    if not manifest.exists():
        raise ArtifactError(f"{manifest} not found: run `rtaudit text train`")
    loaded: dict[str, Any] = json.loads(manifest.read_text())
    return loaded


def verified_path(name: str, artifacts_dir: Path | None = None) -> Path:
    """Path of artifact ``name`` in ``artifacts_dir`` (default: the shipped ``artifacts/``) after
    checking its sha256 against that directory's manifest.

    Raises:
        ArtifactError: the file or its manifest entry is missing, or the sha256 differs.
    """
    path = (artifacts_dir or ARTIFACTS) / name
    entry = load_manifest(artifacts_dir).get("artifacts", {}).get(name)
    if entry is None or not path.exists():
        raise ArtifactError(f"artifact {name} missing (file or manifest entry): run `rtaudit text train`")
    got = sha256_file(path)
    if got != entry["sha256"]:
        raise ArtifactError(f"artifact {name}: sha256 {got} does not match the manifest's {entry['sha256']}")
    return path


def _sigmoid(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = 1.0 / (1.0 + np.exp(-np.clip(x, -40.0, 40.0)))
    return out


def lexical_logit(p: np.ndarray) -> np.ndarray:
    """``log(p / (1 - p))`` with ``p`` clipped to ``[1e-4, 1 - 1e-4]``; ``float32`` like ``p``'s shape."""
    p = np.clip(np.asarray(p, dtype=np.float64), 1e-4, 1 - 1e-4)
    out: np.ndarray = np.log(p / (1 - p)).astype(np.float32)
    return out


#: category → the category whose score caps it.
PARENT = {"targeted_insult": "offensive"}


@dataclass(frozen=True)
class EnglishHead:
    """``W: float32[385, C]``, ``b, shift: float32[C]``; ``categories[C]``."""

    W: np.ndarray
    b: np.ndarray
    shift: np.ndarray
    categories: tuple[str, ...]

    def cap(self, scores: np.ndarray) -> np.ndarray:
        """Apply :data:`PARENT`: each sub-category's column capped by its parent's, ``float64[n, C]``."""
        out = scores.copy()
        for c, parent in PARENT.items():
            if c in self.categories and parent in self.categories:
                i, j = self.categories.index(c), self.categories.index(parent)
                out[:, i] = np.minimum(out[:, i], out[:, j])
        return out

    @staticmethod
    def features(embeddings: np.ndarray, lexical_prob: np.ndarray) -> np.ndarray:
        """``float32[n, 385]``: embeddings ``float32[n, 384]`` then ``logit(lexical_prob[n])``."""
        return np.hstack([embeddings.astype(np.float32), lexical_logit(lexical_prob)[:, None]])

    def logits(self, features: np.ndarray) -> np.ndarray:
        """Uncalibrated logits ``float32[n, C]``."""
        out: np.ndarray = features @ self.W + self.b
        return out

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Calibrated scores ``float64[n, C]`` in ``[0, 1]`` (0.5 = dev-optimal threshold), sub-categories capped."""
        return self.cap(_sigmoid(self.logits(features) - self.shift))

    def save(self, path: Path) -> None:
        np.savez_compressed(path, W=self.W.astype(np.float32), b=self.b.astype(np.float32),
                            shift=self.shift.astype(np.float32), categories=np.array(self.categories))

    @classmethod
    def load(cls, path: Path | None = None) -> "EnglishHead":
        z = np.load(path or verified_path(EN_HEAD), allow_pickle=False)
        return cls(z["W"], z["b"], z["shift"], tuple(str(c) for c in z["categories"]))


#: hashing space and n-gram range of the Chinese model (part of its definition).
ZH_FEATURES = 2**18
ZH_NGRAMS = (1, 3)


def char_vectorizer(n_features: int = ZH_FEATURES, ngrams: tuple[int, int] = ZH_NGRAMS) -> Any:
    """The stateless character n-gram hasher (raw counts; TF-IDF weighting is applied from stored idf)."""
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(analyzer="char", ngram_range=tuple(ngrams), n_features=n_features,
                             alternate_sign=False, norm=None, lowercase=True)


def zh_vectorizer() -> Any:
    """:func:`char_vectorizer` of the Chinese model."""
    return char_vectorizer(ZH_FEATURES, ZH_NGRAMS)


def smooth_idf(counts: Any) -> np.ndarray:
    """scikit-learn's smooth idf ``float32[n_features]`` of a hashed count matrix (one row per training text)."""
    n = counts.shape[0]
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    out: np.ndarray = (np.log((1 + n) / (1 + df)) + 1).astype(np.float32)
    return out


@dataclass(frozen=True)
class CharNgramModel:
    """A character n-gram model for one language: hashed char ``ngrams`` (``n_features`` buckets) →
    sublinear TF × idf, L2 rows → logistic regression. ``idf, coef: float32[n_features]``,
    ``intercept``, ``shift`` (logit of the dev-optimal threshold). The Chinese model (COLD) and the
    per-language models of :mod:`rtaudit.engine.text.multilingual` are instances; the hashing
    parameters are stored in the ``.npz`` (absent in older files: the Chinese model's)."""

    idf: np.ndarray
    coef: np.ndarray
    intercept: float
    shift: float
    ngrams: tuple[int, int] = ZH_NGRAMS

    @property
    def n_features(self) -> int:
        return int(len(self.idf))

    def transform(self, texts: list[str]) -> Any:
        """Sublinear-TF × idf, L2-normalised rows: ``scipy.sparse.csr_matrix[n, n_features]``."""
        from sklearn.preprocessing import normalize

        x = char_vectorizer(self.n_features, self.ngrams).transform(texts).astype(np.float32)
        x.data = 1.0 + np.log(x.data)
        x = x.multiply(self.idf[None, :]).tocsr()
        return normalize(x, norm="l2", copy=False)

    def predict(self, texts: list[str]) -> np.ndarray:
        """Calibrated probability of offensive, ``float64[len(texts)]``."""
        if not texts:
            return np.zeros(0)
        return _sigmoid(self.transform(texts) @ self.coef + self.intercept - self.shift)

    def char_contributions(self, text: str) -> np.ndarray:
        """Per-character evidence ``float64[len(text)]``: each n-gram's ``tfidf × coef`` shared over its characters."""
        contrib = np.zeros(len(text))
        if not text:
            return contrib
        from sklearn.utils import murmurhash3_32

        row = self.transform([text])
        weight = dict(zip(row.indices.tolist(), (row.data * self.coef[row.indices]).tolist()))
        low = text.lower()  # the vectorizer lowercases; str.lower keeps length for CJK/Latin
        if len(low) != len(text):
            low = text
        size = self.n_features
        for n in range(self.ngrams[0], self.ngrams[1] + 1):
            for i in range(len(low) - n + 1):
                j = abs(murmurhash3_32(low[i:i + n], seed=0)) % size  # HashingVectorizer's index
                contrib[i:i + n] += weight.get(j, 0.0) / n
        return contrib

    def save(self, path: Path) -> None:
        extra: dict[str, Any] = {} if tuple(self.ngrams) == ZH_NGRAMS else {"ngrams": np.array(self.ngrams, dtype=np.int32)}
        np.savez_compressed(path, idf=self.idf.astype(np.float16), coef=self.coef.astype(np.float32),  # numpy types **kwds as allow_pickle
                            intercept=np.float32(self.intercept), shift=np.float32(self.shift), **extra)

    @classmethod
    def load(cls, path: Path | None = None) -> "CharNgramModel":
        z = np.load(path or verified_path(ZH_MODEL), allow_pickle=False)
        ngrams = tuple(int(v) for v in z["ngrams"]) if "ngrams" in z.files else ZH_NGRAMS
        return cls(z["idf"].astype(np.float32), z["coef"].astype(np.float32), float(z["intercept"]), float(z["shift"]),
                   ngrams)  # type: ignore[arg-type]  # a tuple of two ints read from the file (ngrams is always written as 2 values)


#: the Chinese model (COLD ``offensive``) is a :class:`CharNgramModel` with the default hashing.
ChineseModel = CharNgramModel
