from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def profanity_scorer():
    from rtaudit.engine.models.profanity import ProfanityScorer

    return ProfanityScorer()


@pytest.fixture(scope="session")
def text_scorer():
    """The real text scorer, loaded once (builds the encoder ONNX into the cache on first use, ~30 s)."""
    from rtaudit.engine.text.scoring import TextScorer

    return TextScorer(prefer_gpu=False)


@pytest.fixture(scope="session")
def text_stage(text_scorer):
    from rtaudit.engine.models.text import TextStage

    return TextStage(text_scorer)


@pytest.fixture(scope="session")
def nudity_stage():
    from rtaudit.engine.media import MediaPolicy
    from rtaudit.engine.models.nudity import NudityStage

    return NudityStage(MediaPolicy())


@pytest.fixture(scope="session")
def ocr_stage(text_scorer):
    from rtaudit.engine.media import MediaPolicy
    from rtaudit.engine.models.ocr import OCRStage

    return OCRStage(MediaPolicy(), text_scorer)
