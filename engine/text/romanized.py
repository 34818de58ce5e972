"""Romanized scripts: Hindi/Urdu in Latin letters (Hinglish), Russian in Latin letters and Arabic in Latin letters and
digits (Arabizi), routed to e5 heads.

lingua does not detect romanized Hindi, Russian or Arabic (all stay on the English route and the English model,
which scored a plain Hinglish insult 0.02). :class:`RomanizedRouter` holds one character n-gram model per
romanized language (:class:`~rtaudit.engine.text.heads.CharNgramModel`, one-vs-rest: that language's rows
against English posts (OLID, Davidson) and the Latin-script languages' rows), applied to texts on the English
route; a text scored at least 0.5 (threshold chosen so that at most :data:`ROUTE_EN_MAX` of the English dev
posts leave) gets that language's model (its e5 head, or its character n-gram abuse model: :func:`ngram_file`),
max'ed with its English scores. The data the routers and
heads are fitted on, and their sources and licences: :mod:`rtaudit.modelbuild.text.romanized_data`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rtaudit.engine.text.heads import CharNgramModel

#: the romanized "languages" (codes of their e5 heads and routes).
ROMANIZED = ("hi_latn", "ru_latn", "ar_latn")
#: the most of the English dev posts a romanized route may take.
ROUTE_EN_MAX = 0.005


def latin_share(text: str) -> float:
    """Share of the letters of ``text`` that are Latin, in [0, 1] (0.0 for a text without letters)."""
    import unicodedata

    letters = [c for c in text if c.isalpha()]
    return sum(unicodedata.name(c, "").startswith("LATIN") for c in letters) / len(letters) if letters else 0.0


def router_file(lang: str) -> str:
    return f"route_{lang}.npz"


def ngram_file(lang: str) -> str:
    """The character n-gram abuse model of a romanized language whose e5 head is weak (Hinglish, Arabizi): it serves the
    language alone, or is max'ed with the head where its manifest entry does not say ``"combine": "alone"``
    (:class:`rtaudit.engine.text.e5_stage.MultilingualStage`)."""
    return f"ngram_{lang}.npz"


class RomanizedRouter:
    """The romanized-script detectors of an e5 heads directory: :meth:`detect` gives, per text, the romanized
    language whose detector scores it at least 0.5 (the highest one if several do), else ``None``."""

    def __init__(self, models: dict[str, CharNgramModel]) -> None:
        self.models = models

    @classmethod
    def load(cls, root: Path, manifest: dict[str, Any]) -> "RomanizedRouter":
        """Detectors listed in ``manifest`` (the e5 heads' manifest of ``root``), each sha256-checked.

        Raises:
            rtaudit.engine.text.heads.ArtifactError: a listed detector is missing or fails its sha256.
        """
        from rtaudit.engine.text.heads import verified_path

        return cls({lang: CharNgramModel.load(verified_path(router_file(lang), root))
                    for lang in ROMANIZED if router_file(lang) in manifest.get("artifacts", {})})

    def detect(self, texts: list[str]) -> list[str | None]:
        if not texts or not self.models:
            return [None] * len(texts)
        scores = np.stack([m.predict(texts) for m in self.models.values()], axis=1)
        langs = list(self.models)
        best = scores.argmax(axis=1)
        return [langs[b] if scores[i, b] >= 0.5 else None for i, b in enumerate(best)]
