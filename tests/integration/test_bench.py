"""``rtaudit bench``'s machinery through the real embedded broker: a tiny text run
(limit, one worker step, one naive step) and its report. Measures nothing; numbers come
from ``rtaudit bench``. No timed asserts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtaudit.tools.bench import Bench, BenchOptions, StagePlan
from rtaudit.tools.bench.report import plot, tables, write_json
from rtaudit.workers.settings import load_settings

pytestmark = pytest.mark.integration


def test_a_tiny_text_bench_runs_through_the_real_broker(tmp_path: Path) -> None:
    tiny = StagePlan(slo_ms=10_000, step_s=1.0, fractions=(0.01,), naive_fractions=(0.3,))
    opts = BenchOptions(
        stages=("text",), mixed=False, naive=True, lanes=False, quick=True, out_dir=tmp_path,
        max_seconds=600, stop_after=1, refine=0, plans={"text": tiny}, limit_s=0.05,
    )
    steps = []
    run = Bench(opts, load_settings(), steps.append, lambda _: None).run()

    (text,) = run.targets
    assert text.limit is not None and text.limit.best_per_s > 0 and 1 in text.limit.per_size
    assert text.worker and text.naive  # (more steps when the first did not keep up on a busy CPU)
    measured = text.worker + ([text.at_70] if text.at_70 else []) + text.naive
    for step in measured:
        # every item was answered ok, through the broker, and its micro-batch size recorded
        assert step.sent >= 3 and step.ok == step.sent and step.unanswered == 0 and step.failed == 0
        assert step.batch_mean["text"] >= 1
        assert step.p50_ms > 0 and step.p50_ms <= step.p99_ms
    assert all(s.batch_mean["text"] == 1 for s in text.naive)  # one message at a time
    assert sorted(map(id, steps)) == sorted(map(id, measured))  # each reported live, as it ended

    assert len(tables(run)) >= 4
    data = json.loads(write_json(run, tmp_path / "bench.json").read_text())
    assert data["targets"][0]["name"] == "text" and data["host"]["cores"]
    assert plot(run, tmp_path / "bench.png").stat().st_size > 10_000


def test_the_overhead_bench_runs_every_target_and_prints_its_table(tmp_path: Path) -> None:
    """``rtaudit bench --model null``'s machinery, tiny: every target measured through the real
    broker, one table row each (and one per role inside the fleet). No thresholds."""
    from rich.console import Console

    from rtaudit.tools.bench.overhead import TARGETS, OverheadBench, OverheadOptions
    from rtaudit.tools.bench.report import overhead_table, write_overhead_json

    opts = OverheadOptions.quick(records=300, latency_s=1.0, saturation_timeout_s=20.0, out_dir=tmp_path)
    run = OverheadBench(opts, load_settings(), lambda _: None).run()

    assert [r.target for r in run.targets] == list(TARGETS)
    for r in run.targets:
        assert not any(n.startswith("failed") for n in r.notes), r.notes
        assert r.raw is not None and r.raw.consume_per_s > 0 and r.answered > 0 and r.hop is not None
    console = Console(record=True, width=400)
    console.print(overhead_table(run))
    lines = console.export_text().splitlines()
    for row in (*TARGETS, "fleet: router", "fleet: text", "fleet: fusion"):
        assert any(line.startswith(f"│ {row} ") or line.startswith(f"│   {row} ") for line in lines), row
    data = json.loads(write_overhead_json(run, tmp_path / "overhead.json").read_text())
    assert [t["target"] for t in data["targets"]] == list(TARGETS)


@pytest.mark.timeout(900)
def test_the_peers_run_beside_the_worker_on_the_same_broker(tmp_path: Path) -> None:
    """``rtaudit bench --peers``'s machinery, tiny: the Faust peer and (when its extra is installed)
    the Ray Serve peer each answer one low-rate step through the real broker with the same
    stage, then stop with every process they started; without Ray, its series says why it was
    skipped. No thresholds."""
    import os

    from rtaudit.tools.bench.peers import peer_missing
    from rtaudit.tools.bench.report import peers_table, side_by_side_table

    tiny = StagePlan(slo_ms=10_000, step_s=1.0, fractions=(0.02,), naive_fractions=(0.3,))
    opts = BenchOptions(
        stages=("text",), mixed=False, naive=False, lanes=False, quick=True, out_dir=tmp_path,
        max_seconds=800, stop_after=1, refine=0, plans={"text": tiny}, limit_s=0.05, peers=("faust", "ray"),
    )
    run = Bench(opts, load_settings(), lambda _: None, lambda _: None).run()

    (text,) = run.targets
    faust, ray = text.peers
    assert text.worker and faust.steps and not faust.note.startswith("failed"), faust.note
    ray_missing = peer_missing("ray")
    if ray_missing is None:
        assert ray.steps and not ray.note.startswith("failed"), ray.note
    else:
        assert not ray.steps and ray.note == f"skipped: {ray_missing}"
    for step in [s for p in text.peers for s in p.steps]:
        assert step.sent >= 3 and step.ok == step.sent and step.batch_mean["text"] >= 1
        assert step.cpu_s.get(step.target.split(" ")[1], 0) > 0  # the peer's own CPU was measured
    assert peers_table(text) is not None and side_by_side_table(text) is not None
    assert plot(run, tmp_path / "bench.png").stat().st_size > 10_000
    data = json.loads(write_json(run, tmp_path / "bench.json").read_text())
    assert [p["name"] for p in data["targets"][0]["peers"]] == ["faust", "ray"]
    # nothing this run started is left running (its processes carry its state dir in their environment)
    marker = f"RTAUDIT_STATE_DIR={tmp_path / 'state'}".encode()
    left = [p for p in os.listdir("/proc") if p.isdigit() and p != str(os.getpid()) and marker in _environ(p).split(b"\0")]
    assert not left, [Path(f"/proc/{p}/cmdline").read_bytes() for p in left]


def _environ(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""
