"""Video worker: ``audit.video.{hi,lo}`` (consumer group ``rtaudit-video``). It decodes and samples
each video and splits it: sampled frames onto ``audit.image.<lane>`` (the image and OCR workers
score them), the audio track onto ``audit.audio.<lane>`` (the audio worker), and tells fusion the
new parts on its own partial. Start: ``faust -A rtaudit.workers.video worker``."""

from rtaudit.engine.models import ModelStage
from rtaudit.engine.models.video import VideoStage
from rtaudit.workers.modality import modality_app
from rtaudit.workers.settings import Settings


def stage_factory(settings: Settings) -> ModelStage:
    """The video stage this worker serves."""
    return VideoStage(settings.media.policy(), settings.av.sampling("video"), max_duration_s=settings.av.max_duration_s,
                      decoder=settings.av.decoder("rtaudit.engine.frames"))


app = modality_app("video", "video", stage_factory)
