"""The CPUs this process may use: the one host fact the inference core sizes its thread pools by."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where there is none), ≥ 1.

    A container's CPU quota does not show in the mask: there, set ``inference_threads``."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
