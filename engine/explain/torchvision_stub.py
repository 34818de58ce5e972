"""Import ``onnx2torch`` where ``torchvision`` cannot be imported.

``onnx2torch`` 1.5.15 (Apache-2.0, the last release, 2024) imports ``torchvision`` at module
level in two converter modules, ``node_converters/nms.py`` (``torchvision.ops.nms``,
``box_convert``) and ``node_converters/roialign.py`` (``torchvision.ops.roi_align``), and
``onnx2torch/__init__`` imports every converter. No torchvision build on this machine's
package indexes imports beside the pinned ``torch==2.13.0`` CPU build, and installing one
would make pip replace torch. So the package is installed with ``--no-deps`` (``make setup``)
and, only while ``onnx2torch`` is first imported, a stand-in ``torchvision`` module sits in
``sys.modules`` whose three ``ops`` functions raise :class:`TorchvisionMissing`. The graphs we
convert (open_nsfw: convolutions, batch norm, pooling, a matmul, softmax) have neither
``NonMaxSuppression`` nor ``RoiAlign``; a graph that has them fails with that error when run,
never silently. A real ``torchvision``, when importable, is used instead and the stand-in
is never installed.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class TorchvisionMissing(RuntimeError):
    """A converted graph reached an operator that needs ``torchvision`` (NMS, RoiAlign)."""


def _missing(name: str) -> Any:
    def op(*_args: Any, **_kwargs: Any) -> Any:
        raise TorchvisionMissing(
            f"torchvision.ops.{name} is not installed here (onnx2torch's NMS/RoiAlign converters need it); "
            "explain a graph without these operators"
        )

    op.__name__ = name
    return op


def import_onnx2torch() -> types.ModuleType:
    """``onnx2torch``, imported with the stand-in described in the module doc when needed.

    Raises:
        ModuleNotFoundError: ``onnx2torch`` is not installed (the ``explain`` extra).
    """
    if "onnx2torch" in sys.modules:
        return sys.modules["onnx2torch"]
    try:
        importlib.import_module("torchvision")
        return importlib.import_module("onnx2torch")
    except ImportError:  # absent, or present but built for another torch
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
    stub = types.ModuleType("torchvision")
    ops = types.ModuleType("torchvision.ops")
    for name in ("nms", "roi_align", "box_convert"):
        setattr(ops, name, _missing(name))
    stub.ops = ops  # type: ignore[attr-defined]  # a ModuleType built at run time gets the attribute torchvision.ops would have
    sys.modules["torchvision"], sys.modules["torchvision.ops"] = stub, ops
    try:
        return importlib.import_module("onnx2torch")
    finally:
        # the converter modules keep their references; nothing else sees a fake torchvision
        del sys.modules["torchvision"], sys.modules["torchvision.ops"]
