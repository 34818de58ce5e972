"""A model stage from a bundle (:mod:`rtaudit.engine.bundle`), its golden check and its warm-up.

:func:`ready_stage` is what a worker runs off the hot path before it may serve a new version:
:func:`rtaudit.engine.bundle.verify` (every sha256) and :func:`rtaudit.engine.bundle.check_runtime`, then
:func:`load_stage` builds the stage, :func:`check_golden` runs the golden set through
:func:`rtaudit.engine.stage.process_batch` and compares each score within the bundle's tolerance, and
:func:`warm` runs one batch per batch-size bucket. Every partial the stage produces names the
bundle's version (``ModelRef(name=..., version=<bundle version>)``).

:func:`package_stage` builds a bundle whose golden expectations are recorded by running the
stage itself on :func:`default_inputs` (inputs made in code: a few benign and abusive
sentences, synthetic images, rendered text) or the inputs given.
"""

from __future__ import annotations

import base64
import io
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtaudit.engine.bundle import (
    BundleCorrupt,
    BundleError,
    BundleManifest,
    GoldenCase,
    GoldenInput,
    NullParams,
    RuntimeSpec,
    check_runtime,
    package,
    verify,
)
from rtaudit.engine.media import MediaPolicy
from rtaudit.engine.models import ModelStage, StageOutput
from rtaudit.engine.stage import process_batch
from rtaudit.schemas.messages import MediaItem, ModalityTask, ModelRef

if TYPE_CHECKING:
    from rtaudit.engine.text.scoring import TextScorer

#: the text golden set made in code: benign and abusive English, evasions, Chinese, another script, empty.
GOLDEN_TEXTS: tuple[str, ...] = (
    "Thanks for your help yesterday, the meeting notes are attached.",
    "What a beautiful sunset over the lake tonight!",
    "I disagree with this proposal, but let's talk it through on Monday.",
    "You are a worthless idiot and everyone here hates you.",
    "Shut up, you stupid pathetic loser.",
    "People like you are disgusting animals and should go back where you came from.",
    "y0u are a f*cking m0ron",
    "今天天气很好，我们一起去公园散步吧。",
    "你就是个傻逼，滚出去",
    "Спасибо за помощь, увидимся завтра.",
    "",
)
#: lines rendered into the OCR golden images.
GOLDEN_OCR_LINES: tuple[str, ...] = ("HELLO WORLD 2026", "you are a stupid idiot")
#: batch-size buckets :func:`warm` runs by default...
WARM_BATCH_SIZES = (1, 8, 32, 64)
#: ...except for stages that run image by image (RapidOCR has no cross-image batching: a bucket of 64
#: is 64 single-image runs, about 0.5 s each on CPU, and warms nothing a bucket of 2 does not).
WARM_BATCH_SIZES_OF_STAGE: dict[str, tuple[int, ...]] = {"ocr": (1, 2)}
#: what each runtime takes (recorded in ``input_spec``; informative).
INPUT_SPECS: dict[str, dict[str, Any]] = {
    "text": {"kind": "text", "max_tokens": 64,
             "routes": ["en", "zh", "es", "fr", "de", "pt", "it", "ru", "ar", "hi", "other"]},
    "nudenet": {"kind": "image", "tensor": "float32[B,3,320,320]", "max_side_px": 640},
    "rapidocr": {"kind": "image", "max_side_px": 2048, "max_aspect": 4.0, "transcript": "text runtime"},
    "null": {"kind": "any"},
}
#: the text artifacts a ``text`` or ``rapidocr`` bundle carries, under ``artifacts/``.
TEXT_ARTIFACTS = ("manifest.json", "en_head.npz", "zh_char_lr.npz")


@dataclass(frozen=True)
class StageOptions:
    """How to build a stage on this host; the workers make it from their settings
    (:meth:`rtaudit.workers.settings.Settings.stage_options`).

    Attributes:
        prefer_gpu: the CUDA execution provider when onnxruntime-gpu and a GPU are present.
        intra_op_threads: onnxruntime intra-op threads per session on CPU (0: the usable cores).
        encoder_precision: the MiniLM graph when the bundle does not pin one (``None``: ``auto``).
        media_policy: media limits of the image stages (``None``: :class:`~rtaudit.engine.media.MediaPolicy` defaults).
        cache: folder of the built encoder graphs (``None``: ``~/.cache/rtaudit``).
        text_cascade: the English second-stage profile of text bundles (:data:`rtaudit.engine.text.cascade.PROFILES`).
    """

    prefer_gpu: bool = True
    intra_op_threads: int = 0
    encoder_precision: str | None = None
    media_policy: MediaPolicy | None = None
    cache: Path | None = None
    text_cascade: str = "off"

    def policy(self) -> MediaPolicy:
        return self.media_policy if self.media_policy is not None else MediaPolicy()


class NullBundleStage:
    """The ``null`` runtime: :class:`rtaudit.engine.models.null.NullStage` (fixed ``scores``) that sleeps ``delay_ms``
    per ``infer`` call and, with ``raise``, raises ``RuntimeError`` from every ``infer`` call (every item fails)."""

    def __init__(self, stage: str, version: str, params: NullParams) -> None:
        from rtaudit.engine.models.null import NullStage

        self._inner = NullStage(stage, params.scores)
        self.stage = stage
        self.model = ModelRef(name="null", version=version)
        self.delay_s = params.delay_ms / 1000.0
        self.raises = params.raise_

    def prepare(self, task: ModalityTask) -> str:
        return self._inner.prepare(task)

    def infer(self, inputs: list[str]) -> list[StageOutput]:
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.raises:
            raise RuntimeError(f"null bundle {self.model.version} raises by design (params.raise)")
        return self._inner.infer(inputs)


def _text_scorer(root: Path, manifest: BundleManifest, o: StageOptions) -> TextScorer:
    from rtaudit.engine.text.heads import ArtifactError
    from rtaudit.engine.text.scoring import TextScorer

    try:
        return TextScorer(prefer_gpu=o.prefer_gpu, intra_op_threads=o.intra_op_threads,
                          encoder_precision=manifest.typed_params().encoder_precision or o.encoder_precision,
                          artifacts_dir=root / "artifacts", cache=o.cache, cascade=o.text_cascade)
    except ArtifactError as exc:
        raise BundleCorrupt(f"bundle {root}: {exc}") from None


def load_stage(path: Path | str, options: StageOptions | None = None, *, sha256: str | None = None,
               manifest: BundleManifest | None = None) -> ModelStage:
    """Verify the bundle at ``path`` and build its stage (no golden check, no warm-up: see :func:`ready_stage`).

    Args:
        options: how to build it on this host (``None``: :class:`StageOptions` defaults).
        sha256: the identity the bundle must have (its :class:`~rtaudit.schemas.control.BundleRef`'s).
        manifest: an already verified manifest of ``path`` (skips hashing the files again).
    Returns:
        The stage; ``stage.model.version`` is the bundle's version.
    Raises:
        BundleNotFound, BundleCorrupt: as :func:`rtaudit.engine.bundle.verify`.
        BundleIncompatible: a model file of an installed package differs (:func:`rtaudit.engine.bundle.check_runtime`).
    """
    root = Path(path)
    m = manifest if manifest is not None else verify(root, sha256)
    check_runtime(m)
    o = options if options is not None else StageOptions()
    kind = m.runtime.kind
    stage: Any
    if kind == "null":
        return NullBundleStage(m.stage, m.version, m.typed_params())
    if kind == "text":
        from rtaudit.engine.models.text import TextStage

        stage = TextStage(_text_scorer(root, m, o))
        stage.model = ModelRef(name="rtaudit-text", version=m.version)
    elif kind == "nudenet":
        from rtaudit.engine.models.nudity import NudityStage

        stage = NudityStage(o.policy(), prefer_gpu=o.prefer_gpu, intra_op_threads=o.intra_op_threads,
                            model_path=root / "320n.onnx")
        stage.model = ModelRef(name="nudenet-320n", version=m.version)
    elif kind == "rapidocr":
        from rtaudit.engine.models.ocr import OCRStage

        stage = OCRStage(o.policy(), _text_scorer(root, m, o), intra_op_threads=o.intra_op_threads)
        stage.model = ModelRef(name="rapidocr-ppocrv4+rtaudit-text", version=m.version)
    else:  # pragma: no cover - the manifest's Literal rules it out
        raise BundleCorrupt(f"unknown runtime {kind}")
    return stage  # type: ignore[no-any-return]  # stage is one of the branches' stages, all ModelStage (declared Any to share the name)


def _tasks(inputs: Sequence[GoldenInput], prefix: str) -> list[ModalityTask]:
    now = int(time.time() * 1000)
    tasks = []
    for i, x in enumerate(inputs):
        media = None if x.image_b64 is None else MediaItem(type="image", data_b64=x.image_b64)
        modality = "text" if x.text is not None else "image"
        tasks.append(ModalityTask(request_id=f"{prefix}-{i}", tenant_id="bundle", part=f"{modality}:0",
                                  modality=modality, lane="lo", created_at_ms=now, deadline_ms=now + 3_600_000,
                                  routed_at_ms=now, text=x.text, media=media))
    return tasks


@dataclass(frozen=True)
class Mismatch:
    """One golden difference: case ``index``, ``category`` (``None`` when the item failed), expected vs got."""

    index: int
    input: str
    category: str | None
    expected: float | None
    got: float | None
    error: str | None = None

    def __str__(self) -> str:
        if self.error is not None:
            return f"golden input {self.index} ({self.input}) failed: {self.error}"
        return f"golden input {self.index} ({self.input}): {self.category} expected {self.expected}, got {self.got}"


class WarmUpFailed(BundleError):
    """An item of a warm-up batch failed: the stage cannot score the project's own inputs."""


class GoldenMismatch(BundleError):
    """A golden score differs by more than the tolerance, a category is missing, or an input fails.
    ``mismatches`` lists every difference; the message names the first and how many there are."""

    def __init__(self, version: str, mismatches: list[Mismatch], tolerance: float) -> None:
        self.version = version
        self.mismatches = mismatches
        self.tolerance = tolerance
        more = f" (and {len(mismatches) - 1} more)" if len(mismatches) > 1 else ""
        super().__init__(f"bundle {version}: {mismatches[0]}{more}; tolerance {tolerance}")


def score(stage: ModelStage, inputs: Sequence[GoldenInput]) -> list[dict[str, float] | str]:
    """Each input's scores through :func:`rtaudit.engine.stage.process_batch` (one batch), or its error message."""
    if not inputs:
        return []
    result = process_batch(stage, _tasks(inputs, "golden"))
    return [dict(p.scores) if p.status == "ok" else f"{p.status}: {p.error}" for p in result.partials]


def check_golden(stage: ModelStage, manifest: BundleManifest) -> int:
    """Run the manifest's golden inputs through ``stage``; the number of cases checked.

    Raises:
        GoldenMismatch: an input failed, a category is missing on either side, or a score differs
            from the expected one by more than ``manifest.tolerance`` (absolute).
    """
    got = score(stage, [c.input for c in manifest.golden])
    bad: list[Mismatch] = []
    for i, (case, out) in enumerate(zip(manifest.golden, got)):
        label = case.input.summary()
        if isinstance(out, str):
            bad.append(Mismatch(i, label, None, None, None, error=out))
            continue
        for cat in sorted(set(case.expected) | set(out)):
            want, have = case.expected.get(cat), out.get(cat)
            if want is None or have is None or abs(want - have) > manifest.tolerance:
                bad.append(Mismatch(i, label, cat, want, have))
    if bad:
        raise GoldenMismatch(manifest.version, bad, manifest.tolerance)
    return len(got)


def warm(stage: ModelStage, batch_sizes: Sequence[int] | None = None,
         inputs: Sequence[GoldenInput] | None = None) -> dict[int, float]:
    """Run one batch of each size through ``stage`` (inputs cycled from ``inputs``, default the stage's
    :func:`warm_inputs`); wall ms per batch size. ``batch_sizes`` default: :data:`WARM_BATCH_SIZES`
    (:data:`WARM_BATCH_SIZES_OF_STAGE` for OCR).

    Raises:
        WarmUpFailed: an item of a warm-up batch failed (the inputs are the project's own, so a
            stage that cannot score them would fail real traffic: it fails verification here, at
            pre-check, instead of after it takes requests). The first batch that fails stops it.
    """
    pool = list(inputs) if inputs else warm_inputs(stage.stage)
    sizes = batch_sizes if batch_sizes is not None else WARM_BATCH_SIZES_OF_STAGE.get(stage.stage, WARM_BATCH_SIZES)
    out = {}
    for n in sizes:
        batch = [pool[i % len(pool)] for i in range(n)]
        started = time.perf_counter()
        result = process_batch(stage, _tasks(batch, f"warm{n}"))
        out[n] = round((time.perf_counter() - started) * 1000.0, 2)
        failed = [(i, p) for i, p in enumerate(result.partials) if p.status != "ok"]
        if failed:
            i, p = failed[0]
            raise WarmUpFailed(f"warm-up batch of {n}: {len(failed)} of {n} items failed; item {i} "
                               f"({batch[i].summary()}): {p.status}: {p.error}")
    return out


@dataclass
class ReadyStage:
    """A stage that passed every check: ``golden`` cases checked; ``warm_ms`` per batch size; times in ms."""

    stage: ModelStage
    manifest: BundleManifest
    sha256: str
    verify_ms: float
    load_ms: float
    golden: int
    golden_ms: float
    warm_ms: dict[int, float] = field(default_factory=dict)


def ready_stage(path: Path | str, options: StageOptions | None = None, *, sha256: str | None = None,
                batch_sizes: Sequence[int] | None = None) -> ReadyStage:
    """Verify, load, golden-check and warm the bundle at ``path`` (blocking, seconds: run it off the hot path).

    Raises:
        BundleError: BundleNotFound, BundleCorrupt, BundleIncompatible or :class:`GoldenMismatch`.
    """
    from rtaudit.engine.bundle import bundle_sha256

    t0 = time.perf_counter()
    m = verify(path, sha256)
    t1 = time.perf_counter()
    stage = load_stage(path, options, manifest=m)
    t2 = time.perf_counter()
    n = check_golden(stage, m)
    t3 = time.perf_counter()
    warm_ms = warm(stage, batch_sizes)
    return ReadyStage(stage, m, sha256 or bundle_sha256(path), round((t1 - t0) * 1000, 1),
                      round((t2 - t1) * 1000, 1), n, round((t3 - t2) * 1000, 1), warm_ms)


def reclaim_memory() -> None:
    """Collect garbage, then hand the C heap's free pages back to the OS (glibc ``malloc_trim(0)``; a no-op
    elsewhere). Call it after dropping a swapped-out stage: measured with ``rtaudit.tools.bench.bundle_memory``
    (text, 20 swaps, 2 cores), resident memory grew 11 % without it (freed onnxruntime and numpy buffers
    the allocator keeps) and 0.9 % with it. Takes milliseconds; call it off the hot path."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


# -- inputs made in code ------------------------------------------------------------------------------
def _png_b64(img: Any) -> str:
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


def synthetic_images(size: tuple[int, int] = (96, 72)) -> list[GoldenInput]:
    """Deterministic images (solid, gradient, seeded noise, a skin-toned ellipse), PNG, as golden inputs."""
    import numpy as np
    from PIL import Image, ImageDraw

    w, h = size
    solid = Image.new("RGB", size, (128, 128, 128))
    grad = Image.fromarray(np.tile(np.linspace(0, 255, w, dtype=np.uint8), (h, 1)), "L").convert("RGB")
    noise = Image.fromarray(np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8), "RGB")
    blob = Image.new("RGB", size, (40, 60, 140))
    ImageDraw.Draw(blob).ellipse((w // 4, h // 6, 3 * w // 4, 5 * h // 6), fill=(224, 172, 140))
    return [GoldenInput(image_b64=_png_b64(img)) for img in (solid, grad, noise, blob)]


def text_images() -> list[GoldenInput]:
    """Black text on white (:data:`GOLDEN_OCR_LINES`, Pillow's default font at 48 px), PNG, as golden inputs."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=48)
    out = []
    for line in GOLDEN_OCR_LINES:
        img = Image.new("RGB", (40 + 30 * len(line), 110), (255, 255, 255))
        ImageDraw.Draw(img).text((20, 25), line, fill=(0, 0, 0), font=font)
        out.append(GoldenInput(image_b64=_png_b64(img)))
    return out


def default_inputs(stage: str) -> list[GoldenInput]:
    """The built-in golden inputs of a stage: :data:`GOLDEN_TEXTS`; synthetic images; rendered text and one plain image."""
    if stage == "text":
        return [GoldenInput(text=t) for t in GOLDEN_TEXTS]
    if stage == "image":
        return synthetic_images()
    return text_images() + synthetic_images()[:1]


def warm_inputs(stage: str) -> list[GoldenInput]:
    """Warm-up inputs: the golden texts for ``text``, small synthetic images for ``image`` and ``ocr``."""
    return default_inputs("text") if stage == "text" else synthetic_images()


# -- packaging ----------------------------------------------------------------------------------------
def default_runtime(stage: str) -> str:
    """The real runtime of a stage: ``text``, ``nudenet`` or ``rapidocr``."""
    return {"text": "text", "image": "nudenet", "ocr": "rapidocr"}[stage]


def source_files(runtime: str, from_dir: Path | str | None = None) -> dict[str, Path]:
    """The files a bundle of ``runtime`` carries, from ``from_dir`` (default: what is installed: the shipped
    ``engine/text/artifacts``, the ``nudenet`` package's ``320n.onnx``).

    Raises:
        BundleError: ``from_dir`` lacks one of them.
    """
    if runtime == "null":
        return {}
    if runtime in ("text", "rapidocr"):
        from rtaudit.engine.text.heads import ARTIFACTS

        src = Path(from_dir) if from_dir else ARTIFACTS
        files = {f"artifacts/{n}": src / n for n in TEXT_ARTIFACTS}
        from rtaudit.engine.text.encoder_delta import EncoderDelta
        from rtaudit.engine.text.heads import load_manifest

        # the fine-tuned encoder layers the head was fitted on: every file of the delta the manifest names
        files.update({f"artifacts/{n}": src / n for n in EncoderDelta.names(load_manifest(src))})
        ml = src / "multilingual"  # the per-language models (absent from older artifact directories)
        if (ml / "manifest.json").is_file():
            files.update({f"artifacts/multilingual/{p.name}": p for p in sorted(ml.iterdir()) if p.is_file()})
        e5 = src / "multilingual_e5"  # the e5 heads and romanized routers (absent from older artifact directories)
        if (e5 / "manifest.json").is_file():
            files.update({f"artifacts/multilingual_e5/{p.name}": p for p in sorted(e5.iterdir()) if p.is_file()})
    else:
        import nudenet

        src = Path(from_dir) if from_dir else Path(os.path.dirname(nudenet.__file__))
        files = {"320n.onnx": src / "320n.onnx"}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise BundleError(f"cannot package a {runtime} bundle: missing {', '.join(missing)}")
    return files


def default_params(runtime: str) -> dict[str, Any]:
    """``text``/``rapidocr``: pin the fp32 MiniLM graph (the shipped heads were fitted on fp32 embeddings)."""
    return {"encoder_precision": "fp32"} if runtime in ("text", "rapidocr") else {}


def package_stage(stage: str, version: str, out_dir: Path | str, *, runtime: str | RuntimeSpec | None = None,
                  from_dir: Path | str | None = None, params: Mapping[str, Any] | None = None, options: StageOptions | None = None,
                  inputs: Sequence[GoldenInput] | None = None, golden: Sequence[GoldenCase] = (),
                  record: bool = True, tolerance: float = 0.02) -> Path:
    """Package a bundle whose golden expectations come from running its own stage.

    The files are packaged once without a golden set (in a temporary directory), that bundle is loaded,
    ``inputs`` (default :func:`default_inputs`) are scored to make golden cases, and the bundle is
    written to ``out_dir`` with ``golden`` + those cases, then checked against them.

    Args:
        runtime: a kind or a :class:`RuntimeSpec` (default: the stage's real runtime).
        from_dir: where the files come from (:func:`source_files`). params: default :func:`default_params`.
        record: ``False`` packages ``golden`` only, without loading anything (e.g. a raising null canary).
    Raises:
        BundleError: a missing file, a bad field, an input that fails while recording,
            or :class:`GoldenMismatch` when a given golden case does not hold.
    """
    kind = runtime.kind if isinstance(runtime, RuntimeSpec) else (runtime or default_runtime(stage))
    spec: RuntimeSpec | str = runtime if isinstance(runtime, RuntimeSpec) else kind
    files = source_files(kind, from_dir)
    params = dict(default_params(kind) if params is None else params)
    common = dict(input_spec=INPUT_SPECS[kind], tolerance=tolerance)
    if not record:
        return package(stage, version, files, list(golden), out_dir, spec, params, **common)  # type: ignore[arg-type]  # **common holds input_spec (a dict) and tolerance (a float): mypy joins them as object
    with tempfile.TemporaryDirectory(prefix="rtaudit-bundle-") as tmp:
        draft = package(stage, version, files, [], Path(tmp) / "draft", spec, params, **common)  # type: ignore[arg-type]  # **common holds input_spec (a dict) and tolerance (a float): mypy joins them as object
        draft_manifest = verify(draft)
        loaded = load_stage(draft, options, manifest=draft_manifest)
        if golden:
            check_golden(loaded, draft_manifest.model_copy(update={"golden": list(golden)}))
        wanted = list(inputs) if inputs is not None else default_inputs(stage)
        cases = []
        for i, (x, out) in enumerate(zip(wanted, score(loaded, wanted))):
            if isinstance(out, str):
                raise BundleError(f"cannot record golden input {i} ({x.summary()}): {out}")
            cases.append(GoldenCase(input=x, expected=out))
        return package(stage, version, files, list(golden) + cases, out_dir, spec, params, **common)  # type: ignore[arg-type]  # **common holds input_spec (a dict) and tolerance (a float): mypy joins them as object
