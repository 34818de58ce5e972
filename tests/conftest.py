"""Fixtures shared by both test tiers."""

from __future__ import annotations

from pathlib import Path

import pytest

#: ../shared/data beside the repository (read in place, never copied into the project).
DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.skip(f"shared evaluation data not found at {DATA_DIR}")
    return DATA_DIR
