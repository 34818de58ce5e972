"""Whole-document scoring: which windows of a long normalized text the encoder reads.

MiniLM reads :data:`rtaudit.engine.text.encoder.MAX_TOKENS` word pieces (62 plus ``[CLS]``/``[SEP]``);
a longer text used to be cut there, and its mean-pooled embedding dilutes one abusive sentence
among benign ones (an insult scoring 0.99 alone scored 0.35 after 20 benign words). So a text
longer than one window is read as several windows, each scored on its own, and the document is
as bad as its worst window (:class:`rtaudit.engine.text.scoring.TextScorer` takes the maximum per
category and keeps the spans of every flagged window).

:func:`plan_windows` works on the word pieces of the normalized text (no special tokens):

1. A text of at most :data:`WINDOW_TOKENS` pieces is one window: scored exactly as before.
2. Otherwise each sentence is a window (a sentence starts after ``. ! ? …`` and their
   CJK forms followed by white space, and after a blank line; not after a single line break,
   which wraps lines of OCR'd or pasted text mid-sentence: fragments such as ``lazy fox.``
   alone read as insults), so an abusive sentence is read alone, as it would be as a
   message of its own.
3. A sentence longer than a window is read by sliding windows of :data:`WINDOW_TOKENS` pieces
   that overlap by :data:`OVERLAP_TOKENS`; a window ends, and the next begins, at the start of a
   word where one is within :data:`SNAP_TOKENS` pieces (a word is not cut into pieces the
   tokenizer would not give it).
4. Cost bound: the pieces encoded, special tokens and overlaps included, are at most
   :data:`MAX_COST_RATIO` times the text's own (``n + 2``). While the plan is over that
   bound, the two adjacent windows with the fewest pieces together are merged (short
   sentences share a window, long ones stay alone); if merging cannot bring it under
   (it always can for ordinary text), plain sliding windows over the whole text are used
   (at most ``(WINDOW_TOKENS + 2) / (WINDOW_TOKENS - OVERLAP_TOKENS - SNAP_TOKENS)`` = 1.28).

All windows of a batch of texts go to the encoder in the same batched call (length-sorted
batches), so a 5,000-word text costs about as much as the same words sent as ~400 messages.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MAX_COST_RATIO", "OVERLAP_TOKENS", "WINDOW_TOKENS", "TokenView", "encoded_cost", "fits_untokenized",
           "plan_windows", "token_view", "window_chars"]

#: content word pieces per window: the encoder's 64 less [CLS] and [SEP].
WINDOW_TOKENS = 62
#: pieces shared by consecutive sliding windows over one long sentence.
OVERLAP_TOKENS = 8
#: how far a window edge may move to land on the start of a word.
SNAP_TOKENS = 4
#: tokens encoded (specials and overlaps included) ≤ this × the text's own (``n + 2``).
MAX_COST_RATIO = 1.3

_TERMINATORS = frozenset(".!?…。！？")


@dataclass(frozen=True)
class TokenView:
    """The word pieces of a normalized text: ``offsets[i]`` is the ``[start, end)`` character span
    of piece ``i``; ``word_start[i]`` says whether it begins a word (not a ``##`` continuation);
    ``sentence_start[i]`` whether it begins a sentence."""

    offsets: tuple[tuple[int, int], ...]
    word_start: tuple[bool, ...]
    sentence_start: tuple[bool, ...]


def token_view(text: str, offsets: Sequence[tuple[int, int]], tokens: Sequence[str]) -> TokenView:
    """:class:`TokenView` of ``text`` from its word pieces (``tokens``, their character ``offsets``)."""
    word_start, sentence_start = [], []
    for i, ((start, _), tok) in enumerate(zip(offsets, tokens)):
        word_start.append(not tok.startswith("##"))
        if i == 0:
            sentence_start.append(True)
            continue
        prev_start, prev_end = offsets[i - 1]
        gap = text[prev_end:start]
        after_stop = text[prev_start:prev_end] in _TERMINATORS and bool(gap) and gap.isspace() \
            and text[start:offsets[i][1]] not in _TERMINATORS
        sentence_start.append(after_stop or gap.count("\n") >= 2)
    return TokenView(tuple(offsets), tuple(word_start), tuple(sentence_start))


def encoded_cost(windows: Sequence[tuple[int, int]]) -> int:
    """Word pieces the encoder reads for ``windows`` (token ranges), ``[CLS]``/``[SEP]`` included."""
    return sum(e - s + 2 for s, e in windows)


def _slide(s: int, e: int, word_start: Sequence[bool], size: int, overlap: int, snap: int) -> list[tuple[int, int]]:
    """Sliding windows over pieces ``[s, e)``: ``size`` long, ``overlap`` shared, edges on word starts."""
    out: list[tuple[int, int]] = []
    a = s
    while e - a > size:
        b = a + size
        for c in range(b, b - snap, -1):
            if word_start[c]:
                b = c
                break
        out.append((a, b))
        a = b - overlap
        for c in range(a, a + snap):
            if word_start[c]:
                a = c
                break
    out.append((a, e))
    return out


def _merge(segments: list[tuple[int, int]], size: int, budget: int) -> list[tuple[int, int]]:
    """Merge adjacent segments, the pair with the fewest pieces first, until within ``budget``
    (or no adjacent pair fits in ``size``)."""
    segs: list[tuple[int, int] | None] = list(segments)
    nxt = list(range(1, len(segs) + 1))
    prv = list(range(-1, len(segs) - 1))
    cost = encoded_cost(segments)
    heap = [(segs[i + 1][1] - segs[i][0], i, i + 1) for i in range(len(segs) - 1)]  # type: ignore[index]  # segs holds None only for merged-away slots; the first pass has none
    heapq.heapify(heap)
    while cost > budget and heap:
        width, i, j = heapq.heappop(heap)
        a, b = segs[i], segs[j]
        if a is None or b is None or nxt[i] != j or width > size:
            continue  # stale entry (a side was merged since), or the pair does not fit one window
        merged = (a[0], b[1])
        cost -= (a[1] - a[0] + 2) + (b[1] - b[0] + 2) - (merged[1] - merged[0] + 2)
        segs[i], segs[j] = merged, None
        nxt[i] = nxt[j]
        if nxt[i] < len(segs):
            prv[nxt[i]] = i
            heapq.heappush(heap, (segs[nxt[i]][1] - merged[0], i, nxt[i]))  # type: ignore[index]  # nxt[i] indexes a live segment: merged ones are unlinked before
        if prv[i] >= 0:
            heapq.heappush(heap, (merged[1] - segs[prv[i]][0], prv[i], i))  # type: ignore[index]  # prv[i] indexes a live segment: merged ones are unlinked before
    return [s for s in segs if s is not None]


def plan_windows(view: TokenView, *, size: int = WINDOW_TOKENS, overlap: int = OVERLAP_TOKENS,
                 snap: int = SNAP_TOKENS, ratio: float = MAX_COST_RATIO) -> list[tuple[int, int]]:
    """Token ranges ``[start, end)`` to encode for a text whose pieces are ``view`` (see the module
    docstring). Every piece is in at least one window; ``encoded_cost(result) <= ratio * (n + 2)``.
    A text of at most ``size`` pieces (or none) gives ``[(0, n)]``."""
    n = len(view.offsets)
    if n <= size:
        return [(0, n)]
    budget = math.floor(ratio * (n + 2))
    starts = [i for i in range(n) if i == 0 or view.sentence_start[i]]
    segments: list[tuple[int, int]] = []
    for s, e in zip(starts, starts[1:] + [n]):
        segments.extend([(s, e)] if e - s <= size else _slide(s, e, view.word_start, size, overlap, snap))
    if encoded_cost(segments) > budget:
        segments = _merge(segments, size, budget)
    if encoded_cost(segments) > budget:
        segments = _slide(0, n, view.word_start, size, overlap, snap)
    return segments


def window_chars(view: TokenView, windows: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Character spans ``[start, end)`` of the normalized text covered by each token window."""
    return [(view.offsets[s][0], view.offsets[e - 1][1]) for s, e in windows if e > s]


def fits_untokenized(text: str, size: int = WINDOW_TOKENS) -> bool:
    """Whether ``text`` surely fits one window without tokenizing it (each piece covers ≥ 1 character)."""
    return len(text) <= size

