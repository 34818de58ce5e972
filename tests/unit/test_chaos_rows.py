"""The extended chaos table (``rtaudit.tools.chaos.rows``): targets, crash attribution, formatting."""

from __future__ import annotations

import math

from rtaudit.tools.chaos import RawVerdict, Sent, tally
from rtaudit.tools.chaos.rows import COLUMNS, ScenarioRow, markdown, row_from_result, table_rows, unexplained_exits


def row(**kw: object) -> ScenarioRow:
    base: dict[str, object] = dict(scenario="scale", sent=10, not_acknowledged=0, verdicts=10, lost=[], duplicates=0, different=[],
                                   client_duplicates=[], crashes=[], p99_during_ms=1200.0, p99_after_ms=300.0)
    return ScenarioRow(**{**base, **kw})  # type: ignore[arg-type]


def test_a_clean_row_passes_and_each_common_target_fails_it_with_its_count() -> None:
    assert row().ok and row().failed == []
    bad = row(lost=["a", "b"], not_acknowledged=1, crashes=["text-0 pid 7"], different=["c"], client_duplicates=["d"])
    assert bad.failed == ["2 lost", "1 never acknowledged", "1 worker crashes", "1 ids with different verdicts",
                          "1 duplicates through the client"]
    assert not bad.ok


def test_scenario_misses_follow_the_common_targets_and_do_not_repeat() -> None:
    r = row(lost=["a"], misses=["low lane within its SLO: 3/5"])
    assert r.failed == ["1 lost", "low lane within its SLO: 3/5"]
    assert r.failed == r.failed  # a property: asking twice adds nothing


def test_identical_repeats_are_allowed_but_counted() -> None:
    assert row(duplicates=4).ok


def test_exits_the_harness_caused_are_not_crashes() -> None:
    lines = [
        (1_000, "text-1 (pid 42) exited with signal SIGTERM after 20.1 s; restarting in 0.50 s (failure 1 in a row)"),
        (2_000, "text-0 (pid 41) exited with exit 1 after 80.0 s; restarting in 0.50 s (failure 1 in a row)"),
        (3_000, "restarted text-0 (pid 50); text restarts so far: 1"),
        (500, "fusion-0 (pid 9) exited with exit 1 after 3.0 s; restarting in 0.50 s (failure 1 in a row)"),
        (4_000, "embedded broker (pid 3) exited with signal SIGKILL: restarting it, recreating the topics and restarting every worker"),
    ]
    assert unexplained_exits(lines, {42}) == ["text-0 pid 41", "fusion-0 pid 9"]  # in the order they came
    assert unexplained_exits(lines, {42}, since_ms=900) == ["text-0 pid 41"]
    assert unexplained_exits(lines, {42, 41}, since_ms=900, until_ms=1_500) == []


def test_the_kill_run_becomes_a_row_with_its_figures() -> None:
    sent = {rid: Sent(rid, "text", created) for rid, created in (("a", 1_000), ("b", 1_000), ("c", 2_000))}
    raw = [RawVerdict("a", True, "allow"), RawVerdict("a", True, "allow"), RawVerdict("b", True, "allow"), RawVerdict("b", False, "review")]
    r = tally(sent, set(sent), raw, {"a": 1, "b": 1}, 2, {"a": 1_500, "b": 1_700}, [(1_200, "SIGKILL")], 10_000)
    out = row_from_result("kills", r, ["router-0 pid 5"])
    assert (out.sent, out.verdicts, out.lost, out.duplicates, out.different) == (3, 2, ["c"], 2, ["b"])
    assert out.p99_during_ms is None and out.p99_after_ms == math.inf  # c, created after the fault, is lost
    assert out.figures["faults"] == "1 kill -9, 0 SIGTERM"
    assert out.failed == ["1 lost", "1 worker crashes", "1 ids with different verdicts"]


def test_the_table_has_one_cell_per_column_and_says_what_failed() -> None:
    rows = [row(), row(scenario="broker", lost=["x"], p99_after_ms=math.inf, figures={"SIGTERM": "client acknowledged again after 8.1 s"})]
    cells = table_rows(rows)
    assert all(len(c) == len(COLUMNS) for c in cells)
    assert cells[0][-1] == "ok" and cells[0][7] == "1,200 ms"
    assert cells[1][-1] == "FAILED: 1 lost" and cells[1][8] == "never (lost)" and "8.1 s" in cells[1][9]
    md = markdown(rows).splitlines()
    assert len(md) == 4 and md[0].startswith("| scenario |")
