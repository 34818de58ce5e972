"""The ``[explain]`` settings section (a field of :class:`rtaudit.workers.settings.Settings`; read by
the explain role, ``workers/explain_loop.py``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ExplainSettings(BaseModel):
    """The explain role (``workers/explain.py``, docs/explanations.md).

    Attributes:
        enabled: ``rtaudit up`` and ``rtaudit demo`` start the role (when the ``explain`` extra is installed).
        decisions: verdict decisions whose image parts get a heatmap; empty: on demand only.
        method: ``gradcam++`` or ``gradcam``.
        target: the open_nsfw class explained.
        heatmap_side_px: longest side of the evidence PNG, pixels.
        heatmap_max_bytes: most bytes of the evidence PNG (before base64).
        box_threshold: fraction of the peak that bounds the peak box.
        retention_ms: how long an image task stays held for on-demand requests, ms.
        held_bytes: most raw image-task bytes held in memory.
        verdict_wait_ms: how long a verdict or an on-demand request waits for an image task not read yet, ms.
        batch_size: most records per consume (each may cost a heatmap, ~30-200 ms on CPU).
    """

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    decisions: list[Literal["allow", "review", "block"]] = Field(default_factory=lambda: ["review", "block"])  # type: ignore[arg-type]  # mypy reads the lambda's list as list[str], not of the Literal
    method: Literal["gradcam++", "gradcam"] = "gradcam++"
    target: Literal["nsfw", "sfw"] = "nsfw"
    heatmap_side_px: int = Field(default=64, ge=8, le=512)
    heatmap_max_bytes: int = Field(default=8 * 1024, ge=256, le=1024 * 1024)
    box_threshold: float = Field(default=0.5, gt=0.0, le=1.0)
    retention_ms: int = Field(default=600_000, ge=1000)
    held_bytes: int = Field(default=256 * 1024 * 1024, ge=1024 * 1024)
    verdict_wait_ms: int = Field(default=30_000, ge=100)
    batch_size: int = Field(default=32, ge=1, le=2000)
