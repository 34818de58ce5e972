"""Image worker: ``audit.image.{hi,lo}`` through NudeNet 320n. Start: ``faust -A rtaudit.workers.image worker``."""

from rtaudit.engine.models import ModelStage
from rtaudit.engine.models.nudity import NudityStage
from rtaudit.workers.modality import modality_app
from rtaudit.workers.settings import Settings


def stage_factory(settings: Settings) -> ModelStage:
    """The image stage this worker serves (also what ``rtaudit bench`` measures)."""
    return NudityStage(settings.media.policy(), prefer_gpu=settings.gpu_for("image"), intra_op_threads=settings.model_threads(),
                       cuda=settings.gpu.cuda_options(), sampling=settings.av.sampling("animation"))


app = modality_app("image", "image", stage_factory)
