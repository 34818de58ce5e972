"""A transcript built from timed words, and the time of any span of it.

The text scorer reports spans as ``[start, end)`` code-point offsets into the text it scored;
:func:`span_times` turns one into ``[start_s, end_s)``: from the start of the first word the
span touches to the end of the last.
"""

from __future__ import annotations

from dataclasses import dataclass

from rtaudit.engine.audio.asr import Word


@dataclass(frozen=True)
class Transcript:
    """Words joined into one text.

    Attributes:
        text: the words joined with single spaces, stripped.
        words: the words, their times in the original audio, seconds.
        offsets: ``[start, end)`` code points of ``words[i]`` in ``text``.
    """

    text: str
    words: tuple[Word, ...]
    offsets: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, words: list[Word]) -> "Transcript":
        parts: list[str] = []
        offsets: list[tuple[int, int]] = []
        at = 0
        for w in words:
            token = w.text.strip()
            if parts:
                at += 1
            offsets.append((at, at + len(token)))
            parts.append(token)
            at += len(token)
        return cls(" ".join(parts), tuple(words), tuple(offsets))

    def span_times(self, start: int, end: int) -> tuple[float, float] | None:
        """``(start_s, end_s)`` of the words overlapping ``[start, end)``; ``None`` when none does."""
        hit = [w for w, (s, e) in zip(self.words, self.offsets) if s < end and e > start]
        if not hit:
            return None
        return round(hit[0].start_s, 2), round(max(w.end_s for w in hit), 2)
