"""Voice activity detection: where the speech is, so silence costs the recognizer nothing.

Model: Silero VAD v6 (snakers4/silero-vad, MIT), the ONNX graph that ships inside the
``faster-whisper`` wheel (``faster_whisper/assets/silero_vad_v6.onnx``), run on onnxruntime by
``faster_whisper.vad`` with numpy alone. The ``silero-vad`` package's own wheel carries the same
model but imports torch for its tensors (no torchaudio is needed), so the worker would load
torch for nothing: this module uses the faster-whisper port and its timestamp map.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rtaudit.engine.audio.decode import SAMPLE_RATE_HZ


@dataclass(frozen=True)
class SpeechSegment:
    """One stretch of speech, ``[start_s, end_s)`` in the decoded audio's time, seconds."""

    start_s: float
    end_s: float


@dataclass(frozen=True)
class VadParams:
    """Silero VAD parameters (those of ``faster_whisper.vad.VadOptions``).

    Attributes:
        threshold: speech probability at or above which a 32 ms window is speech.
        min_speech_ms: shorter speech bursts are dropped, ms.
        min_silence_ms: a pause must last this long to split two segments, ms.
        speech_pad_ms: padding kept on each side of a segment, ms (word onsets and tails).
    """

    threshold: float = 0.5
    min_speech_ms: int = 120
    min_silence_ms: int = 500
    speech_pad_ms: int = 200


@dataclass(frozen=True)
class SpeechAudio:
    """The speech segments of an item laid end to end, and the map back to the original time.

    Attributes:
        samples: ``float32[m]`` mono at :data:`SAMPLE_RATE_HZ`, the segments concatenated.
        segments: the segments, in order, original time.
    """

    samples: np.ndarray
    segments: tuple[SpeechSegment, ...]
    _chunks: tuple[dict[str, int], ...]

    @property
    def speech_s(self) -> float:
        """Seconds of speech (what the recognizer will run on)."""
        return len(self.samples) / SAMPLE_RATE_HZ

    def original_time(self, t_s: float, *, is_end: bool = False) -> float:
        """A time in :attr:`samples` (seconds) as the time in the decoded audio (seconds, 0.01 s precision)."""
        from faster_whisper.vad import SpeechTimestampsMap

        if not self._chunks:
            return t_s
        return float(SpeechTimestampsMap(list(self._chunks), SAMPLE_RATE_HZ).get_original_time(t_s, is_end=is_end))


def speech_segments(samples: np.ndarray, params: VadParams = VadParams()) -> SpeechAudio:
    """Run Silero VAD over ``samples`` (``float32[n]``, mono, :data:`SAMPLE_RATE_HZ`).

    Returns:
        :class:`SpeechAudio`; no segments (and no samples) when there is no speech.
    """
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    options = VadOptions(threshold=params.threshold, min_speech_duration_ms=params.min_speech_ms,
                         min_silence_duration_ms=params.min_silence_ms, speech_pad_ms=params.speech_pad_ms)
    chunks = get_speech_timestamps(samples, options, sampling_rate=SAMPLE_RATE_HZ)
    chunks = [{"start": int(c["start"]), "end": int(c["end"])} for c in chunks if c["end"] > c["start"]]
    if not chunks:
        return SpeechAudio(np.zeros(0, np.float32), (), ())
    speech = np.concatenate([samples[c["start"]:c["end"]] for c in chunks]).astype(np.float32, copy=False)
    segments = tuple(SpeechSegment(c["start"] / SAMPLE_RATE_HZ, c["end"] / SAMPLE_RATE_HZ) for c in chunks)
    return SpeechAudio(speech, segments, tuple(chunks))
