"""Separator tricks: single letters, digits and symbols spread apart so no word is visible (``f u c k``,
``f.u.c.k``), and the parts of the text that are never touched (URLs, e-mail addresses, @handles, IDs).

Used by :func:`rtaudit.engine.text.normalize.normalize` (its ``split_letters`` step) and by its ``leet``
step (:func:`protected`). Each step is ``(text, spans) -> (text, spans)`` over the lower-cased model
view, where ``spans[i]`` is the span of the original text that ``text[i]`` came from.

One rule for every separator trick: a run of single characters spread apart by the same
separator each time is one word, a larger gap is a word gap, and a word is never glued to what a
user wrote as a word of its own. The steps, in the order :func:`~rtaudit.engine.text.normalize.normalize`
runs them (each with its benign control in ``tests/unit/test_separators.py``):

``underscore_joins`` (before ``split_letters``)
    ``_`` between two words, one of them two characters or longer, is a word gap:
    ``you_bitch`` → ``you bitch``, ``snake_case`` → ``snake case`` (one character for one, so
    offsets do not move). Underscores between single letters are left to ``split_letters``
    (``f_u_c_k``); handles, URLs, e-mail addresses and codes are untouched.
``split_letters``
    A run of at least three single letters, digits or ``$@!`` (at least two of
    them ASCII letters) becomes one word when the same separator stands between each:
    one or two spaces (``f u c k``; ``f u c k   y o u`` stays two words), a line break with
    any spaces around it (``f⏎u⏎c⏎k``; a blank line is a word gap), the same punctuation mark
    with the same spaces around it (``f.u.c.k``, ``f - u - c - k``), or punctuation marks
    without spaces (``f.u-c_k``).
    A spaced run stops short of a punctuation-split word (``u a b*i*t*c*h`` →
    ``u a bitch``); an apostrophe may follow (``T h a t's`` → ``that's``).
    ``e.g. x``, two single letters (``a i``, ``e.g.``) and letters glued to an
    apostrophe (``I'm a b``) are left alone.
    Word gaps the writer did not mark: a run of letters separated by white space whose glued
    form is not a known word (:mod:`rtaudit.engine.text.lexicon`) is read as the likeliest sequence of
    known words when there is one, keeping the writer's separator between them:
    ``f u c k y o u`` → ``fuck you``, ``y o u a r e a b i t c h`` → ``you are a bitch``, and a
    one-letter word is not glued to the spaced word after it (``you are a b i t c h`` →
    ``you are a bitch``, while ``a s s h o l e`` → ``asshole``, a word).
``respell`` (after ``leet``)
    A word that is not a known word (:func:`rtaudit.engine.text.lexicon.rank`) with letters stretched
    (a run of three or more of one letter) or masked (one or two ``*`` between letters) is read as the
    known word it spells, when there is one: every stretched run becomes two letters or one, every
    ``*`` one letter, and of the known candidates the most offensive word wins (alt-profanity-check's weight: a writer masks letters
    to hide profanity, ``sh*t`` is ``shit`` rather than ``shut``), else the most frequent: ``idddiot`` → ``idiot``, ``sooo`` → ``so``, ``coool`` → ``cool``,
    ``f*ck`` → ``fuck``, ``i*iot`` → ``idiot``, ``w*lcome`` → ``welcome``. Known words (``xxx``, ``www``),
    words with no known reading and markdown ``*emphasis*`` stay as written; a masked letter keeps the
    ``*``'s span, a dropped letter of a run its neighbour's.
``inner_space`` (after ``respell``)
    Two letter runs separated by one space whose concatenation is an offensive word
    (:func:`rtaudit.engine.text.lexicon.offensive`) are one word unless both are common words:
    ``bi tch`` → ``bitch``, ``as shole`` → ``asshole``; ``the pen is`` stays.

``phonetic`` (after ``respell``)
    A word that is not a known word and is spelled by its sound is read as the offensive word it
    sounds like, when one of its readings under :data:`PHONETIC_RULES` (``ph`` → ``f``, ``z`` → ``s``,
    ``q`` → ``ck``, ``oo`` → ``u``, ``ee`` → ``i``, ``ya``/``ia`` → ``i``, a ``|`` between letters → ``l``) is
    an offensive word of weight :data:`PHONETIC_MIN_WEIGHT` or more: ``phuck`` → ``fuck``, ``azzhole`` →
    ``asshole``, ``fuqing`` → ``fucking``, ``stoopid`` → ``stupid``, ``eediot`` → ``idiot``, ``byatch`` →
    ``bitch``, ``|oser`` → ``loser``. Known words stay (``phone``, ``jazz``), as do words whose readings
    are not offensive (``fuchsia``, ``yes | no``); a read letter keeps the span of what it was read from.

``glued_words`` (after ``inner_space``)
    A word of :data:`GLUED_MIN_LETTERS` letters or more that is not a known word and reads as
    known words of :data:`GLUED_MIN_PART` letters or more, two of them offensive and one of those
    strongly (:data:`GLUED_MIN_WEIGHT`), gets its word
    gaps back: ``stupididiot`` → ``stupid idiot`` (OCR of a frame often drops the gap between two
    words on one line), ``#dumbbitch`` → ``#dumb bitch``. Known words are never cut (``therapist``), nor a word with one
    offensive part (``penistone``, ``hellfire``: the Scunthorpe problem);
    a word with a shorter reading is left (``therapists`` would read ``the rapists``), as is one
    with no reading (``scunthorpe``).

URLs, e-mail addresses, ID-like codes (segments joined by ``-/_.:`` with a number of two or more
digits: ``5H1T-4477-B``, ``2023-CV-00451``) and @handles are exempt (:func:`protected`).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

from rtaudit.engine.text import lexicon

__all__ = ["glued_words", "inner_space", "phonetic", "protected", "respell", "split_letters", "underscore_joins"]

_Spans = list[tuple[int, int]]

_UNIT = r"[a-z0-9$@!]"
_SPACE_SEP = r"[^\S\n]{1,2}|[^\S\n]*\n[^\S\n]*"
_PUNCT = r"[.\-_*,|/~+:;·•]"
# >= 3 single units: with punctuation marks and no spaces between them; or with the same
# spaces (one or two) between each ("f u c k   y o u" stays two words), not running into a punctuation-split word
# ("u a b*i*t*c*h"); or with the same mark and spaces. An apostrophe may follow ("t h a t's").
_SPLIT = re.compile(
    rf"(?<![\w'’]){_UNIT}"
    rf"(?:(?:{_PUNCT}{_UNIT}){{2,}}"
    rf"|(?P<sep>{_SPACE_SEP}){_UNIT}(?:(?P=sep){_UNIT})+(?!{_PUNCT}{_UNIT}{_PUNCT}{_UNIT})"
    rf"|(?P<psep>[^\S\n]{{0,3}}{_PUNCT}[^\S\n]{{0,3}}){_UNIT}(?:(?P=psep){_UNIT})+)"
    rf"(?!\w)"
)
_UNIT_RE = re.compile(_UNIT)
_CODE = re.compile(r"[a-z0-9]+(?:[-/_.:][a-z0-9]+)+")
#: A whole @handle (``@g_anderson4``, ``@Royceda59``): ``@`` not glued to a word, then word characters
#: (underscore included), not running into ``$``/``@`` or a ``!`` inside a word (``@$$hole``, ``@sh!t`` are not handles).
_HANDLE = re.compile(r"(?<![\w@$!])@\w+(?![\w$@]|!\w)")


def _is_code(token: str) -> bool:
    """``A55-1337``, ``5H1T-4477-B``, ``2023-CV-00451``: segments joined by ``-/_.:`` with a 2+ digit number."""
    core = token.strip("#()[].,;:!?\"'")
    if not _CODE.fullmatch(core):
        return False
    return any(seg.isdigit() and len(seg) >= 2 for seg in re.split(r"[-/_.:]", core))


def _protected_from(token: str) -> int | None:
    """Where in ``token`` a URL or e-mail address starts, or ``None``. Linear in ``len(token)``."""
    scheme = token.find("://")
    if scheme > 0:
        start = scheme
        while start > 0 and (token[start - 1].isalnum() or token[start - 1] in "+.-"):
            start -= 1
        if start < scheme and token[start].isalpha():
            return start
    www = token.find("www.")
    if www >= 0:
        return www
    at = token.find("@")
    if at > 0 and token.count("@") == 1:
        domain = token[at + 1 :].rstrip(".,;:!?)]}'\"")
        tld = domain.rsplit(".", 1)
        if len(tld) == 2 and tld[0] and len(tld[1]) >= 2 and tld[1].isalpha():
            return 0
    return None


def protected(s: str) -> list[bool]:
    """Per character: inside a URL, an e-mail address, an @handle or an ID-like code (no ``split_letters``, no ``leet``).

    Token by token with string operations, so it stays linear on hostile input.
    """
    mask = [False] * len(s)
    for m in re.finditer(r"\S+", s):
        token = m.group()
        start = 0 if _is_code(token) else _protected_from(token)
        if start is not None:
            mask[m.start() + start : m.end()] = [True] * (m.end() - m.start() - start)
    for m in _HANDLE.finditer(s):
        mask[m.start() : m.end()] = [True] * (m.end() - m.start())
    return mask


def _segment(word: str) -> list[int] | None:
    """Cut points splitting ``word`` into the likeliest known words (:func:`rtaudit.engine.text.lexicon.word_cost`;
    no two one-letter words in a row), or ``None`` when ``word`` is known or cannot be read as known words."""
    if lexicon.word_cost(word) is not None or len(word) < 4:
        return None
    n = len(word)
    best: list[tuple[float, int, int]] = [(0.0, -1, 0)] + [(math.inf, -1, 0)] * n  # cost, previous cut, last length
    for end in range(1, n + 1):
        for start in range(max(0, end - 24), end):
            cost_here = best[start][0]
            if cost_here == math.inf or (end - start == 1 and best[start][2] == 1):
                continue
            cost = lexicon.word_cost(word[start:end])
            if cost is not None and cost_here + cost < best[end][0]:
                best[end] = (cost_here + cost, start, end - start)
    if best[n][0] == math.inf:
        return None
    cuts, k = [], n
    while k > 0:
        k = best[k][1]
        cuts.append(k)
    return sorted(cuts)[1:]


def split_letters(text: str, spans: _Spans) -> tuple[str, _Spans]:
    matches = list(_SPLIT.finditer(text))
    if not matches:
        return text, spans
    mask = protected(text)
    keep = [True] * len(text)
    for m in matches:
        if any(mask[m.start() : m.end()]):
            continue
        units = [k for k in range(m.start(), m.end()) if _UNIT_RE.match(text[k])]
        if sum(1 for k in units if "a" <= text[k] <= "z") < 2:
            continue
        unit_set = set(units)
        for k in range(m.start(), m.end()):
            keep[k] = k in unit_set
        glued = "".join(text[k] for k in units)
        if (m.group("sep") or "").isspace() and glued.isalpha():
            for cut in _segment(glued) or ():  # keep the writer's separator where a word ends
                for k in range(units[cut - 1] + 1, units[cut]):
                    keep[k] = True
    return "".join(c for c, k in zip(text, keep) if k), [sp for sp, k in zip(spans, keep) if k]


_JOINED = re.compile(r"(?<=[^\W_])_+(?=[^\W_])")
_ALNUM_RUN = re.compile(r"[^\W_]+")


def underscore_joins(text: str, spans: _Spans) -> tuple[str, _Spans]:
    """``_`` between two words (one of them 2+ characters) becomes a space (see the module docstring)."""
    if "_" not in text:
        return text, spans
    joins = list(_JOINED.finditer(text))
    if not joins:
        return text, spans
    mask = protected(text)
    chars = list(text)
    for m in joins:
        if any(mask[m.start() : m.end()]):
            continue
        left = _ALNUM_RUN.match(text[::-1], len(text) - m.start())
        right = _ALNUM_RUN.match(text, m.end())
        if max(len(left.group()) if left else 0, len(right.group()) if right else 0) >= 2:
            chars[m.start() : m.end()] = " " * (m.end() - m.start())
    return "".join(chars), spans


_LETTERS = re.compile(r"[a-z]+")


def inner_space(text: str, spans: _Spans) -> tuple[str, _Spans]:
    """Join two letter runs around one space into the offensive word they spell, unless both are
    common words (see the module docstring)."""
    words = [m for m in _LETTERS.finditer(text)
             if (m.start() == 0 or not (text[m.start() - 1].isalnum() or text[m.start() - 1] in "'’_"))
             and (m.end() == len(text) or not (text[m.end()].isalnum() or text[m.end()] in "'’_"))]
    if len(words) < 2:
        return text, spans
    offensive = lexicon.offensive()
    drop: set[int] = set()
    current = words[0].group()
    for prev, m in zip(words, words[1:]):
        word = m.group()
        joined = current + word
        if (m.start() - prev.end() == 1 and text[prev.end()] == " " and len(current) >= 2 and len(word) >= 2
                and joined in offensive and not (lexicon.common(current) and lexicon.common(word))):
            drop.add(prev.end())
            current = joined
        else:
            current = word
    if not drop:
        return text, spans
    mask = protected(text)
    drop = {k for k in drop if not mask[k]}
    return "".join(c for k, c in enumerate(text) if k not in drop), [sp for k, sp in enumerate(spans) if k not in drop]


_RESPELL_TOKEN = re.compile(r"(?<![\w*'’])[a-z]+(?:\*{1,2}[a-z]+)*(?![\w*'’])")
_STRETCH = re.compile(r"([a-z])\1{2,}")
#: the most stretched runs and ``*`` one word may have for :func:`respell` to try its readings.
RESPELL_MAX_RUNS, RESPELL_MAX_MASKS = 3, 2
_ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def _readings(token: str) -> list[tuple[str, list[int]]]:
    """Every reading of ``token`` with each stretched run cut to two letters or one and each ``*`` a letter:
    ``(word, kept)`` where ``kept`` are the token's indices each letter of ``word`` came from."""
    runs = [(m.start(), m.end()) for m in _STRETCH.finditer(token)]
    masks = [k for k, c in enumerate(token) if c == "*"]
    if not (runs or masks) or len(runs) > RESPELL_MAX_RUNS or len(masks) > RESPELL_MAX_MASKS:
        return []
    out: list[tuple[str, list[int]]] = [("", [])]
    k = 0
    while k < len(token):
        run = next((r for r in runs if r[0] == k), None)
        if run is not None:
            out = [(w + token[k] * n, kept + list(range(k, k + n))) for w, kept in out for n in (2, 1)]
            k = run[1]
        elif token[k] == "*":
            out = [(w + c, kept + [k]) for w, kept in out for c in _ALPHABET]
            k += 1
        else:
            out = [(w + token[k], kept + [k]) for w, kept in out]
            k += 1
    return out


def _best_reading(token: str) -> tuple[str, list[int]] | None:
    known = [(w, kept) for w, kept in _readings(token) if lexicon.rank(w) is not None]
    if not known:
        return None
    weight = lexicon.offensive_weights()
    return min(known, key=lambda r: (-weight.get(r[0], 0.0), lexicon.rank(r[0]), -len(r[0])))


def _splice(text: str, spans: _Spans, edits: list[tuple[int, int, str, _Spans]]) -> tuple[str, _Spans]:
    """``text`` with each ``(start, end, word, word_spans)`` of ``edits`` (in order, not overlapping)
    put in place of ``text[start:end]``, and the spans to match."""
    if not edits:
        return text, spans
    chars: list[str] = []
    out: _Spans = []
    at = 0
    for start, end, word, word_spans in edits:
        chars.extend(text[at:start])
        out.extend(spans[at:start])
        chars.extend(word)
        out.extend(word_spans)
        at = end
    chars.extend(text[at:])
    out.extend(spans[at:])
    return "".join(chars), out


def respell(text: str, spans: _Spans) -> tuple[str, _Spans]:
    """Stretched and masked letters read as the known word they spell (see the module docstring)."""
    if "*" not in text and not _STRETCH.search(text):
        return text, spans
    mask = protected(text)
    edits: list[tuple[int, int, str, _Spans]] = []
    for m in _RESPELL_TOKEN.finditer(text):
        token = m.group()
        if mask[m.start()] or ("*" not in token and (not _STRETCH.search(token) or lexicon.rank(token) is not None)):
            continue
        best = _best_reading(token)
        if best is None:
            continue
        word, kept = best
        edits.append((m.start(), m.end(), word, [spans[m.start() + k] for k in kept]))
    return _splice(text, spans, edits)


#: sound spellings :func:`phonetic` undoes: (as written, as read), tried at every place they occur.
PHONETIC_RULES: tuple[tuple[str, str], ...] = (
    ("ph", "f"), ("zz", "ss"), ("z", "s"), ("q", "ck"), ("oo", "u"), ("ee", "i"), ("ya", "i"), ("ia", "i"), ("|", "l"),
)
#: alt-profanity-check weight a reading must reach (``loser`` 3.0, ``stupid`` 5.3, ``fuck`` 11.1).
PHONETIC_MIN_WEIGHT = 2.5
#: most places one word may have a sound spelling at (each doubles the readings tried).
PHONETIC_MAX_SITES = 4
_PHONETIC_TOKEN = re.compile(r"(?<![\w|'’])\|?[a-z]+(?:\|+[a-z]+)*\|*(?![\w|'’])")
_PHONETIC_SITE = re.compile("|".join(re.escape(a) for a, _ in PHONETIC_RULES))


def _sound_readings(token: str) -> list[tuple[str, _Spans]]:
    """Every reading of ``token`` with each :data:`PHONETIC_RULES` site read or kept: ``(word, spans)``
    with each letter's ``[start, end)`` in ``token``."""
    sites = list(_PHONETIC_SITE.finditer(token))
    if not sites or len(sites) > PHONETIC_MAX_SITES:
        return []
    rules = dict(PHONETIC_RULES)
    out: list[tuple[str, _Spans]] = [("", [])]
    k = 0
    for m in sites:
        plain = [(k + i, k + i + 1) for i in range(m.start() - k)]
        out = [(w + token[k:m.start()], sp + plain) for w, sp in out]
        read = rules[m.group()]
        out = [o for w, sp in out for o in ((w + m.group(), sp + [(m.start() + i, m.start() + i + 1) for i in range(len(m.group()))]),
                                            (w + read, sp + [(m.start(), m.end())] * len(read)))]
        k = m.end()
    tail = [(k + i, k + i + 1) for i in range(len(token) - k)]
    return [(w + token[k:], sp + tail) for w, sp in out]


def phonetic(text: str, spans: _Spans) -> tuple[str, _Spans]:
    """Sound spellings read as the offensive word they sound like (see the module docstring)."""
    if not _PHONETIC_SITE.search(text):
        return text, spans
    weight = lexicon.offensive_weights()
    edits: list[tuple[int, int, str, _Spans]] = []
    mask = None
    for m in _PHONETIC_TOKEN.finditer(text):
        token = m.group()
        if lexicon.rank(token) is not None:
            continue
        readings = [(w, sp) for w, sp in _sound_readings(token) if weight.get(w, 0.0) >= PHONETIC_MIN_WEIGHT]
        if not readings:
            continue
        mask = protected(text) if mask is None else mask
        if mask[m.start()]:
            continue
        word, local = max(readings, key=lambda r: weight[r[0]])
        edits.append((m.start(), m.end(), word, [(spans[m.start() + a][0], spans[m.start() + b - 1][1]) for a, b in local]))
    return _splice(text, spans, edits)


#: shortest word :func:`glued_words` tries to cut, letters.
GLUED_MIN_LETTERS = 8
#: alt-profanity-check weight (:func:`rtaudit.engine.text.lexicon.offensive_weights`) one part of a glued
#: word must reach: ``bitch`` 9.8, ``idiot`` 6.3, ``stupid`` 5.3, ``dumb`` 3.1 do; ``hell`` 3.0, ``kill`` 2.3,
#: ``screw`` 2.0, ``white`` 1.5 do not (``hellfire``, ``killzone``, ``screwdrivers``, ``whitehouse`` stay).
GLUED_MIN_WEIGHT = 3.0
#: shortest known word :func:`glued_words` cuts out, letters (``the``, ``ass``, ``you`` are too short
#: to be trusted inside an unknown word).
GLUED_MIN_PART = 4
_GLUED_TOKEN = re.compile(rf"(?<![^\W_#])[a-z]{{{GLUED_MIN_LETTERS},}}(?![^\W_])")


@lru_cache(maxsize=1)
def _strongly_offensive() -> re.Pattern[str]:
    """Any offensive word of :data:`GLUED_MIN_PART`+ letters and weight :data:`GLUED_MIN_WEIGHT`+ (the cheap
    test a glued word must pass before it is segmented)."""
    words = sorted((w for w, v in lexicon.offensive_weights().items() if v >= GLUED_MIN_WEIGHT and len(w) >= GLUED_MIN_PART),
                   key=len, reverse=True)
    return re.compile("|".join(map(re.escape, words)))


def glued_words(text: str, spans: _Spans) -> tuple[str, _Spans]:
    """Word gaps put back into a glued word that reads as known words, two offensive (see the module
    docstring). Each inserted space carries the span of the letter after it."""
    edits: list[tuple[int, int, str, _Spans]] = []
    mask = None
    weight = lexicon.offensive_weights()
    strong = _strongly_offensive()
    for m in _GLUED_TOKEN.finditer(text):
        token = m.group()
        if not strong.search(token) or lexicon.rank(token) is not None:
            continue
        cuts = _segment(token)
        if not cuts:
            continue
        bounds = [0, *cuts, len(token)]
        parts = [token[a:b] for a, b in zip(bounds, bounds[1:])]
        weights = sorted((weight.get(p, 0.0) for p in parts), reverse=True)
        if min(map(len, parts)) < GLUED_MIN_PART or weights[0] < GLUED_MIN_WEIGHT or weights[1] <= 0.0:
            continue
        mask = protected(text) if mask is None else mask
        if mask[m.start()]:
            continue
        word_spans = list(spans[m.start():m.end()])
        for cut in reversed(cuts):
            word_spans.insert(cut, spans[m.start() + cut])
        edits.append((m.start(), m.end(), " ".join(parts), word_spans))
    return _splice(text, spans, edits)
