"""Inputs and the raw-model reference of ``rtaudit bench`` (no Kafka here).

* :class:`Corpus`: texts and images made by the project or shipped in installed
  packages (never ``shared/data``); :func:`task_value` / :func:`request_value` build a
  record's bytes at its due time (open-loop load: created = due).
* :func:`measure_limit`: the worker's own model stage run through
  :func:`rtaudit.engine.stage.process_batch` on in-memory batches of 1, 2, 4… (the "limit"
  every worker knee is compared against), as :class:`Limit` (items/s per batch size).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass

from rtaudit.engine.models import ModelStage
from rtaudit.engine.routing import DEFAULT_STAGES
from rtaudit.engine.stage import process_batch
from rtaudit.schemas.codec import encode
from rtaudit.schemas.messages import AuditRequest, MediaItem, ModalityTask
from rtaudit.tools.demo.corpus import PHOTOS, RENDERED, demo_texts, render_text_image, skimage_file

#: tenant id of every bench record.
TENANT = "bench"


def modality_of(stage: str) -> str:
    """The modality whose lane topics a stage consumes (``ocr`` → ``image``), from the router's table."""
    for modality, stages in DEFAULT_STAGES.items():
        if stage in stages:
            return modality
    raise ValueError(f"no modality is served by stage {stage!r}")


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Corpus:
    """Inputs made by the project or shipped in installed packages (never ``shared/data``)."""

    texts: list[str]
    photos: list[MediaItem]
    rendered: list[MediaItem]

    @classmethod
    def build(cls) -> "Corpus":
        def media(data: bytes, name: str) -> MediaItem:
            return MediaItem(type="image", data_b64=base64.b64encode(data).decode("ascii"), name=name)

        return cls(
            texts=[text for _, text in demo_texts()],
            photos=[media(skimage_file(p), p) for p in PHOTOS],
            rendered=[media(render_text_image(t), f"rendered-{i}.png") for i, (_, t) in enumerate(RENDERED)],
        )

    def for_stage(self, stage: str) -> list[str] | list[MediaItem]:
        """Per-stage inputs: demo texts, scikit-image photos (image) or rendered text (ocr)."""
        return {"text": self.texts, "image": self.photos, "ocr": self.rendered}[stage]


def task_value(stage: str, item: str | MediaItem, rid: str, lane: str, slo_ms: float) -> Callable[[float], bytes]:
    """Bytes of a ModalityTask for ``item``, built at its due time (created = routed = due)."""
    modality = modality_of(stage)

    def build(due_s: float) -> bytes:
        t = int(due_s * 1000)
        content = {"text": item} if modality == "text" else {"media": item}
        return encode(ModalityTask(
            request_id=rid, tenant_id=TENANT, part=f"{modality}:0", modality=modality, lane=lane,
            created_at_ms=t, deadline_ms=t + int(slo_ms), routed_at_ms=t, **content,
        ))

    return build


def request_value(text: str, image: MediaItem | None, rid: str, slo_ms: float) -> Callable[[float], bytes]:
    """Bytes of an AuditRequest (text, plus an image for a share of them), built at its due time."""

    def build(due_s: float) -> bytes:
        return encode(AuditRequest(
            request_id=rid, tenant_id=TENANT, created_at_ms=int(due_s * 1000), slo_ms=int(slo_ms), text=text,
            media=[image] if image is not None else [],
        ))

    return build


# ---------------------------------------------------------------- the limit


@dataclass(frozen=True)
class Limit:
    """Items/s of a stage run directly on in-memory batches, per batch size."""

    stage: str
    model: str
    per_size: dict[int, float]
    #: onnxruntime intra-op threads the stage ran with (the worker's own setting).
    threads: int = 0
    #: the same stage with one thread per usable core: ``(threads, {size: items/s})``, measured
    #: at the best sizes only (a reference: the worker shares those cores with Kafka).
    every_core: tuple[int, dict[int, float]] | None = None

    @property
    def best_size(self) -> int:
        return max(self.per_size, key=self.per_size.__getitem__)

    @property
    def best_per_s(self) -> float:
        return self.per_size[self.best_size]

    def batch_ms(self, size: int) -> float:
        """Duration of one batch of ``size`` items, ms."""
        return 1000.0 * size / self.per_size[size]

    def best_within(self, slo_ms: float) -> int | None:
        """The size with the best items/s among those whose batch takes at most ``slo_ms / 2``.

        At saturation an item waits for the batch being inferred, then for its own: its
        latency is at least two batch durations, so a larger batch cannot meet the SLO
        however it is scheduled. ``None`` when even a batch of 1 is too slow.
        """
        fits = [s for s in self.per_size if 2 * self.batch_ms(s) <= slo_ms]
        return max(fits, key=self.per_size.__getitem__) if fits else None

    @property
    def single_per_s(self) -> float:
        return self.per_size[min(self.per_size)]


def batch_sizes(max_size: int) -> list[int]:
    """1, 2, 4… up to and including ``max_size``."""
    sizes, b = [], 1
    while b < max_size:
        sizes.append(b)
        b *= 2
    return sizes + [max_size]


def measure_limit(stage: ModelStage, items: list, max_size: int, seconds: float,
                  sizes: list[int] | None = None, threads: int = 0) -> Limit:
    """Run ``process_batch`` (prepare + infer, as the worker does) on batches of each size
    (``sizes``, default 1, 2, 4… ``max_size``) for about ``seconds`` each (at least two
    batches, the first a warm-up); items/s per size. ``threads`` is recorded, not applied:
    the stage was built with it."""
    name = stage.stage
    far = int(time.time() * 1000) + 3_600_000
    tasks = [
        ModalityTask(
            request_id=f"limit-{i}", tenant_id=TENANT, part=f"{modality_of(name)}:0", modality=modality_of(name),
            lane="lo", created_at_ms=0, deadline_ms=far, routed_at_ms=0,
            **({"text": it} if isinstance(it, str) else {"media": it}),
        )
        for i, it in enumerate(items * max(1, -(-max_size // len(items))))
    ]
    per_size: dict[int, float] = {}
    for size in sizes or batch_sizes(max_size):
        batch = tasks[:size]
        process_batch(stage, batch)
        done, started = 0, time.perf_counter()
        while done < 2 * size or time.perf_counter() - started < seconds:
            process_batch(stage, batch)
            done += size
        per_size[size] = done / (time.perf_counter() - started)
    return Limit(name, f"{stage.model.name} {stage.model.version}", per_size, threads)
