"""OCR worker: the same ``audit.image.{hi,lo}`` tasks in its own consumer group (``rtaudit-ocr``),
through PP-OCRv4 (RapidOCR) and the text model. Start: ``faust -A workers.ocr worker``."""

from engine.models.ocr import OCRStage
from engine.text.scoring import TextScorer
from workers.modality import modality_app

app = modality_app("ocr", "image", lambda s: OCRStage(s.media.policy(), TextScorer(prefer_gpu=s.prefer_gpu)))
