"""Text worker: ``audit.text.{hi,lo}`` through alt-profanity-check. Start: ``faust -A workers.text worker``."""

from engine.models.profanity import TextStage
from workers.modality import modality_app

app = modality_app("text", "text", lambda settings: TextStage())
