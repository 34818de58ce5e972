"""Wall-clock helper: epoch milliseconds, the unit of every ``*_ms`` timestamp in the contracts."""

import time


def now_ms() -> int:
    """Current wall-clock time in integer epoch milliseconds."""
    return time.time_ns() // 1_000_000


def past_deadline(deadline_ms: float, at_ms: float) -> bool:
    """Whether an item with ``deadline_ms`` (epoch ms) is expired at ``at_ms``: the one
    expiry rule, shared by the batcher (separating expired items) and :func:`rtaudit.engine.stage.process_batch`."""
    return at_ms >= deadline_ms
