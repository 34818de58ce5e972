"""Separator tricks: single letters, digits and symbols spread apart so no word is visible (``f u c k``,
``f.u.c.k``), and the parts of the text that are never touched (URLs, e-mail addresses, @handles, IDs).

Used by :func:`engine.text.normalize.normalize` (its ``split_letters`` step) and by its ``leet``
step (:func:`protected`). Each step is ``(text, spans) -> (text, spans)`` over the lower-cased model
view, where ``spans[i]`` is the span of the original text that ``text[i]`` came from.

``split_letters``
    A run of at least three single letters, digits or ``$@!`` (at least two of
    them ASCII letters) becomes one word when the same one or two spaces
    separate each (``f u c k``; ``f u c k   y o u`` stays two words), or the
    same punctuation mark with the same spaces around it (``f.u.c.k``,
    ``f - u - c - k``), or punctuation marks without spaces (``f.u-c_k``).
    A spaced run stops short of a punctuation-split word (``u a b*i*t*c*h`` →
    ``u a bitch``); an apostrophe may follow (``T h a t's`` → ``that's``).
    ``e.g. x``, two single letters (``a i``, ``e.g.``) and letters glued to an
    apostrophe (``I'm a b``) are left alone.

URLs, e-mail addresses, ID-like codes (segments joined by ``-/_.:`` with a number of two or more
digits: ``5H1T-4477-B``, ``2023-CV-00451``) and @handles are exempt (:func:`protected`).
"""

from __future__ import annotations

import re

__all__ = ["protected", "split_letters"]

_Spans = list[tuple[int, int]]

_UNIT = r"[a-z0-9$@!]"
_SPACE_SEP = r"[^\S\n]{1,2}"
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
    return "".join(c for c, k in zip(text, keep) if k), [sp for sp, k in zip(spans, keep) if k]
