"""Evasion-resistant text normalization that keeps an offset map to the original text.

``normalize(text)`` returns the *model view* of a text — what the text models
score — together with, for every character of that view, the ``[start, end)``
span of the original it came from, so evidence found in the model view is
reported on what the user actually wrote (:meth:`NormalizedText.to_original`).

Steps, in order (each is named in :attr:`NormalizedText.steps` when it changed
something):

``nfkc``
    Unicode NFKC (UAX #15), applied per base character plus its combining marks,
    so a span survives expansion (``ﬁ`` → ``fi``) and composition
    (``e`` + U+0301 → ``é``). Folds fullwidth forms, mathematical alphanumerics
    (``𝐟𝐮𝐜𝐤``), circled/squared letters, superscripts. Spacing forms of
    combining marks (``ͺ``, ``´``), which NFKC would turn into a space and a
    bare mark, are kept as they are.
``format_chars``
    Removes invisible characters: category Cf (zero-width space/joiners, word
    joiner, soft hyphen, BOM, bidi controls, tags), variation selectors,
    combining grapheme joiner and the Hangul fillers; the Braille blank becomes a
    space.
``combining_marks``
    Removes combining marks left on a Latin or ASCII base after NFKC (marks with
    no precomposed form: "zalgo" text, enclosing keycaps). Marks on other scripts
    (Devanagari, Arabic, Thai, …) are kept: they are spelling there.
``emoji``
    Letter-shaped emoji become letters: regional indicators 🇦–🇿, negative circled
    🅐–🅩 and negative squared 🅰–🆉 letters, ⭕ → o, ❌ → x. Pictographs (💩, 🖕)
    are left alone: turning them into words would put words in a user's mouth;
    the semantic model sees them as they are.
``diacritics``
    A Latin letter whose canonical decomposition is an ASCII letter plus marks
    loses the marks (``fück`` → ``fuck``, ``café`` → ``cafe``).
``confusables``
    Look-alike folding with Unicode's confusables data (UTS #39
    ``confusables.txt``, as shipped by the ``confusable-homoglyphs`` package):
    a letter confusable with a single ASCII letter is replaced by it, but only
    (a) for Latin-script letters (``ı``, ``ɑ``), (b) inside a token that mixes
    Latin with other scripts and would be mostly Latin after folding
    (``shіt`` with Cyrillic ``і``), or (c) for a token made only of look-alikes
    (``ѕһіт``-style) in a text whose letters are mostly Latin. Ordinary
    Russian, Greek or Chinese text is left as it is.
``split_letters``
    A run of at least three single letters, digits or ``$@!`` (at least two of
    them ASCII letters) becomes one word when the same run of spaces separates
    each (``f u c k``; ``f u c k   y o u`` stays two words), or the same
    punctuation mark with the same spaces around it (``f.u.c.k``,
    ``f - u - c - k``), or punctuation marks without spaces (``f.u-c_k``).
    ``e.g. x``, two single letters (``a i``, ``e.g.``) and letters glued to an
    apostrophe (``I'm a b``) are left alone.
``leet``
    Leetspeak folding (``0→o 1→i 3→e 4→a 5→s 7→t 8→b 9→g``, ``$→s``, ``@→a``,
    ``!→i``) inside a word-run (letters, digits, ``$@!``) that has letters and no
    other digit (``2``, ``6``). Digits fold when they interleave with letters or
    the run also has a leet symbol and there are at least half as many letters
    as digits (``sh1t``, ``5h1t``, ``4r3``, ``57up!d``); or when one or two
    digits stand in front of, or one digit behind, at least as many letters
    (at least two, with a vowel when behind) that are not a unit or ordinal
    (``8itch``, ``81tch``, ``ho3``; but ``5ft``, ``10am``, ``1st``, ``30min``,
    ``mp3``, ``win10`` stay). So ``A55``, ``a55``, ``h03``, ``B52``, ``3.14``,
    ``1337`` stay. ``1`` always reads as ``i`` (``b1tch``; ``a55h0le`` → ``asshoie``).
    ``$`` folds in a run with letters (``$hit``, ``a$$``), ``@`` too, except
    that a run starting with ``@`` is a handle and left alone unless it has a
    ``$`` or ``!`` (``@user``, ``@MLB``, ``@Royceda59`` stay, and so do ``@ss`` and
    ``@55h0le``; ``@$$`` folds), ``!`` only alone
    between two characters of the run (``sh!t``; ``hello!`` and ``wow!!``
    stay). URLs, e-mail addresses and ID-like codes (segments joined by
    ``-/_.:`` with a number of two or more digits: ``5H1T-4477-B``,
    ``2023-CV-00451``) are exempt from ``split_letters`` and ``leet``.

The model view is also lower-cased (``str.lower`` per character); that is not
reported as a step. Plain ASCII text made of words of two or more letters,
spaces and punctuation, without digits or ``$@!``, comes out as ``text.lower()``
with identical offsets. ``normalize`` is idempotent on its own output
(``normalize(n.text).text == n.text``) for the cases the property tests cover.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["NormalizedText", "normalize"]

# one character of the working view and the [start, end) span of the original it came from
_Piece = tuple[str, int, int]


@dataclass(frozen=True)
class NormalizedText:
    """The model view of a text and its map back to the original.

    ``offsets[i]`` is the ``[start, end)`` span (character indices) of
    ``original`` that ``text[i]`` came from; ``len(offsets) == len(text)``,
    starts and ends are non-decreasing. ``steps`` names the steps that changed
    something, in order (see the module docstring).
    """

    original: str
    text: str
    offsets: tuple[tuple[int, int], ...]
    steps: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.offsets) != len(self.text):
            raise ValueError(f"offsets has {len(self.offsets)} entries for a text of {len(self.text)} characters")

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """Map a ``[start, end)`` span of :attr:`text` to the span of :attr:`original` it came from.

        An empty span maps to an empty span at the matching position.
        Raises ``ValueError`` unless ``0 <= start <= end <= len(text)``.
        """
        n = len(self.text)
        if not 0 <= start <= end <= n:
            raise ValueError(f"span [{start}, {end}) is not within a normalized text of {n} characters")
        if start == end:
            if start < n:
                pos = self.offsets[start][0]
            else:
                pos = self.offsets[-1][1] if n else len(self.original)
            return (pos, pos)
        return (self.offsets[start][0], self.offsets[end - 1][1])


# ---------------------------------------------------------------- character classes

_INVISIBLE = frozenset({0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0})
_BLANKS = frozenset({0x2800})  # Braille pattern blank: renders as a space
_EMOJI_LETTERS = {"\u2b55": "o", "\u274c": "x"}  # ⭕ ❌
_LEET_DIGITS = {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "9": "g"}
#: units and ordinals after a number ("10am", "5ft", "1st", "30min"): the digits stay digits
_UNITS = frozenset(
    "st nd rd th am pm s k m km kg g mg ml l cm mm ft in lb lbs oz mph kmh min mins sec secs "
    "h hr hrs yr yrs d mb gb tb kb px p x".split()
)


def _is_invisible(ch: str) -> bool:
    cp = ord(ch)
    return (
        unicodedata.category(ch) == "Cf"
        or 0xFE00 <= cp <= 0xFE0F
        or 0xE0100 <= cp <= 0xE01EF
        or cp in _INVISIBLE
    )


@lru_cache(maxsize=8192)
def _is_latin(ch: str) -> bool:
    """Latin-script letter (ASCII or not)."""
    if not ch.isalpha():
        return False
    return ch.isascii() or unicodedata.name(ch, "").startswith("LATIN ")


def _emoji_letter(ch: str) -> str | None:
    cp = ord(ch)
    if 0x1F1E6 <= cp <= 0x1F1FF:  # regional indicator symbols A–Z
        return chr(ord("a") + cp - 0x1F1E6)
    if 0x1F150 <= cp <= 0x1F169:  # negative circled capital letters
        return chr(ord("A") + cp - 0x1F150)
    if 0x1F170 <= cp <= 0x1F189:  # negative squared capital letters
        return chr(ord("A") + cp - 0x1F170)
    return _EMOJI_LETTERS.get(ch)


@lru_cache(maxsize=1)
def confusable_letters() -> dict[str, str]:
    """Non-ASCII letter → the ASCII letter it is confusable with (Unicode UTS #39 data).

    Built once from the ``confusable-homoglyphs`` package's copy of Unicode's
    ``confusables.txt``; only letters (category L*) confusable with exactly one
    ASCII letter are kept, plus the NFKC forms of those letters. Shared with :mod:`engine.text.evasion`.
    """
    from confusable_homoglyphs import confusables

    folds: dict[str, str] = {}
    for ch, entries in confusables.confusables_data.items():
        if len(ch) != 1 or ch.isascii() or not unicodedata.category(ch).startswith("L"):
            continue
        targets = {e["c"].strip("\u200e") for e in entries}
        ascii_letters = sorted(t for t in targets if len(t) == 1 and t.isascii() and t.isalpha())
        if len(ascii_letters) == 1:
            folds[ch] = ascii_letters[0]
    # NFKC runs first and can turn a listed look-alike into an unlisted one
    # (GREEK LUNATE SIGMA SYMBOL ϲ → final sigma ς): the NFKC form inherits the fold.
    for ch, letter in list(folds.items()):
        nf = unicodedata.normalize("NFKC", ch)
        if len(nf) == 1 and not nf.isascii() and nf.isalpha() and nf not in folds:
            folds[nf] = letter
    return folds


# ---------------------------------------------------------------- steps (list[_Piece] -> list[_Piece])


def _nfkc(text: str) -> list[_Piece]:
    out: list[_Piece] = []
    i, n = 0, len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.category(text[j]).startswith("M"):
            j += 1
        cluster = text[i:j]
        folded = unicodedata.normalize("NFKC", cluster)
        if folded == cluster or (" " in folded and " " not in cluster):
            # unchanged, or a spacing form of a combining mark (ͺ → " " + U+0345, ´ → " " + U+0301) that
            # NFKC would split into a space and a bare mark: kept, for the confusables step to judge
            out.extend((c, i + k, i + k + 1) for k, c in enumerate(cluster))
        else:
            out.extend((c, i, j) for c in folded)
        i = j
    return out


def _format_chars(pieces: list[_Piece]) -> list[_Piece]:
    out = []
    for c, s, e in pieces:
        if _is_invisible(c):
            continue
        out.append((" ", s, e) if ord(c) in _BLANKS else (c, s, e))
    return out


def _combining_marks(pieces: list[_Piece]) -> list[_Piece]:
    out: list[_Piece] = []
    base_is_latin = False
    for c, s, e in pieces:
        if unicodedata.category(c).startswith("M"):
            if base_is_latin:
                continue
        else:
            base_is_latin = c.isascii() or _is_latin(c)
        out.append((c, s, e))
    return out


def _emoji(pieces: list[_Piece]) -> list[_Piece]:
    return [((_emoji_letter(c) or c), s, e) for c, s, e in pieces]


def _diacritics(pieces: list[_Piece]) -> list[_Piece]:
    out = []
    for c, s, e in pieces:
        if not c.isascii() and _is_latin(c):
            base = unicodedata.normalize("NFD", c)
            if base[0].isascii() and all(unicodedata.category(m).startswith("M") for m in base[1:]):
                c = base[0]
        out.append((c, s, e))
    return out


def _tokens(pieces: list[_Piece]) -> list[tuple[int, int]]:
    """[i, j) index ranges of whitespace-separated tokens."""
    spans, start = [], None
    for i, (c, _, _) in enumerate(pieces):
        if c.isspace():
            if start is not None:
                spans.append((start, i))
                start = None
        elif start is None:
            start = i
    if start is not None:
        spans.append((start, len(pieces)))
    return spans


def _confusables(pieces: list[_Piece]) -> list[_Piece]:
    folds = confusable_letters()
    out = list(pieces)
    tokens = _tokens(pieces)
    latin_total = sum(1 for c, _, _ in pieces if _is_latin(c))
    unfoldable_total = sum(1 for c, _, _ in pieces if c.isalpha() and not _is_latin(c) and c not in folds)
    latin_text = latin_total >= unfoldable_total
    for i, j in tokens:
        letters = [c for c, _, _ in pieces[i:j] if c.isalpha()]
        latin = sum(1 for c in letters if _is_latin(c))
        other = len(letters) - latin
        foldable = sum(1 for c in letters if not _is_latin(c) and c in folds)
        mixed = latin > 0 and other > 0 and latin + foldable > other - foldable
        lookalike_word = latin == 0 and other > 0 and foldable == other and latin_text
        for k in range(i, j):
            c, s, e = pieces[k]
            if c in folds and (_is_latin(c) or mixed or lookalike_word):
                out[k] = (folds[c], s, e)
    return out


def _lowercase(pieces: list[_Piece]) -> list[_Piece]:
    out: list[_Piece] = []
    for c, s, e in pieces:
        low = c.lower()
        out.extend((lc, s, e) for lc in low)
    return out


_URL_OR_EMAIL = re.compile(
    r"(?:[a-z][a-z0-9+.\-]*://\S+|www\.\S+|[^\s@]+@[^\s@]+\.[a-z]{2,}\S*)", re.IGNORECASE
)
_UNIT = r"[a-z0-9$@!]"
_SPACE_SEP = r"[^\S\n]+"
_PUNCT = r"[.\-_*,|/~+:;·•]"
# >= 3 single units with punctuation marks and no spaces between them, or with the same separator
# between each (a run of spaces, so "f u c k   y o u" stays two words, or a mark with spaces)
_SPLIT = re.compile(
    rf"(?<![\w'’]){_UNIT}"
    rf"(?:(?:{_PUNCT}{_UNIT}){{2,}}|(?P<sep>{_SPACE_SEP}|[^\S\n]*{_PUNCT}[^\S\n]*){_UNIT}(?:(?P=sep){_UNIT})+)"
    rf"(?![\w'’])"
)
_RUN = re.compile(r"(?:[^\W_]|[$@!])+")
_CODE = re.compile(r"[a-z0-9]+(?:[-/_.:][a-z0-9]+)+")


def _is_code(token: str) -> bool:
    """``A55-1337``, ``5H1T-4477-B``, ``2023-CV-00451``: segments joined by ``-/_.:`` with a 2+ digit number."""
    core = token.strip("#()[].,;:!?\"'")
    if not _CODE.fullmatch(core):
        return False
    return any(seg.isdigit() and len(seg) >= 2 for seg in re.split(r"[-/_.:]", core))


def _protected(s: str) -> list[bool]:
    """Per character: inside a URL, an e-mail address or an ID-like code (no ``split_letters``, no ``leet``)."""
    mask = [False] * len(s)
    for m in _URL_OR_EMAIL.finditer(s):
        mask[m.start() : m.end()] = [True] * (m.end() - m.start())
    for m in re.finditer(r"\S+", s):
        if _is_code(m.group()):
            mask[m.start() : m.end()] = [True] * (m.end() - m.start())
    return mask


def _split_letters(pieces: list[_Piece]) -> list[_Piece]:
    s = "".join(c for c, _, _ in pieces)
    mask = _protected(s)
    keep = [True] * len(s)
    for m in _SPLIT.finditer(s):
        if any(mask[m.start() : m.end()]):
            continue
        units = [k for k in range(m.start(), m.end()) if re.match(_UNIT, s[k])]
        if sum(1 for k in units if "a" <= s[k] <= "z") < 2:
            continue
        unit_set = set(units)
        for k in range(m.start(), m.end()):
            keep[k] = k in unit_set
    return [p for p, k in zip(pieces, keep) if k]


def _fold_digits(run: str, letter_pos: list[int], digit_pos: list[int], symbols: bool) -> bool:
    """Whether the leet digits of ``run`` (all of its digits) stand for letters."""
    if not digit_pos:
        return False
    letters, digits = len(letter_pos), len(digit_pos)
    if symbols or any(letter_pos[0] < k < letter_pos[-1] for k in digit_pos) or any(
        digit_pos[0] < k < digit_pos[-1] for k in letter_pos
    ):
        return 2 * letters >= digits  # interleaved (sh1t, 5h1t, 4r3) or with leet symbols (57up!d)
    # digits only in front of the letters (8itch, 81tch / 5ft, 10am) or behind them (ho3 / mp3, win10, a55)
    word = run.strip("".join(_LEET_DIGITS))
    if letters < 2 or letters < digits or word in _UNITS:
        return False
    if digit_pos[0] == 0:
        return digits <= 2
    return digits == 1 and any(c in "aeiouy" for c in word)


def _leet_run(run: str) -> str:
    letter_pos = [k for k, c in enumerate(run) if c.isalpha()]
    if not letter_pos or any(c.isdigit() and c not in _LEET_DIGITS for c in run):
        return run
    digit_pos = [k for k, c in enumerate(run) if c in _LEET_DIGITS]
    bangs = [
        k for k, c in enumerate(run)
        if c == "!" and 0 < k < len(run) - 1 and run[k - 1] != "!" and run[k + 1] != "!"
    ]
    symbols = "$" in run or "@" in run[1:] or bool(bangs)
    mention = run[0] == "@" and not ("$" in run or bangs)
    if mention:  # @user, @MLB, @Royceda59: a handle, left as it is
        return run
    fold_digits = _fold_digits(run, letter_pos, digit_pos, symbols)
    out = []
    for k, c in enumerate(run):
        if c in _LEET_DIGITS and fold_digits:
            c = _LEET_DIGITS[c]
        elif c in "$@":
            c = "s" if c == "$" else "a"
        elif k in bangs:
            c = "i"
        out.append(c)
    return "".join(out)


def _leet(pieces: list[_Piece]) -> list[_Piece]:
    s = "".join(c for c, _, _ in pieces)
    mask = _protected(s)
    out = list(pieces)
    for m in _RUN.finditer(s):
        if any(mask[m.start() : m.end()]):
            continue
        folded = _leet_run(m.group())
        for k, c in enumerate(folded):
            _, st, en = out[m.start() + k]
            out[m.start() + k] = (c, st, en)
    return out


_STEPS = (
    ("format_chars", _format_chars),
    ("combining_marks", _combining_marks),
    ("emoji", _emoji),
    ("diacritics", _diacritics),
    ("confusables", _confusables),
    ("lowercase", _lowercase),
    ("split_letters", _split_letters),
    ("leet", _leet),
)
_UNREPORTED = frozenset({"lowercase"})


def normalize(text: str) -> NormalizedText:
    """The model view of ``text`` (see the module docstring for the steps), with its offset map.

    Raises ``TypeError`` if ``text`` is not a ``str``. Pure and deterministic.
    """
    if not isinstance(text, str):
        raise TypeError(f"normalize() takes a str, got {type(text).__name__}")
    pieces = _nfkc(text)
    steps = ["nfkc"] if "".join(c for c, _, _ in pieces) != text else []
    for name, step in _STEPS:
        new = step(pieces)
        if name not in _UNREPORTED and [c for c, _, _ in new] != [c for c, _, _ in pieces]:
            steps.append(name)
        pieces = new
    return NormalizedText(
        original=text,
        text="".join(c for c, _, _ in pieces),
        offsets=tuple((s, e) for _, s, e in pieces),
        steps=tuple(steps),
    )
