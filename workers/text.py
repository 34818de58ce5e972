"""Text worker: ``audit.text.{hi,lo}`` through the text model ``text_model`` names
(``RTAUDIT_TEXT_MODEL``): ``minilm`` (default: normalization, MiniLM + alt-profanity-check,
COLD model), ``lexical`` (alt-profanity-check alone) or ``null`` (fixed scores, for the
overhead bench). Start: ``faust -A workers.text worker``."""

from engine.models import ModelStage
from workers.modality import modality_app
from workers.settings import Settings


def stage_factory(settings: Settings) -> ModelStage:
    """The text stage this worker serves (also what ``rtaudit bench`` measures), by ``settings.text_model``."""
    if settings.text_model == "null":
        from engine.models.null import NullStage

        return NullStage("text")
    if settings.text_model == "lexical":
        from engine.models.lexical import LexicalTextStage

        return LexicalTextStage()
    from engine.models.text import TextStage
    from engine.text.scoring import TextScorer

    return TextStage(TextScorer(prefer_gpu=settings.prefer_gpu, intra_op_threads=settings.model_threads(),
                                encoder_precision=settings.text_encoder_precision))


app = modality_app("text", "text", stage_factory)
