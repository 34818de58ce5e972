"""The batcher's occupancy adaptation: window and size limit grow with the model's busy share
(issue 14), with time driven explicitly (the fake clock of test_batcher)."""

from __future__ import annotations

import pytest

from rtaudit.engine.batcher_config import BatcherConfig

from .test_batcher import make


def test_window_and_size_grow_with_model_occupancy_above_busy_low():
    b, t = make(max_size=64, min_size=8, window_ms=5.0, max_window_ms=45.0, lag_high=100,
                busy_low=0.5, busy_high=0.9, busy_horizon_ms=1000.0)
    for _ in range(5):  # 100 ms of inference every 200 ms: 50 % busy
        t.t += 100
        b.observe_duration(4, 0.1)
        t.t += 100
    assert b.occupancy() == pytest.approx(0.5) and (b.window_ms(), b.size_limit()) == (5.0, 8)
    for _ in range(10):  # then 70 % busy: halfway from busy_low to busy_high
        t.t += 70
        b.observe_duration(4, 0.07)
        t.t += 30
    assert b.occupancy() == pytest.approx(0.7)
    assert b.window_ms() == pytest.approx(25.0) and b.size_limit() == 36 and b.stats().occupancy == pytest.approx(0.7)
    assert b.size_limit("hi") == 8  # the high-lane cap follows the high lane's lag alone
    b.set_lag("lo", 80)  # lag pressure 0.8 beats busy pressure 0.5
    assert b.window_ms() == pytest.approx(37.0)
    b.set_lag("lo", 0)
    t.t += 1000  # a second without a batch: idle again
    assert b.occupancy() == 0.0 and (b.window_ms(), b.size_limit()) == (5.0, 8)


def test_occupancy_counts_only_the_part_of_a_batch_inside_the_horizon():
    b, t = make(busy_low=0.5, busy_horizon_ms=1000.0)
    b.observe_duration(64, 3.0)  # a 3 s batch just ended: the whole last second was busy
    assert b.occupancy() == 1.0
    t.t += 500
    assert b.occupancy() == pytest.approx(0.5)


def test_without_busy_low_occupancy_changes_nothing():
    b, t = make(max_size=64, min_size=8, window_ms=5.0, max_window_ms=45.0)
    for _ in range(10):
        t.t += 100
        b.observe_duration(4, 0.1)
    assert b.occupancy() == 1.0 and (b.window_ms(), b.size_limit()) == (5.0, 8)


def test_bad_busy_config_raises():
    for bad in ({"busy_low": 0.95}, {"busy_low": -0.1}, {"busy_low": 0.5, "busy_high": 1.5}, {"busy_horizon_ms": 0}):
        with pytest.raises(ValueError):
            BatcherConfig(max_size=4, **bad)
