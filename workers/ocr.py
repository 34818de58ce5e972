"""OCR worker: the same ``audit.image.{hi,lo}`` tasks in its own consumer group (``rtaudit-ocr``),
through PP-OCRv4 (RapidOCR) and the text model. Start: ``faust -A rtaudit.workers.ocr worker``."""

from rtaudit.engine.models import ModelStage
from rtaudit.engine.models.ocr import OCRStage
from rtaudit.engine.text.scoring import TextScorer
from rtaudit.workers.modality import modality_app
from rtaudit.workers.settings import Settings


def stage_factory(settings: Settings) -> ModelStage:
    """The OCR stage this worker serves (also what ``rtaudit bench`` measures)."""
    return OCRStage(
        settings.media.policy(),
        TextScorer(prefer_gpu=settings.gpu_for("ocr"), intra_op_threads=settings.model_threads(),
                   encoder_precision=settings.text_encoder_precision, cuda=settings.gpu.cuda_options(),
                   cache=settings.cache),
        intra_op_threads=settings.model_threads(), use_cuda=settings.gpu_for("ocr"),
        sampling=settings.av.sampling("animation"),
    )


app = modality_app("ocr", "image", stage_factory)
