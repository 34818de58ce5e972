"""Contracts of the explain role: on-demand requests (``audit.explain.requests``) and the
evidence records it publishes (``audit.explanations``), both keyed by ``request_id``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rtaudit.schemas.messages import Decision, EpochMs, ModelRef, RequestId, TenantId, _Strict

CamMethod = Literal["gradcam++", "gradcam"]


class ExplainRequest(_Strict):
    """Explain a request's image parts now (``rtaudit explain REQUEST_ID``, ``AuditClient.request_explanation``).

    ``part`` (``"image:0"``...) limits it to one part; ``None``: every image part still held.
    """

    request_id: RequestId
    part: str | None = Field(default=None, max_length=64, pattern=r"^image:\d+$")
    requested_at_ms: EpochMs


class Explanation(_Strict):
    """Why an image part scored what it did: a Grad-CAM++ (or Grad-CAM) heatmap of a whole-image
    classifier, computed off the hot path (``audit.explanations``, key: ``request_id``).

    ``heatmap_png_b64``: 8-bit grayscale PNG (base64), 255 = most salient, in the image's aspect
    ratio, ``heatmap_size`` ``(width, height)`` pixels, its longest side and bytes bounded by the
    role's settings; it covers the whole image (the model sees a centre crop: the border it
    never sees is 0). ``peak_box`` is ``[x, y, width, height]`` in pixels of the decoded image
    (``image_size``) around the region at or above ``box_threshold`` × the peak.
    ``score``: the model's probability of ``target``. ``status``: ``ok``; ``unavailable`` (the
    image is no longer held, or could not be read: ``error`` says why); ``error`` (the
    explanation failed).
    """

    request_id: RequestId
    tenant_id: TenantId | None = None
    part: str
    status: Literal["ok", "unavailable", "error"]
    trigger: Literal["verdict", "on_demand"]
    decision: Decision | None = None
    model: ModelRef
    method: CamMethod
    target: str
    layer: str
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    image_size: tuple[int, int] | None = None
    heatmap_png_b64: str | None = None
    heatmap_size: tuple[int, int] | None = None
    peak_box: tuple[int, int, int, int] | None = None
    box_threshold: float = Field(gt=0.0, le=1.0)
    error_code: str | None = None
    error: str | None = None
    compute_ms: float = Field(default=0.0, ge=0.0)
    produced_at_ms: EpochMs
