"""Whole-document scoring measured (issue 12 item 1): a flagged sentence put at the start, in the middle
and at the end of a long benign text must score as it does alone (target: within 0.1 for every
category it is flagged for). Pure: the filler is generated here, the scorer is passed in.

The filler (:func:`benign_sentences`) is ordinary, seeded, made-up prose ("The museum repaired the
wooden fence before the holiday."), no data set; :data:`SENTENCES` are the flagged sentences measured
(an insult, a threat, self-harm, dehumanisation of a group).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["PLACES", "SENTENCES", "TARGET_DELTA", "WholeDocumentRow", "benign_sentences", "whole_document"]

_SUBJECTS = ("The committee", "My neighbour", "The old library", "Our team", "The river", "A small bakery",
             "The museum", "Her brother", "The city council", "The garden")
_VERBS = ("opened", "visited", "discussed", "painted", "repaired", "described", "planned", "cleaned", "measured",
          "photographed")
_OBJECTS = ("the new bridge", "a quiet park", "the spring schedule", "the wooden fence", "a long report",
            "the village square", "the train timetable", "a blue boat", "the morning market", "the school garden")
_TAILS = ("on Monday morning", "after the long winter", "with great care", "before the holiday",
          "during the festival", "in the afternoon", "last week", "near the station", "for the visitors",
          "without any fuss")
#: the flagged sentences measured.
SENTENCES: tuple[str, ...] = ("You are a stupid worthless bitch.", "I will kill you.", "I want to end my life.",
                              "Immigrants are vermin.")
PLACES: tuple[str, ...] = ("start", "middle", "end")
#: issue 12's target: the sentence's flagged categories within this of their score alone.
TARGET_DELTA = 0.1



def benign_sentences(words: int, seed: int = 0) -> list[str]:
    """Generated everyday sentences, about ``words`` words in all (the same list for the same seed)."""
    rng = random.Random(seed)
    out: list[str] = []
    count = 0
    while count < words:
        s = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."
        out.append(s)
        count += len(s.split())
    return out


def insert(filler: Sequence[str], sentence: str, place: str) -> str:
    """``filler`` joined with ``sentence`` at ``place`` (``start`` | ``middle`` | ``end``).

    Raises ``ValueError`` for another place."""
    if place not in PLACES:
        raise ValueError(f"place must be one of {PLACES}, got {place!r}")
    k = {"start": 0, "middle": len(filler) // 2, "end": len(filler)}[place]
    return " ".join([*filler[:k], sentence, *filler[k:]])


@dataclass(frozen=True)
class WholeDocumentRow:
    """One sentence at one place: its flagged categories (score alone >= ``review``), the scores alone and in
    the document, and the largest change over the flagged categories (:attr:`delta`)."""

    sentence: str
    place: str
    words: int
    flagged: tuple[str, ...]
    alone: dict[str, float]
    in_document: dict[str, float]

    @property
    def delta(self) -> float:
        return max((abs(self.in_document[c] - self.alone[c]) for c in self.flagged), default=0.0)

    @property
    def met(self) -> bool:
        return bool(self.flagged) and self.delta <= TARGET_DELTA


def whole_document(score, words: int = 5000, review: float = 0.5,
                   sentences: Sequence[str] = SENTENCES) -> list[WholeDocumentRow]:
    """Every sentence of ``sentences`` alone and at every place of :data:`PLACES` in ``words`` words of
    :func:`benign_sentences` (one ``score`` call: texts → per-text ``{category: score}``)."""
    filler = benign_sentences(words)
    docs = [(s, p, insert(filler, s, p)) for s in sentences for p in PLACES]
    scores: list[Mapping[str, float]] = list(score([*sentences, *(d for _, _, d in docs)]))
    alone = dict(zip(sentences, scores[: len(sentences)]))
    out = []
    for (s, p, d), sc in zip(docs, scores[len(sentences):]):
        flagged = tuple(c for c, v in alone[s].items() if v >= review)
        out.append(WholeDocumentRow(s, p, len(d.split()), flagged, dict(alone[s]), dict(sc)))
    return out
