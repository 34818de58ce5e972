"""Small constructors for contract records and in-memory images, shared by the unit tests."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from PIL import Image

from rtaudit.schemas.messages import (
    AuditRequest,
    Evidence,
    FusionTick,
    Manifest,
    MediaItem,
    ModalityTask,
    ModelRef,
    PartialScore,
    SkippedPart,
    Timings,
)

REQUEST_ID = "req-1"
TENANT = "acme"
CREATED_MS = 1_000_000
DEADLINE_MS = CREATED_MS + 10_000


def encoded_image(img: Image.Image, fmt: str = "PNG", **save_args: Any) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **save_args)
    return buf.getvalue()


def inline_media(data: bytes, type_: str = "image", **fields: Any) -> MediaItem:
    """An inline item of ``data``. 0 bytes, which the schema refuses at the router, is built unvalidated:
    a stage must still answer it (a record from a producer that skipped the schema)."""
    if not data:
        return MediaItem.model_construct(type=type_, data_b64="", **fields)
    return MediaItem(type=type_, data_b64=base64.b64encode(data).decode(), **fields)


def audit_request(**fields: Any) -> AuditRequest:
    values: dict[str, Any] = dict(request_id=REQUEST_ID, tenant_id=TENANT, created_at_ms=CREATED_MS, text="hello")
    return AuditRequest(**{**values, **fields})


def task(
    part: str = "text:0", *, text: str | None = "hello", media: MediaItem | None = None,
    deadline_ms: int = DEADLINE_MS, routed_at_ms: int = CREATED_MS, request_id: str = REQUEST_ID,
) -> ModalityTask:
    return ModalityTask(
        request_id=request_id, tenant_id=TENANT, part=part, modality=part.split(":")[0], lane="lo",
        created_at_ms=CREATED_MS, deadline_ms=deadline_ms, routed_at_ms=routed_at_ms, text=text, media=media,
    )


def manifest(*expected: str, **fields: Any) -> Manifest:
    values: dict[str, Any] = dict(
        request_id=REQUEST_ID, tenant_id=TENANT, created_at_ms=CREATED_MS, deadline_ms=DEADLINE_MS,
        expected=list(expected),
    )
    values.update(fields)
    values["skipped"] = [SkippedPart(part=p, reason=r) for p, r in values.get("skipped", [])]
    return Manifest(**values)


def partial(
    key: str, *, status: str = "ok", scores: dict[str, float] | None = None,
    evidence: list[Evidence] | None = None, produced_at_ms: int = CREATED_MS + 100, **fields: Any,
) -> PartialScore:
    """A partial for ``key`` = ``"<stage>/<part>"``."""
    stage, part = key.split("/")
    return PartialScore(
        request_id=fields.pop("request_id", REQUEST_ID), tenant_id=TENANT, part=part, stage=stage,
        model=ModelRef(name=f"{stage}-model", version="1"), status=status,
        scores=scores if scores is not None else {}, evidence=evidence or [],
        timings=Timings(queue_ms=1.0, inference_ms=2.0, batch_size=1),
        deadline_ms=fields.pop("deadline_ms", DEADLINE_MS), produced_at_ms=produced_at_ms, **fields,
    )


def evidence(category: str, score: float, part: str = "text:0", **fields: Any) -> Evidence:
    return Evidence(part=part, category=category, score=score, **fields)


def tick(reason: str, at_ms: int, request_id: str = REQUEST_ID) -> FusionTick:
    return FusionTick(request_id=request_id, reason=reason, at_ms=at_ms)


class FakeMessage:
    """A confluent-kafka ``Message`` read from ``audit.requests`` (what a loop's ``handle`` reads).

    ``ts_ms``: the record's create time, epoch ms (``None``: no timestamp)."""

    def __init__(self, value: bytes, key: bytes | None, offset: int, ts_ms: int | None = None, partition: int = 0) -> None:
        self._value, self._key, self._offset, self._ts, self._partition = value, key, offset, ts_ms, partition

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def topic(self) -> str:
        return "audit.requests"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ts) if self._ts is not None else (0, -1)  # CREATE_TIME, or NOT_AVAILABLE

    def error(self) -> None:
        return None


def write_dynahate(root: Path, train: list[tuple[str, int]], test: list[tuple[str, int]]) -> None:
    """DynaHate's four files as the copy ``ecanbazer/DynBERT`` writes them: tab-separated CSV, one text a line
    (quoted when it holds a quote), and one 0/1 label a line."""
    import csv

    folder = root / "text" / "dynahate"
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("Train", train), ("Test", test)):
        with (folder / f"{name}.csv").open("w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, delimiter="\t", lineterminator="\n")
            for text, _ in rows:
                w.writerow([text])
        (folder / f"{name}_label.csv").write_text("".join(f"{y}\n" for _, y in rows), encoding="utf-8")
