"""When to restart a worker that exited: exponential backoff with a cap, reset after a
healthy run. Pure functions of (consecutive failures, uptime); the clock is the caller's.

A worker that crashes at start-up over and over waits 0.5, 1, 2, 4 … up to 30 s between
tries; one that ran for ``healthy_after_s`` before it exited starts again from the base
delay (its exit is treated as the first failure of a new series).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RestartPolicy:
    """Backoff of a supervised process.

    Attributes:
        base_s: delay before the first restart of a series, seconds.
        factor: each further consecutive failure multiplies the delay by this.
        cap_s: the delay never exceeds this, seconds.
        healthy_after_s: a process that ran at least this long before exiting (or is
            still running after it) resets its failure count, seconds.
        crash_loop_after: this many consecutive failures is a crash loop (readiness
            checks give up instead of waiting for a process that never comes up).
    """

    base_s: float = 0.5
    factor: float = 2.0
    cap_s: float = 30.0
    healthy_after_s: float = 30.0
    crash_loop_after: int = 4

    def __post_init__(self) -> None:
        if self.base_s < 0 or self.factor < 1 or self.cap_s < self.base_s or self.healthy_after_s <= 0:
            raise ValueError(f"invalid restart policy {self}")

    def failures_after_exit(self, failures: int, uptime_s: float) -> int:
        """Consecutive failures once a process with ``failures`` before it exited after
        ``uptime_s`` seconds: a healthy run starts a new series at 1."""
        return 1 if uptime_s >= self.healthy_after_s else failures + 1

    def delay_s(self, failures: int) -> float:
        """Seconds to wait before restarting after the ``failures``-th consecutive failure (>= 1)."""
        if failures <= 0:
            return 0.0
        return min(self.cap_s, self.base_s * self.factor ** (failures - 1))

    def is_healthy(self, uptime_s: float) -> bool:
        """Whether a running process has been up long enough to reset its failure count."""
        return uptime_s >= self.healthy_after_s
