"""Pydantic models for every record on every topic.

Times are integer epoch milliseconds (``*_ms``) unless a name says otherwise.
Boxes are ``[x, y, width, height]`` in pixels of the decoded, EXIF-rotated
image. Text offsets are Python ``str`` indices (code points) into the text the
producer sent, ``[start, end)``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Largest inline (base64) media item, decoded, in bytes. Bigger media goes by URI.
MAX_INLINE_MEDIA_BYTES = 8 * 1024 * 1024
#: Largest text field, in characters.
MAX_TEXT_CHARS = 32_000
#: Most media items in one request.
MAX_MEDIA_ITEMS = 16

RequestId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:\-]+$")]
TenantId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._\-]+$")]
EpochMs = Annotated[int, Field(ge=0, le=10**14)]
Modality = Literal["text", "image", "audio", "video"]
Stage = Literal["text", "image", "ocr", "audio", "video"]
Lane = Literal["hi", "lo"]
Priority = Literal["high", "normal", "low"]
Decision = Literal["allow", "review", "block"]
PartStatus = Literal["ok", "error", "expired"]


def decoded_base64_size(value: str) -> int:
    """Bytes that standard base64 ``value`` decodes to (from its length and padding; no decoding)."""
    return len(value) * 3 // 4 - (value[-2:].count("=") if value else 0)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MediaItem(_Strict):
    """One image, audio or video item, inline or by reference.

    Exactly one of ``data_b64`` (standard base64, at most
    :data:`MAX_INLINE_MEDIA_BYTES` once decoded) and ``uri`` (``file://`` or
    ``http(s)://``; which roots and hosts are allowed is the fleet's setting,
    checked by the worker that fetches it) is given.
    """

    type: Literal["image", "audio", "video"]
    # the size limit is checked on the decoded bytes (below); maxLength stays in the JSON Schema
    data_b64: str | None = Field(default=None, json_schema_extra={"minLength": 4, "maxLength": (MAX_INLINE_MEDIA_BYTES * 4) // 3 + 4})
    uri: str | None = Field(default=None, max_length=2048, pattern=r"^(file|https?)://")
    mime: str | None = Field(default=None, max_length=100)
    name: str | None = Field(default=None, max_length=256, description="original file name, for evidence")

    @model_validator(mode="after")
    def _one_source(self) -> "MediaItem":
        if (self.data_b64 is None) == (self.uri is None):
            raise ValueError("exactly one of data_b64 and uri must be set")
        return self

    @field_validator("data_b64")
    @classmethod
    def _is_base64(cls, value: str | None) -> str | None:
        if value is not None:
            size = decoded_base64_size(value)
            if size == 0:  # refused like an empty text: nothing to moderate (the client refuses an empty file alike)
                raise ValueError("inline media item is empty (0 bytes): nothing to moderate")
            if size > MAX_INLINE_MEDIA_BYTES:
                raise ValueError(
                    f"inline media item is {size} bytes, over the {MAX_INLINE_MEDIA_BYTES} bytes "
                    f"({MAX_INLINE_MEDIA_BYTES // 2**20} MiB) limit: send larger media by uri"
                )
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"data_b64 is not valid base64: {exc}") from None
        return value


class AuditRequest(_Strict):
    """What a producer publishes to ``audit.requests`` (key: ``request_id``).

    ``deadline_ms`` (absolute) wins over ``slo_ms`` (budget from
    ``created_at_ms``), which wins over the tenant's SLO from the settings.
    """

    request_id: RequestId
    tenant_id: TenantId
    created_at_ms: EpochMs
    priority: Priority | None = None
    slo_ms: int | None = Field(default=None, ge=1, le=3_600_000)
    deadline_ms: EpochMs | None = None
    text: str | None = Field(default=None, max_length=MAX_TEXT_CHARS)
    media: list[MediaItem] = Field(default_factory=list, max_length=MAX_MEDIA_ITEMS)
    metadata: dict[str, str | int | float | bool] = Field(default_factory=dict, max_length=32)

    @model_validator(mode="after")
    def _has_content(self) -> "AuditRequest":
        if not self.text and not self.media:
            raise ValueError("a request needs text or at least one media item")
        return self


class ModalityTask(_Strict):
    """One unit of work on a modality lane (``audit.<modality>.<lane>``, key: ``request_id``).

    ``part`` names the partial this task answers, ``"<modality>:<item index>"``
    (``text:0`` for the request's text, ``image:2`` for its third media item). A task a stage
    split off an item (a video's sampled frame, its audio track) is named after it,
    ``"<part>#frame:<index>"`` or ``"<part>#audio"``, and a frame carries its place in the
    original: ``frame`` (index in the decoded stream) and ``time_s`` (``[start_s, end_s)``,
    seconds), which the stage that scores it copies onto its evidence.
    """

    request_id: RequestId
    tenant_id: TenantId
    part: str
    modality: Modality
    lane: Lane
    created_at_ms: EpochMs
    deadline_ms: EpochMs
    routed_at_ms: EpochMs
    text: str | None = None
    media: MediaItem | None = None
    frame: int | None = Field(default=None, ge=0)
    time_s: tuple[float, float] | None = None


class SkippedPart(_Strict):
    part: str
    reason: str


class Manifest(_Strict):
    """Router → fusion on ``audit.scores``: which partials to wait for, and until when.

    ``expected`` lists part ids with their stage, ``"<stage>/<part>"``
    (``ocr/image:0``). A request the router rejected (bad schema, disallowed
    URI) has ``rejection`` set and nothing expected: fusion answers at once.
    """

    kind: Literal["manifest"] = "manifest"
    request_id: RequestId
    tenant_id: TenantId
    created_at_ms: EpochMs
    deadline_ms: EpochMs
    lane: Lane | None = Field(default=None, description="lane the router put the tasks on (None: rejected request)")
    expected: list[str] = Field(default_factory=list)
    skipped: list[SkippedPart] = Field(default_factory=list)
    rejection: str | None = None
    rejection_code: str | None = None


class ModelRef(_Strict):
    """The model that scored a part: its name and version (a bundle's version once bundles serve).

    ``rollout`` is the version of the ``rollout:<stage>`` control record the item was routed
    under (None before any rollout of the stage): with the request's slice it says exactly
    why this version scored it, whatever the clocks say.
    """

    name: str
    version: str
    rollout: int | None = Field(None, ge=1, description="version of the rollout:<stage> control record in force")


class Evidence(_Strict):
    """Why a score is what it is: a text span, an image box, or recognized text.

    ``span`` is ``[start, end)`` into the text the model saw (the request text
    for ``text/`` parts, the OCR transcript for ``ocr/`` parts, the speech transcript for
    ``audio/`` parts); ``box`` is ``[x, y, width, height]`` in pixels. In time-based media,
    ``time_s`` is ``[start_s, end_s)`` in seconds of the original item (a flagged word, a
    sampled frame's display interval) and ``frame`` the index of the frame in its decoded stream.
    """

    part: str
    category: str
    score: float = Field(ge=0.0, le=1.0)
    label: str | None = None
    text: str | None = None
    span: tuple[int, int] | None = None
    box: tuple[int, int, int, int] | None = None
    time_s: tuple[float, float] | None = Field(default=None, description="[start_s, end_s) in the original media, seconds")
    frame: int | None = Field(default=None, ge=0, description="index of the frame in the decoded stream")


class Timings(_Strict):
    """Where the time went for one partial, in ms."""

    queue_ms: float = Field(ge=0.0, description="routed_at → batch formed")
    inference_ms: float = Field(ge=0.0, description="whole batch's model time")
    batch_size: int = Field(ge=0, description="live (not expired) items in the micro-batch")


class PartialScore(_Strict):
    """A modality worker's answer for one part (``audit.scores``, key: ``request_id``).

    ``scores`` maps category → probability in ``[0, 1]``. A stage that split its item into
    parts known only after decoding (a video's frames and audio track) lists the keys of those
    parts in ``expands`` (``"<stage>/<part>"``, as a :class:`Manifest` expects them): fusion
    then waits for them too, under the request's unchanged deadline. The tasks of those parts are
    produced before this partial, and the partial carries the list, so fusion never decides
    between the split and the news of it.
    """

    kind: Literal["partial"] = "partial"
    request_id: RequestId
    tenant_id: TenantId
    part: str
    stage: Stage
    model: ModelRef
    status: PartStatus
    scores: dict[str, float] = Field(default_factory=dict)
    evidence: list[Evidence] = Field(default_factory=list)
    error_code: str | None = None
    error: str | None = None
    timings: Timings
    deadline_ms: EpochMs
    produced_at_ms: EpochMs
    expands: list[str] = Field(default_factory=list, max_length=2048)

    @property
    def key(self) -> str:
        """``"<stage>/<part>"``, the id a :class:`Manifest` expects."""
        return f"{self.stage}/{self.part}"


class FusionTick(_Strict):
    """Fusion → itself on ``audit.scores``: the deadline of ``request_id`` passed
    (``reason="deadline"``), or its finished state may be dropped (``reason="expire"``).

    Fusion's table may only change inside stream processing, so its timer
    publishes these instead of editing the table.
    """

    kind: Literal["tick"] = "tick"
    request_id: RequestId
    reason: Literal["deadline", "expire"]
    at_ms: EpochMs


ScoresRecord = Annotated[Manifest | PartialScore | FusionTick, Field(discriminator="kind")]


class Verdict(_Strict):
    """Exactly one per request on ``audit.verdicts`` (key: ``request_id``).

    ``categories`` is the max score per category over all partials;
    ``flagged`` the categories at or above the policy's review threshold;
    ``complete`` is false when a part was missing, failed or expired at the
    deadline; ``latency_ms`` runs from ``created_at_ms`` to ``decided_at_ms``.
    """

    request_id: RequestId
    tenant_id: TenantId
    decision: Decision
    complete: bool
    categories: dict[str, float] = Field(default_factory=dict)
    flagged: list[str] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    parts: dict[str, PartStatus | Literal["missing", "skipped"]] = Field(default_factory=dict)
    model_versions: dict[str, str] = Field(default_factory=dict)
    policy_version: str
    created_at_ms: EpochMs
    deadline_ms: EpochMs
    decided_at_ms: EpochMs
    latency_ms: int
    trace_id: str | None = Field(default=None, pattern=r"^[0-9a-f]{32}$",
                                 description="the request's W3C trace id when it was traced (workers/tracing.py)")


#: Most original bytes a DLQ record carries; longer originals are cut (``original_size_bytes`` says how long).
MAX_DLQ_ORIGINAL_BYTES = 4 * 1024 * 1024


class DLQRecord(_Strict):
    """A record no worker could process (``audit.dlq``), with its original bytes (base64),
    the first :data:`MAX_DLQ_ORIGINAL_BYTES` of them when it was longer."""

    original_b64: str
    original_size_bytes: int = Field(default=0, ge=0)
    original_truncated: bool = False
    source_topic: str
    source_partition: int
    source_offset: int
    source_key: str | None = Field(default=None, description="record key as UTF-8 (errors replaced), usually the request id")
    role: str
    error_code: str
    error: str
    request_id: str | None = None
    failed_at_ms: EpochMs
