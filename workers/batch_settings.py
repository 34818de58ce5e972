"""The ``[batch]`` settings section: the named batching profiles and their overrides (a field of
:class:`rtaudit.workers.settings.Settings`; every modality worker's :class:`BatcherConfig` comes from it)."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rtaudit.engine.batcher_config import BatcherConfig


#: Stages with a model batcher; per-stage maps (``max_size``, ``min_size``) are keyed by these.
BATCH_STAGES = ("text", "image", "ocr", "audio", "video")


class BatchProfile(BaseModel):
    """A named point on the latency/throughput curve (docs/batching.md "Batching profiles").

    Attributes:
        window_ms: window from the oldest queued item at zero consumer lag, ms.
        max_window_ms: window at lag >= ``lag_high``, ms.
        max_size: most items per batch, per stage.
        min_size: size limit at zero lag, per stage (grows to ``max_size`` with lag).
        lo_share: share of batch slots owed to the low lane when both lanes are backlogged.
        lag_low_batches: consumer lag at or below which window and size are at their minimum...
        lag_high_batches: ...and at or above which they are at their maximum.
        pause_hi_lag_batches: pause fetching the low lane while the high lane's lag is above this...
        resume_hi_lag_batches: ...and resume once it is at or below this.
        deadline_margin_ms: close a batch this long before (earliest deadline − expected duration).
        busy_low: model occupancy (share of the last second spent inferring) above which the
            window and size limit grow as they do with lag, reaching their maximum at 0.95;
            ``None`` or 1 = lag alone (see :class:`rtaudit.engine.batcher_config.BatcherConfig`).

    Lags are in *batches* of the stage's ``max_size`` (so one profile fits a 64-item text
    stage and a 2-item OCR stage alike); the batcher gets ``ceil(batches · max_size)`` messages.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    window_ms: float = Field(gt=0, le=10_000)
    max_window_ms: float = Field(gt=0, le=10_000)
    max_size: dict[str, int]
    min_size: dict[str, int]
    lo_share: float = Field(ge=0.0, le=1.0)
    lag_low_batches: float = Field(ge=0)
    lag_high_batches: float = Field(gt=0)
    pause_hi_lag_batches: float = Field(ge=0)
    resume_hi_lag_batches: float = Field(ge=0)
    deadline_margin_ms: float = Field(default=2.0, ge=0)
    busy_low: float | None = Field(default=None, ge=0.0, le=1.0)


#: The named profiles. ``balanced`` is the default (15 ms window, the issue's default).
PROFILES: dict[str, BatchProfile] = {
    # smallest batches and windows; the low lane is paused as soon as the high lane lags
    "latency": BatchProfile(
        window_ms=2.0, max_window_ms=8.0,
        max_size={"text": 16, "image": 4, "ocr": 1, "audio": 2, "video": 1}, min_size={"text": 4, "image": 1, "ocr": 1, "audio": 1, "video": 1},
        lo_share=0.1, lag_low_batches=0, lag_high_batches=1, pause_hi_lag_batches=0, resume_hi_lag_batches=0,
    ),
    "balanced": BatchProfile(
        window_ms=15.0, max_window_ms=40.0,
        max_size={"text": 64, "image": 8, "ocr": 2, "audio": 2, "video": 1}, min_size={"text": 16, "image": 2, "ocr": 1, "audio": 1, "video": 1},
        lo_share=0.2, lag_low_batches=0, lag_high_batches=4, pause_hi_lag_batches=0.25, resume_hi_lag_batches=0.0625,
        busy_low=0.8,
    ),
    # full batches from the start, long windows; the low lane keeps a larger share
    "throughput": BatchProfile(
        window_ms=40.0, max_window_ms=100.0,
        max_size={"text": 256, "image": 16, "ocr": 4, "audio": 2, "video": 1}, min_size={"text": 256, "image": 16, "ocr": 4, "audio": 1, "video": 1},
        lo_share=0.3, lag_low_batches=0, lag_high_batches=8, pause_hi_lag_batches=2, resume_hi_lag_batches=0.5,
        busy_low=0.6,
    ),
}
ProfileName = Literal["latency", "balanced", "throughput"]


class BatchSettings(BaseModel):
    """Micro-batching: a named profile, and explicit overrides that win over it.

    ``RTAUDIT_BATCH__PROFILE=latency`` picks a profile; any other key set here
    (file or ``RTAUDIT_BATCH__<KEY>``) replaces the profile's value; ``max_size``
    and ``min_size`` override per stage (``{ text = 32 }`` keeps the profile's
    image and OCR sizes). Every stage's resulting :class:`BatcherConfig` is
    validated at start-up.
    """

    model_config = ConfigDict(extra="forbid")
    profile: ProfileName = "balanced"
    window_ms: float | None = Field(default=None, gt=0, le=10_000)
    max_window_ms: float | None = Field(default=None, gt=0, le=10_000)
    max_size: dict[str, int] = Field(default_factory=dict)
    min_size: dict[str, int] = Field(default_factory=dict)
    lo_share: float | None = Field(default=None, ge=0.0, le=1.0)
    lag_low_batches: float | None = Field(default=None, ge=0)
    lag_high_batches: float | None = Field(default=None, gt=0)
    pause_hi_lag_batches: float | None = Field(default=None, ge=0)
    resume_hi_lag_batches: float | None = Field(default=None, ge=0)
    deadline_margin_ms: float | None = Field(default=None, ge=0)
    busy_low: float | None = Field(default=None, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _valid_per_stage(self) -> "BatchSettings":
        """Refuse what would be silently ignored or clamped: a per-stage size of a stage with no batcher (a
        misspelt ``txt``), an explicit ``min_size`` above the same stage's explicit ``max_size``
        and an explicit ``window_ms`` above an explicit ``max_window_ms``; then build every stage's
        :class:`BatcherConfig`. Raises ValueError naming the key."""
        import difflib

        for key, sizes in (("max_size", self.max_size), ("min_size", self.min_size)):
            for stage in sizes:
                if stage not in BATCH_STAGES:
                    close = difflib.get_close_matches(stage, BATCH_STAGES, n=1)
                    raise ValueError(f"batch.{key} names stage {stage!r}, which has no batcher: "
                                     + (f"did you mean {close[0]!r}?" if close else f"one of {', '.join(BATCH_STAGES)}"))
        for stage in set(self.max_size) & set(self.min_size):
            if self.min_size[stage] > self.max_size[stage]:
                raise ValueError(f"batch.min_size.{stage} = {self.min_size[stage]} is above batch.max_size.{stage} = "
                                 f"{self.max_size[stage]}")
        if self.window_ms is not None and self.max_window_ms is not None and self.window_ms > self.max_window_ms:
            raise ValueError(f"batch.window_ms = {self.window_ms:g} is above batch.max_window_ms = {self.max_window_ms:g} "
                             "(the window grows from window_ms at no lag to max_window_ms under lag)")
        for stage in BATCH_STAGES:
            self.config(stage)  # raises ValueError naming the bad combination
        return self

    def effective(self) -> BatchProfile:
        """The profile with the explicit overrides applied."""
        base = PROFILES[self.profile]
        overrides = {k: v for k, v in self.model_dump(exclude={"profile", "max_size", "min_size"}).items() if v is not None}
        max_size = {**base.max_size, **self.max_size}
        # an overridden max below the profile's min drags the min down with it
        min_size = {s: min(n, max_size.get(s, n)) for s, n in {**base.min_size, **self.min_size}.items()}
        merged = {**base.model_dump(), **overrides, "max_size": max_size, "min_size": min_size}
        merged["max_window_ms"] = max(merged["max_window_ms"], merged["window_ms"])
        merged["resume_hi_lag_batches"] = min(merged["resume_hi_lag_batches"], merged["pause_hi_lag_batches"])
        return BatchProfile(**merged)

    def config(self, stage: str, max_size: int | None = None) -> BatcherConfig:
        """The batcher limits of ``stage`` (``text``, ``image``, ``ocr``; others get the text sizes);
        ``max_size``: the size limit instead of the profile's (a GPU stage's, :meth:`Settings.batcher_config`),
        lag thresholds scaled by it as by the profile's."""
        p = self.effective()
        max_size = max_size or p.max_size.get(stage, p.max_size.get("text", 8))

        def messages(batches: float) -> int:
            return math.ceil(batches * max_size - 1e-9)

        lag_low = messages(p.lag_low_batches)
        return BatcherConfig(
            max_size=max_size, min_size=min(p.min_size.get(stage, max_size), max_size),
            window_ms=p.window_ms, max_window_ms=p.max_window_ms,
            lag_low=lag_low, lag_high=max(messages(p.lag_high_batches), lag_low + 1),
            lo_share=p.lo_share, pause_hi_lag=messages(p.pause_hi_lag_batches),
            resume_hi_lag=min(messages(p.resume_hi_lag_batches), messages(p.pause_hi_lag_batches)),
            deadline_margin_ms=p.deadline_margin_ms,
            busy_low=None if p.busy_low is None or p.busy_low >= 1.0 else p.busy_low,
        )
