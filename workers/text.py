"""Text worker: ``audit.text.{hi,lo}`` through alt-profanity-check. Start: ``faust -A workers.text worker``."""

from engine.models import ModelStage
from engine.models.profanity import TextStage
from workers.modality import modality_app
from workers.settings import Settings


def stage_factory(settings: Settings) -> ModelStage:
    """The text stage this worker serves (also what ``rtaudit bench`` measures)."""
    return TextStage()


app = modality_app("text", "text", stage_factory)
