"""Text worker: ``audit.text.{hi,lo}`` through the text scorer (normalization, MiniLM + alt-profanity-check, COLD model). Start: ``faust -A workers.text worker``."""

from engine.models.text import TextStage
from engine.text.scoring import TextScorer
from workers.modality import modality_app

app = modality_app("text", "text", lambda settings: TextStage(TextScorer(prefer_gpu=settings.prefer_gpu)))
