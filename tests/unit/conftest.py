from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def profanity_scorer():
    from engine.models.profanity import ProfanityScorer

    return ProfanityScorer()


@pytest.fixture(scope="session")
def text_stage(profanity_scorer):
    from engine.models.profanity import TextStage

    return TextStage(profanity_scorer)


@pytest.fixture(scope="session")
def nudity_stage():
    from engine.media import MediaPolicy
    from engine.models.nudity import NudityStage

    return NudityStage(MediaPolicy())


@pytest.fixture(scope="session")
def ocr_stage(profanity_scorer):
    from engine.media import MediaPolicy
    from engine.models.ocr import OCRStage

    return OCRStage(MediaPolicy(), profanity_scorer)
