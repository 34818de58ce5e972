"""A modality worker's heartbeat health: loading, ok, and degraded while one batch is stuck in inference."""

from __future__ import annotations

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
