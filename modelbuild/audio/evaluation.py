"""Word error rate of the speech path on a manifest of clips (``path,transcript,...`` CSV, such as
``../shared/data/audio/manifest.csv``).

WER is jiwer's (Levenshtein alignment of words: substitutions + deletions + insertions over
reference words), after the normalization below on both sides. Each clip goes through the
serving path: :func:`rtaudit.engine.audio.decode.decode_audio`, VAD, Whisper.
"""

from __future__ import annotations

import csv
import re
import time
from dataclasses import dataclass
from pathlib import Path

from rtaudit.engine.audio.decode import decode_audio
from rtaudit.engine.audio.vad import VadParams, speech_segments

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _number_words(n: int) -> str:
    """``n`` (0-999) in English words, as a reference transcript spells it."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    return _ONES[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + _number_words(n % 100))


def normalize(text: str) -> str:
    """Lower case, ``mr.`` → ``mister``, numbers of up to three digits in words (longer digit
    strings digit by digit, as a spoken digit sequence), hyphens as spaces, other punctuation dropped."""
    text = text.lower().replace("-", " ")
    text = re.sub(r"\bmr\.?(?=\s)", "mister", text)

    def spell(m: re.Match[str]) -> str:
        digits = m.group(0)
        return f" {_number_words(int(digits))} " if len(digits) <= 3 else " " + " ".join(_ONES[int(d)] for d in digits) + " "

    text = re.sub(r"\d+", spell, text.replace(",", ""))
    text = re.sub(r"[^a-z' ]+", " ", text)
    return " ".join(text.split())


@dataclass(frozen=True)
class ClipResult:
    """One clip: its path (relative to the manifest), duration and decode+VAD+ASR time (s), texts, WER."""

    path: str
    duration_s: float
    wall_s: float
    reference: str
    hypothesis: str
    wer: float
    errors: int
    words: int


def evaluate(manifest: Path, recognizer, vad: VadParams = VadParams()) -> list[ClipResult]:
    """WER of ``recognizer`` (a :class:`rtaudit.engine.audio.asr.WhisperRecognizer`) on every clip
    of ``manifest``; a clip that fails to decode counts every reference word as deleted."""
    import jiwer

    results = []
    with open(manifest, newline="") as f:
        for row in csv.DictReader(f):
            reference = normalize(row["transcript"])
            started = time.perf_counter()
            data = (manifest.parent / row["path"]).read_bytes()
            audio = decode_audio(data, max_duration_s=3600.0)
            speech = speech_segments(audio.samples, vad)
            hypothesis = normalize(" ".join(w.text.strip() for w in recognizer.transcribe(speech.samples)))
            wall = time.perf_counter() - started
            out = jiwer.process_words(reference, hypothesis or "")
            errors = out.substitutions + out.deletions + out.insertions
            words = len(reference.split())
            results.append(ClipResult(row["path"], audio.duration_s, wall, reference, hypothesis, errors / words, errors, words))
    return results


def overall_wer(results: list[ClipResult]) -> float:
    """Word errors over reference words, all clips together."""
    return sum(r.errors for r in results) / max(1, sum(r.words for r in results))
