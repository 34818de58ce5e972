"""Text worker: ``audit.text.{hi,lo}`` through the text model ``text_model`` names
(``RTAUDIT_TEXT_MODEL``): ``minilm`` (default: normalization, MiniLM + alt-profanity-check,
COLD model), ``lexical`` (alt-profanity-check alone) or ``null`` (fixed scores, for the
overhead bench). Start: ``faust -A rtaudit.workers.text worker``."""

from rtaudit.engine.models import ModelStage
from rtaudit.workers.modality import modality_app
from rtaudit.workers.settings import Settings


def stage_factory(settings: Settings) -> ModelStage:
    """The text stage this worker serves (also what ``rtaudit bench`` measures), by ``settings.text_model``."""
    if settings.text_model == "null":
        from rtaudit.engine.models.null import NullStage

        return NullStage("text", ms_per_item=settings.null_model_ms_per_item)
    if settings.text_model == "lexical":
        from rtaudit.engine.models.lexical import LexicalTextStage

        return LexicalTextStage()
    from rtaudit.engine.models.text import TextStage
    from rtaudit.engine.text.scoring import TextScorer

    return TextStage(TextScorer(prefer_gpu=settings.gpu_for("text"), intra_op_threads=settings.model_threads(),
                                encoder_precision=settings.text_encoder_precision, cuda=settings.gpu.cuda_options(),
                                cache=settings.cache, cascade=settings.text_cascade))


app = modality_app("text", "text", stage_factory)
