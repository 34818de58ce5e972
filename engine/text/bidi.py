"""Right-to-left overrides read as displayed: the ``bidi_override`` step of :func:`rtaudit.engine.text.normalize.normalize`.

A right-to-left override (U+202E) makes the text after it, up to a pop (U+202C) or the end of the line, display
in reverse: ``\u202etoidi diputs`` shows as "stupid idiot". A run with no right-to-left letter (Hebrew, Arabic,
...: those display in their logical order either way) is reversed, so the models read what a person sees; each
of its characters keeps the span of the whole run, so offsets stay non-decreasing. A run with right-to-left
letters keeps its order and its characters' own spans. Source of the display rule: the Unicode Bidirectional
Algorithm (UAX #9, rules X6 and L2).
"""

from __future__ import annotations

import unicodedata

_Spans = list[tuple[int, int]]

_RLO, _PDF = "\u202e", "\u202c"


def bidi_override(text: str, spans: _Spans) -> tuple[str, _Spans]:
    """``text`` (a view of an original text, ``spans[i]`` the ``[start, end)`` of the original that ``text[i]``
    came from) with each right-to-left override run in display order and its controls removed, and the new
    spans (see the module docstring). Pure; a text without U+202E comes back as it is."""
    if _RLO not in text:
        return text, spans
    chars: list[str] = []
    out: _Spans = []
    i, n = 0, len(text)
    while i < n:
        if text[i] != _RLO:
            chars.append(text[i])
            out.append(spans[i])
            i += 1
            continue
        j = i + 1
        while j < n and text[j] not in (_PDF, "\n", _RLO):
            j += 1
        run = text[i + 1:j]
        end = j + 1 if j < n and text[j] == _PDF else j
        whole = (spans[i][0], spans[end - 1][1])
        rtl = any(unicodedata.bidirectional(c) in ("R", "AL") for c in run)
        chars.extend(run if rtl else run[::-1])
        out.extend(spans[i + 1:j] if rtl else [whole] * len(run))
        i = end
    return "".join(chars), out
