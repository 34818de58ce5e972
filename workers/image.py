"""Image worker: ``audit.image.{hi,lo}`` through NudeNet 320n. Start: ``faust -A workers.image worker``."""

from engine.models.nudity import NudityStage
from workers.modality import modality_app

app = modality_app("image", "image", lambda s: NudityStage(s.media.policy(), prefer_gpu=s.prefer_gpu))
