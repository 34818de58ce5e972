"""Lexical offensive-language model: alt-profanity-check (TF-IDF + linear SVM, calibrated).

Used as one input of :class:`rtaudit.engine.text.scoring.TextScorer` (stacked with MiniLM) and
as the baseline ``rtaudit eval`` compares against.

Source: the ``alt-profanity-check`` package (a maintained fork of
``profanity-check``, trained on Davidson et al. 2017 and Jigsaw comments); the
vectorizer and model ship inside the package, nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import re
from importlib import metadata
from pathlib import Path

import numpy as np

from rtaudit.engine.models import StageOutput
from rtaudit.engine.text.normalize import normalize
from rtaudit.schemas.messages import Evidence, ModelRef

#: word tokens for span evidence: letters/digits, inner apostrophes kept ("don't").
_WORD = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)
CATEGORY = "profanity"


def _package_fingerprint() -> str:
    import profanity_check

    data = Path(profanity_check.__file__).parent / "data"
    digest = hashlib.sha256()
    for f in sorted(data.glob("*.joblib")):
        digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


class ProfanityScorer:
    """Score texts and find the offending words.

    ``score_texts(texts)`` → ``float64[n]`` probabilities; ``spans`` gives
    ``(start, end, word, score)`` for each word scoring at least
    ``evidence_threshold`` on its own.
    """

    def __init__(self, evidence_threshold: float = 0.5) -> None:
        from profanity_check import predict_prob

        self._predict_prob = predict_prob
        self.evidence_threshold = evidence_threshold
        version = metadata.version("alt-profanity-check")
        self.model = ModelRef(name="alt-profanity-check", version=f"{version}+{_package_fingerprint()}")

    def score_texts(self, texts: list[str]) -> np.ndarray:
        """Probability of offensive language per text, ``float64[len(texts)]``."""
        if not texts:
            return np.zeros(0)
        return np.asarray(self._predict_prob(texts), dtype=np.float64)

    def score_with_spans(self, texts: list[str], part: str = "") -> list[StageOutput]:
        """Whole-text score plus per-word span evidence, for a batch of texts (one model call per level).

        The model scores :func:`rtaudit.engine.text.normalize.normalize`'s view of each
        text (look-alikes, invisible characters, leetspeak and split letters
        undone); each evidence ``span`` is ``[start, end)`` into the *original*
        text and ``text`` is what the user wrote there (``"sh1t"``, ``"f u c k"``).
        """
        views = [normalize(t) for t in texts]
        words = [[(m.start(), m.end(), m.group()) for m in _WORD.finditer(v.text)] for v in views]
        flat = [w for ws in words for (_, _, w) in ws]
        # One model call for the texts and their words: each call costs ~10 ms of sklearn
        # input validation whatever its size (measured on 2 cores), more than the rows do at
        # micro-batch sizes. Rows are scored independently, so the scores are unchanged.
        scores = self.score_texts([v.text for v in views] + flat)
        doc_scores, word_scores = scores[: len(views)], scores[len(views) :]
        outputs, i = [], 0
        for view, text_words, doc_score in zip(views, words, doc_scores):
            evidence = []
            for start, end, _ in text_words:
                s = float(word_scores[i])
                i += 1
                if s >= self.evidence_threshold:
                    o_start, o_end = view.to_original(start, end)
                    evidence.append(
                        Evidence(
                            part=part,
                            category=CATEGORY,
                            score=round(s, 4),
                            text=view.original[o_start:o_end],
                            span=(o_start, o_end),
                        )
                    )
            outputs.append(StageOutput(scores={CATEGORY: round(float(doc_score), 4)}, evidence=evidence))
        return outputs
