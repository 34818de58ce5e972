"""Serving imports no model-building code: importing the text scorer, the text model and each role's
worker module in a fresh interpreter loads nothing from :mod:`rtaudit.modelbuild`, the harnesses
(:mod:`rtaudit.tools`) or the CLI (:mod:`rtaudit.cli`), and neither torch, scikit-learn nor matplotlib.

torch and scikit-learn stay importable where serving reaches them lazily, at run time and not at
import: ``engine/text/encoder_build.py`` imports torch to export the ONNX graph once (when it is not
cached), ``engine/text/encoder.py`` for the torch encoder on CUDA; ``engine/text/heads.py`` imports scikit-learn's hashing
for the Chinese model when it scores."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: top-level modules that serving must not load at import (model building and plotting).
HEAVY = ("torch", "sklearn", "matplotlib")
#: rtaudit packages serving must not load.
NOT_SERVING = ("rtaudit.modelbuild", "rtaudit.tools", "rtaudit.cli")


def loaded_after_import(module: str) -> list[str]:
    """The ``sys.modules`` keys after ``import module`` in a fresh interpreter (``-I``: no user site, no cwd)."""
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["rtaudit.engine.text.scoring", "rtaudit.engine.models.text", "rtaudit.workers.text",
                                    "rtaudit.workers.router", "rtaudit.workers.fusion"])
def test_serving_loads_no_model_building_code(module: str) -> None:
    loaded = loaded_after_import(module)
    assert module in loaded
    heavy = sorted({m.split(".")[0] for m in loaded} & set(HEAVY))
    building = [m for m in loaded if m.startswith(NOT_SERVING)]
    assert heavy == [] and building == [], f"importing {module} loaded {heavy} {building[:10]}"


def test_the_check_sees_model_building_code_when_it_is_imported() -> None:
    """The probe itself: importing the evaluation suite does load the model-building package."""
    loaded = loaded_after_import("rtaudit.modelbuild.text.evaluation")
    assert "rtaudit.modelbuild.text.data" in loaded and "rtaudit.engine.text.scoring" in loaded
