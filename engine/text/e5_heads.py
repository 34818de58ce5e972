"""Per-language heads on multilingual-e5-small embeddings (:mod:`rtaudit.engine.text.e5`), and their loader.

:class:`E5Head`: logistic regression ``sigmoid(w·e + b - shift)`` over an L2-normalised embedding
``e: float32[384]`` → the ``offensive`` probability (the label every multilingual set shares), ``shift``
the logit of the dev threshold (``rtaudit text train-e5``: the lowest that flags at most 1 % of the
language's ordinary dev sentences), so 0.5 is the operating point like every other text score. One head
per served language (``<lang>_e5_lr.npz``) and one for text routed to no served language
(``any_e5_lr.npz``, fitted on every language's rows together). Arrays, not pickles; the directory's
``manifest.json`` records each file's sha256, the training sets (repository, commit, licence) and the
dev report, checked on load.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rtaudit.engine.text.heads import ARTIFACTS, ArtifactError, load_manifest, verified_path

if TYPE_CHECKING:
    from rtaudit.engine.text.heads import CharNgramModel
    from rtaudit.engine.text.romanized import RomanizedRouter

log = logging.getLogger(__name__)

#: the head for text in no served language (or whose language is unsure).
ANY = "any"
#: subdirectory of the artifacts directory with the e5 heads.
SUBDIR = "multilingual_e5"


def head_file(lang: str) -> str:
    return f"{lang}_e5_lr.npz"


def artifacts_dir(base: Path | None = None) -> Path:
    return (base or ARTIFACTS) / SUBDIR


@dataclass(frozen=True)
class E5Head:
    """``w: float32[384]``, ``b``, ``shift`` (logit units). :meth:`predict` ``float32[n, 384]`` → ``float64[n]``."""

    w: np.ndarray
    b: float
    shift: float

    def logits(self, emb: np.ndarray) -> np.ndarray:
        return np.asarray(emb, dtype=np.float64) @ self.w.astype(np.float64) + self.b - self.shift

    def predict(self, emb: np.ndarray) -> np.ndarray:
        return np.asarray(1.0 / (1.0 + np.exp(-self.logits(emb))), dtype=np.float64)

    def save(self, path: Path) -> None:
        np.savez(path, w=self.w.astype(np.float32), b=np.float64(self.b), shift=np.float64(self.shift))

    @classmethod
    def load(cls, path: Path) -> "E5Head":
        z = np.load(path, allow_pickle=False)
        return cls(z["w"].astype(np.float32), float(z["b"]), float(z["shift"]))


@dataclass
class E5Heads:
    """The heads of one artifacts directory: ``heads`` language (or :data:`ANY`) → :class:`E5Head`;
    ``encoder``: the encoder version they were fitted on (the manifest's)."""

    heads: dict[str, E5Head]
    version: str
    encoder: str
    #: romanized-script detectors (:class:`rtaudit.engine.text.romanized.RomanizedRouter`; may hold none)
    router: "RomanizedRouter | None" = None
    #: character n-gram abuse models of romanized languages whose e5 head is weak (``ngram_<lang>.npz``: Hinglish,
    #: Arabizi): max'ed with the head's score by the stage, or serving the language alone (:attr:`ngram_alone`)
    ngram: "dict[str, CharNgramModel]" = field(default_factory=dict)
    #: languages of :attr:`ngram` whose manifest entry says ``"combine": "alone"``: the n-gram model scores them and
    #: their e5 head is not asked (an entry without the field, as in bundles before it: max'ed with the head)
    ngram_alone: frozenset[str] = frozenset()

    @classmethod
    def load(cls, base: Path | None = None) -> "E5Heads | None":
        """The heads of ``<base>/multilingual_e5`` (default: the shipped ones); ``None`` when the directory
        has no manifest (a bundle made before them).

        Raises:
            ArtifactError: a listed head is missing or fails its sha256, or the :data:`ANY` head is not listed.
        """
        root = artifacts_dir(base)
        if not (root / "manifest.json").exists():
            return None
        manifest = load_manifest(root)
        heads = {name[: -len("_e5_lr.npz")]: E5Head.load(verified_path(name, root))
                 for name in manifest.get("artifacts", {}) if name.endswith("_e5_lr.npz")}
        if ANY not in heads:
            raise ArtifactError(f"{root / 'manifest.json'} lists no {head_file(ANY)}")
        from rtaudit.engine.text.heads import CharNgramModel
        from rtaudit.engine.text.romanized import ROMANIZED, RomanizedRouter, ngram_file

        listed = manifest.get("artifacts", {})
        ngram = {lang: CharNgramModel.load(verified_path(ngram_file(lang), root))
                 for lang in ROMANIZED if ngram_file(lang) in listed}
        alone = frozenset(lang for lang in ngram if listed[ngram_file(lang)].get("combine") == "alone")
        return cls(heads, str(manifest.get("version", "unknown")), str(manifest.get("encoder", "unknown")),
                   RomanizedRouter.load(root, manifest), ngram, alone)

    def predict(self, lang: str, emb: np.ndarray) -> np.ndarray:
        """``offensive`` probabilities ``float64[n]`` of ``lang``'s head (the :data:`ANY` head for a language without one)."""
        return self.heads.get(lang, self.heads[ANY]).predict(emb)
