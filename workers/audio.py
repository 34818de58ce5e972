"""Audio worker: ``audit.audio.{hi,lo}`` through PyAV decoding, Silero VAD, Whisper tiny.en with word
times and the text model (consumer group ``rtaudit-audio``). Start: ``faust -A rtaudit.workers.audio worker``."""

from rtaudit.engine.audio.asr import WhisperRecognizer
from rtaudit.engine.models import ModelStage
from rtaudit.engine.models.audio import AudioLimits, AudioStage, SpeechScorer
from rtaudit.engine.text.scoring import TextScorer
from rtaudit.workers.modality import modality_app
from rtaudit.workers.settings import Settings


def speech_scorer(settings: Settings) -> SpeechScorer:
    """The recognizer and text scorer of this process (also the video worker's audio track)."""
    threads = settings.av.asr_threads or settings.model_threads()
    return SpeechScorer(
        WhisperRecognizer(cpu_threads=threads, beam_size=settings.av.asr_beam_size),
        TextScorer(prefer_gpu=settings.prefer_gpu, intra_op_threads=settings.model_threads(),
                   encoder_precision=settings.text_encoder_precision, cache=settings.cache),
    )


def stage_factory(settings: Settings) -> ModelStage:
    """The audio stage this worker serves."""
    limits = AudioLimits(min_duration_s=settings.av.min_duration_s, max_duration_s=settings.av.max_duration_s)
    return AudioStage(settings.media.policy(), speech_scorer(settings), limits,
                      decoder=settings.av.decoder("rtaudit.engine.audio.decode"))


app = modality_app("audio", "audio", stage_factory)
