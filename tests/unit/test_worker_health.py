"""A modality worker's heartbeat health (loading, ok, degraded while one batch is stuck in inference) and the heap trim after large batches."""

from __future__ import annotations

import os
import sys

import pytest

from rtaudit.workers.modality import STALLED_BATCH_S, worker_health


def test_loading_until_settled() -> None:
    assert worker_health(False, None, 100.0) == ("loading", None)


def test_ok_while_idle_or_within_the_stall_bound() -> None:
    assert worker_health(True, None, 100.0) == ("ok", None)
    assert worker_health(True, (100.0, 64), 100.0 + STALLED_BATCH_S) == ("ok", None)


def test_a_batch_stuck_in_inference_degrades_the_worker() -> None:
    health, detail = worker_health(True, (100.0, 64), 100.0 + STALLED_BATCH_S + 15)
    assert health == "degraded"
    assert detail == f"a batch of 64 has been in inference for {STALLED_BATCH_S + 15:.0f} s"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_freed_memory_goes_back_to_the_os_after_a_large_batch() -> None:
    from rtaudit.workers.modality import release_freed_memory

    blocks = [bytearray(64 * 1024) for _ in range(2000)]  # 125 MiB of heap blocks (below the mmap threshold)
    pin = bytearray(64 * 1024)  # allocated last: the freed blocks are below it, so free() cannot trim them
    del blocks
    before = _rss_bytes()
    assert release_freed_memory()
    assert before - _rss_bytes() > 64 * 1024 * 1024
    del pin
