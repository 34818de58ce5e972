"""The limits and policy of one :class:`rtaudit.engine.batcher.Batcher` (one model stage): sizes,
windows, lag and occupancy bounds, the low lane's share and pause hysteresis, the duration
model's prior. Pure data with its validation; the batcher's rules are in :mod:`rtaudit.engine.batcher`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BatcherConfig:
    """Limits of one batcher (one model stage). Times in ms, lags and sizes in messages.

    Attributes:
        max_size: most live items in a batch (the model's max batch size), >= 1.
        min_size: size limit at zero lag (default: ``max_size``, i.e. no cap below the max).
        window_ms: window from the oldest queued item at zero lag (default 15 ms).
        max_window_ms: window at lag >= ``lag_high`` (default: ``window_ms``, i.e. fixed).
        lag_low: lag at or below which the window and size limit are at their minimum.
        lag_high: lag at or above which they are at their maximum (> ``lag_low``).
        lo_share: fraction of slots owed to the low lane when both lanes are backlogged, in [0, 1].
        deadline_margin_ms: safety margin before the earliest deadline, on top of the expected duration.
        max_queued: most items held per lane; :meth:`Batcher.put` waits for room beyond it.
        pause_hi_lag: pause the low lane while the high lane's lag is above this...
        resume_hi_lag: ...and resume it once the high lane's lag is at or below this.
        fit_points: observed batches kept for the cost fit (a sliding window).
        min_fit_points: observations needed before the fit is used.
        prior_a_s: expected seconds per item before the fit is usable.
        prior_b_s: expected fixed seconds per batch before the fit is usable.
        busy_low: model occupancy (0..1) above which the window and size limit start to
            grow (``None``: occupancy is ignored)...
        busy_high: ...and at which they are at their maximum (> ``busy_low``, <= 1).
        busy_horizon_ms: the span occupancy is measured over, ms.
    """

    max_size: int
    min_size: int | None = None
    window_ms: float = 15.0
    max_window_ms: float | None = None
    lag_low: int = 0
    lag_high: int = 256
    lo_share: float = 0.2
    deadline_margin_ms: float = 2.0
    max_queued: int | None = None
    pause_hi_lag: int = 0
    resume_hi_lag: int = 0
    fit_points: int = 64
    min_fit_points: int = 4
    prior_a_s: float = 0.0
    prior_b_s: float = 0.0
    busy_low: float | None = None
    busy_high: float = 0.95
    busy_horizon_ms: float = 1000.0

    def __post_init__(self) -> None:
        def bad(what: str) -> ValueError:
            return ValueError(f"BatcherConfig: {what} (got {self!r})")

        if self.max_size < 1:
            raise bad("max_size must be >= 1")
        if self.min_size is not None and not 1 <= self.min_size <= self.max_size:
            raise bad("min_size must be in [1, max_size]")
        if not self.window_ms > 0:
            raise bad("window_ms must be > 0")
        if self.max_window_ms is not None and self.max_window_ms < self.window_ms:
            raise bad("max_window_ms must be >= window_ms")
        if not 0 <= self.lag_low < self.lag_high:
            raise bad("need 0 <= lag_low < lag_high")
        if not 0.0 <= self.lo_share <= 1.0:
            raise bad("lo_share must be in [0, 1]")
        if self.max_queued is not None and self.max_queued < self.max_size:
            raise bad("max_queued must be >= max_size")
        if not 0 <= self.resume_hi_lag <= self.pause_hi_lag:
            raise bad("need 0 <= resume_hi_lag <= pause_hi_lag")
        if self.min_fit_points < 2 or self.fit_points < self.min_fit_points:
            raise bad("need 2 <= min_fit_points <= fit_points")
        if self.prior_a_s < 0 or self.prior_b_s < 0 or self.deadline_margin_ms < 0:
            raise bad("priors and margin must be >= 0")
        if self.busy_low is not None and not 0.0 <= self.busy_low < self.busy_high <= 1.0:
            raise bad("need 0 <= busy_low < busy_high <= 1")
        if not self.busy_horizon_ms > 0:
            raise bad("busy_horizon_ms must be > 0")

    @property
    def size_floor(self) -> int:
        """Size limit at zero lag."""
        return self.min_size if self.min_size is not None else self.max_size

    @property
    def window_ceiling_ms(self) -> float:
        """Window at full lag pressure, ms."""
        return self.max_window_ms if self.max_window_ms is not None else self.window_ms

    @property
    def queue_limit(self) -> int:
        """Most items held per lane (default: 8 batches)."""
        return self.max_queued if self.max_queued is not None else 8 * self.max_size

    @property
    def lo_reserve(self) -> int:
        """Low-lane items to hold here before pausing the low lane: the share of two full batches."""
        return max(1, math.ceil(2 * self.lo_share * self.max_size)) if self.lo_share > 0 else 0
