"""Negatives the ``violence`` and ``self-harm`` heads are fitted with beside the safety sets
(:func:`rtaudit.engine.text.training_data.english_examples`): ordinary prose passages and the written contrast
sentences. Pure: :class:`rtaudit.engine.text.data.Example` rows in, rows out."""

from __future__ import annotations

import hashlib

from rtaudit.engine.text import data as D

#: EPIE sentences are negatives of ``violence`` only (``training_data.VIOLENCE_ONLY_NEGATIVES``), but joined into passages as long as a window of a long document, the same sentences are
#: negatives of both (:func:`prose_passages`): without them ordinary prose of 40+ words read as
#: self-harm (a 5,000-word benign text 0.73, its violence 0.48), since every long training text
#: of the head was a Reddit post. Passages per split; at least this many words each, in turn (a
#: window of a long document holds up to 64 word pieces, about 45 words).
PROSE_PASSAGES = {"train": 6000, "dev": 1000}
PASSAGE_WORDS = (25, 40, 55)


def prose_passages(sentences: list[D.Example]) -> list[D.Example]:
    """Up to :data:`PROSE_PASSAGES` passages per split of consecutive ``sentences`` (EPIE prose, in an
    order hashed from their ids, never across splits; a sentence is in at most one passage) of at
    least :data:`PASSAGE_WORDS` words each (the lengths in turn), negative for ``violence`` and
    ``self-harm`` (dataset ``epie_passages``)."""
    out: list[D.Example] = []
    for split, n in PROSE_PASSAGES.items():
        rows = sorted((s for s in sentences if s.split == split),
                      key=lambda s: hashlib.sha256(s.uid.encode()).hexdigest())
        passage: list[D.Example] = []
        for s in rows:
            passage.append(s)
            if sum(len(p.text.split()) for p in passage) >= PASSAGE_WORDS[len(out) % len(PASSAGE_WORDS)]:
                out.append(D.Example(" ".join(p.text for p in passage), {c: 0 for c in D.SAFETY_CATEGORIES},
                                     "epie_passages", split, "passage:" + passage[0].uid))
                passage = []
                if sum(e.split == split for e in out) >= n:
                    break
    return out


def contrast_examples() -> list[D.Example]:
    """:data:`rtaudit.engine.text.contrasts.CONTRASTS` as ``train`` rows, negative for ``violence`` (as
    ``self-harm`` negatives, their self-directed hyperbole pulled "I want to die" from 0.55 to 0.20)."""
    from rtaudit.engine.text.contrasts import CONTRASTS

    return [D.Example(t, {"violence": 0}, "contrasts", "train", f"contrast:{i}") for i, t in enumerate(CONTRASTS)]
