"""Wall-clock helper: epoch milliseconds, the unit of every ``*_ms`` timestamp in the contracts."""

import time


def now_ms() -> int:
    """Current wall-clock time in integer epoch milliseconds."""
    return time.time_ns() // 1_000_000
