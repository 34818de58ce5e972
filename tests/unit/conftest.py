from __future__ import annotations

from pathlib import Path

import pytest

DATA_DIR = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.skip(f"shared evaluation data not found at {DATA_DIR}")
    return DATA_DIR


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
