"""The evasion suite: deterministic obfuscated variants of a clean text, the way abusers write them.

``evasion_variants(text, seed)`` returns one variant per technique in
:data:`TECHNIQUES`. Every word of three or more ASCII letters is obfuscated
(the worst case for a model: the offending word is always among them); shorter
words, ``@mentions``, ``#hashtags``, ``&entities;`` and URLs are left alone,
and so is the whitespace between words (``spacing`` widens it to three spaces
so word boundaries stay visible).
The same ``(text, seed)`` always gives the same variants (``random.Random``
seeded with a string, which is stable across processes).

Techniques
    ``homoglyphs``     about half the letters of each word → Cyrillic/Greek look-alikes
    ``zero_width``     invisible characters (ZWSP, ZWNJ, ZWJ, word joiner, BOM, soft hyphen) between letters
    ``leetspeak``      about 40% of the substitutable letters → ``4 @ 3 1 ! 0 5 $ 7 9 8``
    ``spacing``        ``f u c k`` (words then separated by three spaces)
    ``punctuation``    ``f.u.c.k`` / ``f-u-c-k`` / ``f*u*c*k`` / ``f_u_c_k``, one mark per word
    ``mixed_scripts``  each letter drawn from Latin, Cyrillic, Greek, fullwidth and mathematical bold
    ``emoji``          about half the letters → letter emoji (🇦 regional indicators, 🅰 negative squared,
                       🅐 negative circled, Ⓐ circled), one style per word

The look-alike tables come from the same Unicode confusables data that
:func:`rtaudit.engine.text.normalize.confusable_letters` folds, so the suite and the
normalizer agree on what a homoglyph is; fullwidth and mathematical letters are
computed from their code-point blocks.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache

from rtaudit.engine.text.normalize import confusable_letters

__all__ = ["TECHNIQUES", "evasion_variants"]

TECHNIQUES = ("homoglyphs", "zero_width", "leetspeak", "spacing", "punctuation", "mixed_scripts", "emoji")

_WORD = re.compile(r"[A-Za-z]{3,}")
_SKIP_TOKEN = re.compile(r"^(?:[@#&]|[a-z][a-z0-9+.\-]*://|www\.)", re.IGNORECASE)
_ZERO_WIDTH = ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad")
_LEET = {"a": "4@", "e": "3", "i": "1!", "o": "0", "s": "5$", "t": "7", "l": "1", "g": "9", "b": "8"}
_PUNCT = ".-*_"


@lru_cache(maxsize=1)
def _lookalikes() -> dict[str, dict[str, tuple[str, ...]]]:
    """script ("CYRILLIC", "GREEK") → ASCII letter → its look-alikes in that script."""
    table: dict[str, dict[str, list[str]]] = {"CYRILLIC": {}, "GREEK": {}}
    for ch, ascii_letter in confusable_letters().items():
        script = unicodedata.name(ch, "").split(" ")[0]
        if script in table:
            table[script].setdefault(ascii_letter, []).append(ch)
    return {s: {k: tuple(sorted(v)) for k, v in t.items()} for s, t in table.items()}


def _fullwidth(c: str) -> str:
    return chr(ord(c) - 0x21 + 0xFF01)


def _math_bold(c: str) -> str:
    return unicodedata.lookup(f"MATHEMATICAL BOLD {'CAPITAL' if c.isupper() else 'SMALL'} {c.upper()}")


def _emoji_styles() -> tuple[Callable[[str], str], ...]:
    def regional(c: str) -> str:
        return chr(0x1F1E6 + ord(c.lower()) - ord("a"))

    def negative_squared(c: str) -> str:
        return chr(0x1F170 + ord(c.lower()) - ord("a"))

    def negative_circled(c: str) -> str:
        return chr(0x1F150 + ord(c.lower()) - ord("a"))

    def circled(c: str) -> str:
        return chr((0x24B6 if c.isupper() else 0x24D0) + ord(c.lower()) - ord("a"))

    return (regional, negative_squared, negative_circled, circled)


def _pick(rng: random.Random, positions: list[int], fraction: float) -> set[int]:
    """At least one of ``positions`` (if any), each kept with probability ``fraction``."""
    if not positions:
        return set()
    chosen = {p for p in positions if rng.random() < fraction}
    return chosen or {rng.choice(positions)}


def _substitute(word: str, rng: random.Random, fraction: float, options: Callable[[str], str]) -> str:
    subs = [i for i, c in enumerate(word) if options(c)]
    chosen = _pick(rng, subs, fraction)
    return "".join(rng.choice(options(c)) if i in chosen else c for i, c in enumerate(word))


def _homoglyph_options(c: str) -> str:
    table = _lookalikes()
    return "".join(table["CYRILLIC"].get(c, ())) + "".join(table["GREEK"].get(c, ()))


def _homoglyphs(word: str, rng: random.Random) -> str:
    return _substitute(word, rng, 0.5, _homoglyph_options)


def _zero_width(word: str, rng: random.Random) -> str:
    gaps = _pick(rng, list(range(1, len(word))), 0.5)
    return "".join((rng.choice(_ZERO_WIDTH) if i in gaps else "") + c for i, c in enumerate(word))


def _leetspeak(word: str, rng: random.Random) -> str:
    return _substitute(word, rng, 0.4, lambda c: _LEET.get(c.lower(), ""))


def _spacing(word: str, rng: random.Random) -> str:
    return " ".join(word)


def _punctuation(word: str, rng: random.Random) -> str:
    return rng.choice(_PUNCT).join(word)


def _mixed_scripts(word: str, rng: random.Random) -> str:
    table = _lookalikes()
    out = []
    for c in word:
        forms = [c, _fullwidth(c), _math_bold(c)]
        forms += table["CYRILLIC"].get(c, ()) + table["GREEK"].get(c, ())
        out.append(rng.choice(forms))
    return "".join(out)


def _emoji(word: str, rng: random.Random) -> str:
    style = rng.choice(_emoji_styles())
    chosen = _pick(rng, list(range(len(word))), 0.5)
    return "".join(style(c) if i in chosen else c for i, c in enumerate(word))


_TRANSFORMS: dict[str, Callable[[str, random.Random], str]] = {
    "homoglyphs": _homoglyphs,
    "zero_width": _zero_width,
    "leetspeak": _leetspeak,
    "spacing": _spacing,
    "punctuation": _punctuation,
    "mixed_scripts": _mixed_scripts,
    "emoji": _emoji,
}


def evasion_variant(text: str, technique: str, seed: int = 0) -> str:
    """``text`` with every word of 3+ ASCII letters obfuscated by ``technique``.

    Raises ``ValueError`` for a technique not in :data:`TECHNIQUES`.
    """
    if technique not in _TRANSFORMS:
        raise ValueError(f"unknown evasion technique {technique!r}; known: {', '.join(TECHNIQUES)}")
    transform = _TRANSFORMS[technique]
    rng = random.Random(f"{seed}:{technique}:{text}")
    out = []
    for part in re.split(r"(\s+)", text):
        if part.isspace():
            out.append("   " if technique == "spacing" else part)
        elif part and not _SKIP_TOKEN.match(part):
            out.append(_WORD.sub(lambda m: transform(m.group(), rng), part))
        else:
            out.append(part)
    return "".join(out)


def evasion_variants(text: str, seed: int = 0) -> dict[str, str]:
    """Technique → obfuscated variant of ``text``, for every technique in :data:`TECHNIQUES`."""
    return {t: evasion_variant(text, t, seed) for t in TECHNIQUES}
