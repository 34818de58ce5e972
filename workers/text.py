"""Text worker: ``audit.text.{hi,lo}`` through the text scorer (normalization, MiniLM + alt-profanity-check, COLD model). Start: ``faust -A workers.text worker``."""

from engine.models import ModelStage
from engine.models.text import TextStage
from engine.text.scoring import TextScorer
from workers.modality import modality_app
from workers.settings import Settings


def stage_factory(settings: Settings) -> ModelStage:
    """The text stage this worker serves (also what ``rtaudit bench`` measures)."""
    return TextStage(TextScorer(prefer_gpu=settings.prefer_gpu, intra_op_threads=settings.model_threads()))


app = modality_app("text", "text", stage_factory)
