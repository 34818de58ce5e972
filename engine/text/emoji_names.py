"""Emoji read as their names, for the text models: ``🖕`` → ``middle finger``, ``🐷`` → ``pig``, ``💩`` → ``pile of poo``.

The names are Unicode's CLDR short names as shipped by the ``emoji`` package (PyPI ``emoji``,
BSD licence, Unicode's emoji data; :data:`emoji.EMOJI_DATA`), not a hand-written table. A whole
emoji sequence is one name: ZWJ sequences (``👩‍❤️‍💋‍👩`` → ``kiss woman woman``), skin tones
(dropped from the name: ``👳🏽`` → ``person wearing turban``), variation selectors. Named with their tone
("boy dark skin tone"), HatemojiBuild's racist posts were read a little better (its test ``hate`` macro-F1
0.505 → 0.533), but a model fine-tuned so flagged 19-27 % of 165 written benign chat messages per tone
("👍🏽 great job", "my son 👦🏿 just started school") against 3 % with no tone (docs/text-moderation.md, "Hate as
its own decision"): a tone is not evidence of anything. An animal's
face reads as the animal when the animal has an emoji of its own (``pig face`` → ``pig``,
``dog face`` → ``dog``; ``clown face`` stays). Names are folded to lower-case ASCII
(``piñata`` → ``pinata``; brackets and ``&`` become spaces) and set off by a space from
whatever they touch (``my 🔌hates`` → ``my electric plug hates``), so they read as words.

Left alone, for the later ``emoji`` step of :func:`rtaudit.engine.text.normalize.normalize`, which reads
them as the letters they stand for: regional indicators (flags included: ``🇫🇷`` → ``fr``),
negative squared and circled letters (``🅰️``), ``⭕`` and ``❌``; keycaps (``1️⃣`` → ``1``).

:func:`emoji_names` is a normalization step ``(text, spans) -> (text, spans)``: every character
of a name (and the spaces around it) keeps the span of the whole emoji sequence in the original,
so evidence found on ``middle finger`` points at ``🖕``.
"""

from __future__ import annotations

from typing import Any

import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

__all__ = ["emoji_name", "emoji_names"]

_Spans = list[tuple[int, int]]

_SKIN_TONE = re.compile(r"_(?:light|medium-light|medium|medium-dark|dark)_skin_tone")
_NOT_NAME = re.compile(r"[^a-z0-9' -]+")
_KEYCAP = "\u20e3"


@lru_cache(maxsize=1)
def _data() -> tuple[dict[str, dict[str, Any]], frozenset[str], frozenset[str]]:
    """``EMOJI_DATA``, every emoji's English name (``pig``, ``pig_face``), and the first characters of all emoji."""
    import emoji

    data = emoji.EMOJI_DATA
    names = frozenset(d["en"].strip(":") for d in data.values())
    return data, names, frozenset(e[0] for e in data)


def _ascii(name: str) -> str:
    folded = unicodedata.normalize("NFKD", name.replace("’", "'"))
    folded = "".join(c for c in folded if not unicodedata.combining(c)).lower()
    return " ".join(_NOT_NAME.sub(" ", folded).split())


@lru_cache(maxsize=4096)
def emoji_name(sequence: str) -> str | None:
    """The model-view name of one emoji sequence (``"🐷"`` → ``"pig"``), or ``None`` for a
    sequence that is not an emoji or is one left to the letter step (see the module docstring)."""
    data, names, _ = _data()
    entry = data.get(sequence) or data.get(sequence.replace("\ufe0f", ""))
    if entry is None:
        return None
    raw = _SKIN_TONE.sub("", entry["en"].strip(":"))
    if raw.startswith("keycap"):
        return None
    head, _, tail = raw.rpartition("_")
    if tail == "face" and head and "_" not in head and head in names:
        raw = head  # pig_face -> pig: the animal, when it has an emoji of its own
    return _ascii(raw.replace("_", " ")) or None


#: a run of one emoji repeated (``🤬🤬🤬🤬``, spaces between allowed) is named this many times at most;
#: the rest of the run leaves the model view (repetition adds no meaning, and each name is 2-6 word pieces).
MAX_REPEAT = 3
#: most emoji named in one text; past it an emoji stays as it is (the encoder reads it as unknown).
#: Unbounded, a text of 32,000 emoji (within the request limit) became 160,000 word pieces: 45 s of
#: encoder time on one core, every other text of the stage waiting behind it.
MAX_NAMED = 500


def emoji_names(text: str, spans: _Spans, *, is_letter: Callable[[str], object] = lambda c: False) -> tuple[str, _Spans]:
    """Replace each emoji sequence of ``text`` by its name (see the module docstring); ``spans[i]``
    is the original span of ``text[i]``. ``is_letter(c)`` says which first characters belong to
    letter-shaped emoji (left for the letter step). Bounded: at most :data:`MAX_REPEAT` names per run
    of one repeated emoji and :data:`MAX_NAMED` per text."""
    _, _, firsts = _data()
    if not any(c in firsts for c in text):
        return text, spans
    import emoji

    chars: list[str] = []
    out: _Spans = []
    pos = 0
    named, last, repeat = 0, None, 0
    for token in emoji.analyze(text, non_emoji=False, join_emoji=True):
        match = token.value
        if isinstance(match, str):  # a run of non-emoji text: analyze(non_emoji=False) yields none
            continue
        start, end = match.start, match.end
        seq = text[start:end]
        name = None if is_letter(seq[0]) or _KEYCAP in seq else emoji_name(seq)
        if name is None:
            continue
        repeat = repeat + 1 if seq == last and not text[pos:start].strip() else 1
        last = seq
        if repeat > MAX_REPEAT:  # the run goes on: drop it from the model view
            pos = end
            continue
        if named >= MAX_NAMED:
            continue
        named += 1
        chars.extend(text[pos:start])
        out.extend(spans[pos:start])
        span = (spans[start][0], spans[end - 1][1])
        before = " " if chars and not chars[-1].isspace() else ""
        after = " " if end < len(text) and not text[end].isspace() else ""
        word = before + name + after
        chars.extend(word)
        out.extend([span] * len(word))
        pos = end
    chars.extend(text[pos:])
    out.extend(spans[pos:])
    return "".join(chars), out
