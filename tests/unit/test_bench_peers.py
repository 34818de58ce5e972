"""``rtaudit bench --peers``: the pure comparison of the worker with a peer (knee, throughput at
the peer's knee P99, P99 at 70 %), CPU per item, the side-by-side rows, and the peers' plumbing
that needs no broker (batch limits, Ray missing, the table rows). Measures nothing."""

from __future__ import annotations

import sys

import pytest
from rich.console import Console

from rtaudit.tools.bench.peers import PEERS, RAY_EXTRA, batch_limits, peer_command, peer_missing
from rtaudit.tools.bench.runner import BenchRun, PeerSeries, TargetResult
from rtaudit.tools.bench.stats import StepResult, compare_peer, cpu_delta, cpu_ms_per_item, side_by_side
from rtaudit.workers.settings import Settings


def step(offered: float, achieved: float, p99: float, unanswered: int = 0, target: str = "t",
         ok: int = 100, cpu_s: dict[str, float] | None = None) -> StepResult:
    return StepResult(
        target=target, offered_per_s=offered, duration_s=1.0, sent=ok + unanswered, ok=ok, failed=0, unanswered=unanswered,
        achieved_per_s=achieved, p50_ms=p99 / 2, p95_ms=p99, p99_ms=p99, slo_ms=1000, slo_misses=0,
        batch_mean={"text": 8.0}, batch_hist={}, cpu_s=cpu_s or {},
    )


WORKER = [step(20, 20, 100), step(60, 60, 200), step(100, 99, 450), step(120, 100, 2500)]
PEER = [step(20, 20, 300), step(60, 58, 700), step(100, 70, 3000)]


# ------------------------------------------------------------ compare_peer


def test_throughput_at_the_peers_knee_p99_over_the_peers_knee() -> None:
    c = compare_peer("faust", WORKER, PEER, 1000)
    assert c.peer_knee is PEER[1] and c.worker_knee is WORKER[2]
    assert c.at_peer_p99 is WORKER[2]  # 99/s at P99 450 ms <= the peer's 700 ms
    assert c.throughput_ratio == pytest.approx(99 / 58)
    assert c.worker_saturated and c.peer_saturated


def test_a_worker_slower_in_the_tail_is_held_to_the_peers_p99() -> None:
    slow_tail = [step(20, 20, 100), step(60, 60, 900), step(100, 99, 950), step(120, 100, 2500)]
    c = compare_peer("ray", slow_tail, PEER, 1000)
    assert c.at_peer_p99 is slow_tail[0]  # only the 20/s step is within the peer's 700 ms
    assert c.throughput_ratio == pytest.approx(20 / 58)


def test_no_ratio_without_a_peer_knee_or_a_worker_step_that_fast() -> None:
    assert compare_peer("ray", WORKER, [step(20, 10, 3000)], 1000).throughput_ratio is None
    c = compare_peer("ray", [step(20, 20, 900)], [step(20, 20, 100), step(40, 20, 3000)], 1000)
    assert c.at_peer_p99 is None and c.throughput_ratio is None


def test_p99_at_70_ratio_needs_both_steps_and_both_capacities() -> None:
    w70, p70 = step(70, 70, 150), step(40, 40, 300)
    assert compare_peer("faust", WORKER, PEER, 1000, w70, p70).p99_70_ratio == pytest.approx(0.5)
    assert compare_peer("faust", WORKER, PEER, 1000, None, p70).p99_70_ratio is None
    never_saturated = [step(20, 20, 100), step(60, 60, 200)]  # the knee is only a lower bound
    c = compare_peer("faust", never_saturated, PEER, 1000, w70, p70)
    assert not c.worker_saturated and c.p99_70_ratio is None
    assert c.throughput_ratio == pytest.approx(60 / 58)  # still rated: a lower bound


def test_a_step_that_lost_items_is_not_a_knee_and_not_within_the_p99() -> None:
    lossy = [step(20, 20, 100), step(60, 60, 200, unanswered=1)]
    c = compare_peer("faust", lossy, PEER, 1000)
    assert c.worker_knee is lossy[0] and c.at_peer_p99 is lossy[0]


# ------------------------------------------------------------ CPU, side by side


def test_cpu_ms_per_item_sums_the_named_processes_over_ok_items() -> None:
    s = step(50, 50, 100, ok=200, cpu_s={"ray": 1.5, "broker": 0.5, "bench": 0.2})
    assert cpu_ms_per_item(s, ["ray"]) == pytest.approx(7.5)
    assert cpu_ms_per_item(s, ["ray", "broker"]) == pytest.approx(10.0)
    assert cpu_ms_per_item(s, ["faust"]) is None  # not measured: no number rather than a wrong one
    assert cpu_ms_per_item(step(50, 0, 100, ok=0, cpu_s={"ray": 1.0}), ["ray"]) is None


def test_cpu_delta_is_per_process_seconds_between_snapshots() -> None:
    assert cpu_delta({"a": 1.0, "b": 2.0}, {"a": 3.5, "c": 9.0}) == {"a": 2.5}


def test_side_by_side_aligns_series_by_offered_rate() -> None:
    rows = side_by_side({"worker": [step(20.01, 20, 1), step(60, 60, 1)], "faust": [step(20.04, 19, 1), step(45, 44, 1)]})
    assert [r for r, _ in rows] == [20.0, 45.0, 60.0]
    assert set(rows[0][1]) == {"worker", "faust"} and set(rows[1][1]) == {"faust"} and set(rows[2][1]) == {"worker"}


# ------------------------------------------------------------ the peers' plumbing


def test_peers_batch_like_the_worker_at_zero_lag() -> None:
    s = Settings()
    cfg = s.batch.config("text")
    assert batch_limits(s, "text") == (cfg.max_size, cfg.window_ms / 1000.0)


def test_peer_command_runs_the_adapter_module() -> None:
    assert peer_command("ray", "text", "t1") == [sys.executable, "-m", "rtaudit.tools.bench.peers", "ray", "text", "t1"]


def test_ray_missing_is_reported_with_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    assert peer_missing("ray") == f"ray is not installed ({RAY_EXTRA})"
    assert peer_missing("faust") is None
    with pytest.raises(ValueError):
        peer_missing("triton")
    assert PEERS == ("faust", "ray")


def test_tables_show_the_peers_their_ratios_and_a_skipped_peer() -> None:
    from rtaudit.tools.bench.report import peers_table, ratio_table, side_by_side_table

    t = TargetResult("text", 1000, worker=WORKER, at_70=step(70, 70, 150))
    t.peers = [PeerSeries("faust", PEER, step(40, 40, 300), 9.5), PeerSeries("ray", note=f"skipped: ray is not installed ({RAY_EXTRA})")]
    run = BenchRun(host={}, settings={}, targets=[t])
    console = Console(record=True, width=400)
    for table in (peers_table(t), side_by_side_table(t), ratio_table(run)):
        assert table is not None
        console.print(table)
    text = console.export_text()
    assert "skipped: ray is not installed" in text
    assert "throughput at faust knee P99 / faust knee" in text and "1.71" in text  # 99 / 58
    assert "P99 at 70% / faust's" in text and "0.50" in text
    assert "ray" in text and "throughput at ray knee" not in text  # a skipped peer is not rated


def test_a_peer_that_cannot_run_is_skipped_without_touching_the_rig(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from rtaudit.tools.bench import versus
    from rtaudit.tools.bench.inputs import Limit
    from rtaudit.tools.bench.runner import BenchOptions

    monkeypatch.setattr(versus, "peer_missing", lambda kind: f"ray is not installed ({RAY_EXTRA})")
    said: list[str] = []
    bench = SimpleNamespace(opts=BenchOptions(quick=True), limit=lambda stage: Limit("text", "m", {1: 10.0}), say=said.append)
    series = versus.run_peer(bench, rig=None, stage="text", series=PeerSeries("ray"), reserve_s=0.0)  # type: ignore[arg-type]
    assert series.note == f"skipped: ray is not installed ({RAY_EXTRA})" and not series.steps
    assert said == [f"text: ray peer skipped: ray is not installed ({RAY_EXTRA})"]
