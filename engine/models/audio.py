"""The ``audio`` stage: decode (PyAV) → voice activity (Silero VAD) → Whisper tiny.en with word
times → the transcript scored by the text model; flagged spans become evidence with
``time_s = [start_s, end_s)`` in the original audio's time.

Outcomes other than scores, each an error partial that says why (never scored as clean):
``media_undecodable`` (not audio, no audio stream, too short) and ``media_too_large`` (over
the duration limit) go to the DLQ with the original record; ``no_speech`` (VAD found none)
and ``recognition_failed`` (speech, but no words) do not, being no fault of the input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rtaudit.engine.audio.asr import WhisperRecognizer
from rtaudit.engine.audio.decode import DecodedAudio, decode_audio
from rtaudit.engine.audio.transcript import Transcript
from rtaudit.engine.audio.vad import VadParams, speech_segments
from rtaudit.engine.isolation import Isolated
from rtaudit.engine.media import MediaPolicy, load_bytes
from rtaudit.engine.models import StageOutput
from rtaudit.engine.models.text import model_ref, stage_output
from rtaudit.engine.models.video import AUDIO_TRACK
from rtaudit.engine.text.scoring import TextScorer
from rtaudit.schemas.errors import MediaUndecodable, NoSpeech, RecognitionFailed
from rtaudit.schemas.messages import Evidence, ModalityTask, ModelRef

#: most characters of the transcript carried as evidence (the full text is scored).
TRANSCRIPT_EVIDENCE_CHARS = 1000


@dataclass(frozen=True)
class AudioLimits:
    """Per-item limits of the audio stage.

    Attributes:
        min_duration_s: shorter audio is refused (``media_undecodable``), seconds.
        max_duration_s: longer audio is refused (``media_too_large``), seconds.
        vad: Silero VAD parameters.
    """

    min_duration_s: float = 0.1
    max_duration_s: float = 1800.0
    vad: VadParams = field(default_factory=VadParams)


class SpeechScorer:
    """Decoded audio → transcript (VAD, then Whisper on the speech alone) → text scores.

    Shared by the audio stage and the video stage (a video's audio track).
    """

    def __init__(self, recognizer: WhisperRecognizer, scorer: TextScorer, vad: VadParams = VadParams()) -> None:
        self.recognizer, self.scorer, self.vad = recognizer, scorer, vad
        text = model_ref(scorer)
        self.model = ModelRef(name=f"{recognizer.name}+silero-vad+{text.name}", version=f"{recognizer.version}+{text.version}")

    def transcribe(self, audio: DecodedAudio) -> Transcript:
        """The transcript of ``audio`` with word times in its own time, seconds.

        Raises:
            NoSpeech: VAD found no speech.
            RecognitionFailed: speech was found but no word recognized.
        """
        speech = speech_segments(audio.samples, self.vad)
        if not speech.segments:
            raise NoSpeech(f"no speech detected in {audio.duration_s:.2f} s of audio ({audio.source})")
        words = self.recognizer.transcribe(speech.samples)
        if not words:
            raise RecognitionFailed(f"{speech.speech_s:.2f} s of speech in {len(speech.segments)} segments, "
                                    f"but no word recognized ({audio.source})")
        timed = [type(w)(w.text, speech.original_time(w.start_s), speech.original_time(w.end_s, is_end=True), w.probability)
                 for w in words]
        return Transcript.of(timed)

    def score(self, transcripts: list[Transcript]) -> list[StageOutput]:
        """One output per transcript (one text-scorer call): the text model's scores; evidence
        = its spans with ``time_s``, then the transcript itself (``label="transcript"``)."""
        if not transcripts:
            return []
        outputs = []
        for t, result in zip(transcripts, self.scorer.score([t.text for t in transcripts])):
            text_out = stage_output(result)
            evidence = [e.model_copy(update={"time_s": t.span_times(*e.span)}) if e.span else e for e in text_out.evidence]
            evidence.append(Evidence(
                part="", category="neutral", label="transcript", score=0.0, text=t.text[:TRANSCRIPT_EVIDENCE_CHARS],
                time_s=(round(t.words[0].start_s, 2), round(t.words[-1].end_s, 2)),
            ))
            outputs.append(StageOutput(scores=dict(text_out.scores), evidence=evidence))
        return outputs


@dataclass(frozen=True)
class AudioInput:
    """A prepared audio item: the decoded audio, and whether it is a video's audio track (then no
    speech, or sounds without words, is an ordinary answer: the frames carry the video)."""

    audio: DecodedAudio
    video_track: bool = False


class AudioStage:
    """The ``audio`` stage (see the module docstring). ``prepare`` loads and decodes one item
    (``float32[n]`` mono 16 kHz), in a child process with a time limit when ``decoder`` is given
    (:class:`rtaudit.engine.isolation.Isolated`: FFmpeg parsing hostile bytes costs the item, not
    the worker); ``infer`` recognizes each item, then scores every transcript of the micro-batch
    in one text-scorer call. An item that fails fails alone."""

    stage = "audio"

    def __init__(self, media_policy: MediaPolicy, speech: SpeechScorer, limits: AudioLimits = AudioLimits(),
                 decoder: Isolated | None = None) -> None:
        self.media_policy, self.speech, self.limits, self.decoder = media_policy, speech, limits, decoder
        self.model = speech.model

    def prepare(self, task: ModalityTask) -> AudioInput:
        """Load and decode the task's audio (a ``<part>#audio`` task: a video's audio track).

        Raises:
            MediaUndecodable: no media item, not decodable, no audio stream, too short; the
                decoder's child process crashed or overran its time limit.
            MediaTooLarge: over ``policy.max_bytes`` or ``limits.max_duration_s``.
            URINotAllowed, MediaFetchFailed: as :func:`rtaudit.engine.media.load_bytes`.
        """
        if task.media is None:
            raise MediaUndecodable("audio task without a media item")
        data = load_bytes(task.media, self.media_policy)
        try:
            limits = dict(max_duration_s=self.limits.max_duration_s, min_duration_s=self.limits.min_duration_s)
            audio = self.decoder(decode_audio, data, **limits) if self.decoder else decode_audio(data, **limits)
            return AudioInput(audio, video_track=task.part.endswith(AUDIO_TRACK))
        except MediaUndecodable as exc:
            if task.media.mime:
                raise MediaUndecodable(f"{exc.message} (declared {task.media.mime[:100]})") from None
            raise

    def infer(self, inputs: list[AudioInput]) -> list[StageOutput | BaseException]:
        """One output per item, or the exception that item raised (``NoSpeech``, ``RecognitionFailed``...;
        for a video's audio track these are an output with no scores and a note instead)."""
        transcripts: list[Transcript | BaseException] = []
        for item in inputs:
            try:
                transcripts.append(self.speech.transcribe(item.audio))
            except Exception as exc:
                transcripts.append(exc)
        scored = iter(self.speech.score([t for t in transcripts if isinstance(t, Transcript)]))
        outputs: list[StageOutput | BaseException] = []
        for item, t in zip(inputs, transcripts):
            audio = item.audio
            if isinstance(t, (NoSpeech, RecognitionFailed)) and item.video_track:
                outputs.append(StageOutput(scores={}, evidence=[Evidence(
                    part="", category="neutral", label=str(t.code), score=0.0, text=t.message,
                    time_s=(0.0, round(audio.duration_s, 3)))]))
                continue
            if isinstance(t, BaseException):
                outputs.append(t)
                continue
            out = next(scored)
            if audio.truncated:
                out.evidence.append(Evidence(part="", category="neutral", label="truncated", score=0.0,
                                             text=f"the stream broke off after {audio.duration_s:.2f} s; scored what decoded"))
            outputs.append(out)
        return outputs
