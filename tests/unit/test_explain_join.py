"""The explain role's join of image tasks, verdicts and on-demand requests (no broker)."""

from __future__ import annotations

from rtaudit.engine.explain.join import ExplainJoin

LANE, VERDICTS, ASK = "audit.image.hi", "audit.verdicts", "audit.explain.requests"


def join(**kw) -> ExplainJoin:  # type: ignore[no-untyped-def]
    args = dict(retention_ms=10_000, budget_bytes=1_000, wait_ms=500)
    args.update(kw)
    return ExplainJoin({"review", "block"}, **args)  # type: ignore[arg-type]


def test_review_verdict_explains_each_held_image_part_and_allow_explains_none():
    j = join()
    j.add_task("r1", "image:0", b"a" * 10, (LANE, 0, 5), 0)
    j.add_task("r1", "image:1", b"b" * 10, (LANE, 0, 6), 0)
    j.add_task("r2", "image:0", b"c" * 10, (LANE, 0, 7), 0)
    jobs = j.add_verdict("r1", "review", ["image:0", "image:1"], (VERDICTS, 0, 0), 10)
    assert [(x.request_id, x.part, x.trigger, x.decision, x.task.raw) for x in jobs] == [
        ("r1", "image:0", "verdict", "review", b"a" * 10), ("r1", "image:1", "verdict", "review", b"b" * 10)]
    assert j.add_verdict("r2", "allow", ["image:0"], (VERDICTS, 0, 1), 10) == []
    assert j.add_verdict("r3", "block", [], (VERDICTS, 0, 2), 10) == []  # a text-only request
    # every task resolved: the lane commits past them, the verdicts past theirs
    assert j.commit_offsets() == {(LANE, 0): 8, (VERDICTS, 0): 3}


def test_unresolved_tasks_hold_back_the_lanes_commit():
    j = join()
    j.add_task("r1", "image:0", b"x", (LANE, 1, 40), 0)
    j.add_task("r2", "image:0", b"x", (LANE, 1, 41), 0)
    j.add_verdict("r2", "allow", ["image:0"], (VERDICTS, 1, 9), 0)
    assert j.commit_offsets() == {(LANE, 1): 40, (VERDICTS, 1): 10}
    j.add_verdict("r1", "allow", ["image:0"], (VERDICTS, 1, 10), 0)
    assert j.commit_offsets() == {(LANE, 1): 42, (VERDICTS, 1): 11}


def test_a_verdict_before_its_task_waits_for_it_then_holds_its_offset_until_done():
    j = join()
    assert j.add_verdict("r1", "block", ["image:0"], (VERDICTS, 2, 3), 0) == []
    assert j.commit_offsets()[(VERDICTS, 2)] == 3, "the waiting verdict is replayed after a crash"
    jobs = j.add_task("r1", "image:0", b"img", (LANE, 2, 0), 100)
    assert [(x.part, x.decision, x.task.raw) for x in jobs] == [("image:0", "block", b"img")]
    assert j.commit_offsets() == {(VERDICTS, 2): 4, (LANE, 2): 1}


def test_a_verdict_whose_task_never_comes_gets_an_unavailable_job_after_the_wait():
    j = join(wait_ms=500)
    j.add_task("r1", "image:0", b"img", (LANE, 0, 0), 0)
    assert j.add_verdict("r1", "review", ["image:0", "image:1"], (VERDICTS, 0, 0), 0) == []
    assert j.expire(499) == []
    jobs = j.expire(500)
    assert [(x.part, x.task is not None, x.reason != "") for x in jobs] == [("image:0", True, False), ("image:1", False, True)]
    assert "500 ms" in jobs[1].reason and j.waiting == {}


def test_on_demand_finds_held_parts_until_retention_and_says_why_when_gone():
    j = join(retention_ms=1_000, wait_ms=500)
    j.add_task("r1", "image:0", b"img0", (LANE, 0, 0), 0)
    j.add_task("r1", "image:1", b"img1", (LANE, 0, 1), 0)
    j.add_verdict("r1", "allow", ["image:0", "image:1"], (VERDICTS, 0, 0), 0)
    assert [x.part for x in j.on_demand("r1", None, (ASK, 0, 0), 0)] == ["image:0", "image:1"]
    assert [x.part for x in j.on_demand("r1", "image:1", (ASK, 0, 1), 0)] == ["image:1"]
    j.expire(1_000)
    assert j.on_demand("r1", None, (ASK, 0, 2), 1_000) == [] and j.held_bytes == 0
    assert j.commit_offsets()[(ASK, 0)] == 2, "the waiting request is replayed after a crash"
    assert j.expire(1_499) == []
    [gone] = j.expire(1_500)
    assert gone.task is None and gone.trigger == "on_demand" and "held for 1000 ms" in gone.reason
    assert j.commit_offsets()[(ASK, 0)] == 3


def test_an_on_demand_request_read_before_its_task_is_answered_when_the_task_comes():
    j = join()
    assert j.on_demand("r1", "image:1", (ASK, 0, 0), 0) == []
    assert j.on_demand("r1", None, (ASK, 0, 1), 0) == []
    jobs = j.add_task("r1", "image:0", b"img0", (LANE, 0, 0), 10)  # answers the request for any part
    assert [(x.part, x.trigger, x.task.raw) for x in jobs] == [("image:0", "on_demand", b"img0")]
    jobs = j.add_task("r1", "image:1", b"img1", (LANE, 0, 1), 10)
    assert [(x.part, x.trigger) for x in jobs] == [("image:1", "on_demand")]
    assert j.asks == [] and j.commit_offsets()[(ASK, 0)] == 2


def test_the_byte_budget_evicts_the_oldest_and_counts_unresolved_evictions():
    j = join(budget_bytes=25)
    for i in range(3):
        j.add_task(f"r{i}", "image:0", b"x" * 10, (LANE, 0, i), 0)
    assert [t.request_id for t in j.tasks.values()] == ["r1", "r2"] and j.held_bytes == 20
    assert j.evicted_unresolved == 1
    assert j.commit_offsets() == {(LANE, 0): 1}


def test_replayed_tasks_expire_even_unresolved_and_a_duplicate_replaces_the_copy():
    j = join(retention_ms=1_000)
    j.add_task("r1", "image:0", b"old", (LANE, 0, 0), 0)
    j.add_task("r1", "image:0", b"new", (LANE, 0, 1), 0)
    assert len(j.tasks) == 1 and j.held_bytes == 3 and j.tasks[("r1", "image:0")].raw == b"new"
    j.expire(1_000)
    assert j.tasks == {} and j.expired_unresolved == 1 and j.commit_offsets() == {(LANE, 0): 2}


def test_forget_drops_a_revoked_partitions_state():
    j = join()
    j.add_task("r1", "image:0", b"x", (LANE, 0, 0), 0)
    j.add_task("r2", "image:0", b"x", (LANE, 1, 0), 0)
    j.add_verdict("r3", "review", ["image:0"], (VERDICTS, 0, 0), 0)
    j.forget({(LANE, 0), (VERDICTS, 0)})
    assert list(j.tasks) == [("r2", "image:0")] and j.waiting == {} and j.commit_offsets() == {(LANE, 1): 0}


def test_rtaudit_up_adds_the_explain_role_only_when_enabled_and_installed(monkeypatch):
    from rtaudit.tools.fleet import local as fleet
    from rtaudit.workers.roles import ROLES
    from rtaudit.workers.explain_settings import ExplainSettings
    from rtaudit.workers.settings import Settings

    on, off = Settings(), Settings(explain=ExplainSettings(enabled=False))
    monkeypatch.setattr(fleet, "explain_unavailable", lambda: None)
    assert fleet.fleet_roles(on) == ROLES + ("explain",) and fleet.fleet_roles(off) == ROLES
    monkeypatch.setattr(fleet, "explain_unavailable", lambda: "the explain extra is not installed (torchcam)")
    assert fleet.fleet_roles(on) == ROLES


def test_explanation_lines_name_the_request_part_and_result():
    from rtaudit.schemas.explain import Explanation
    from rtaudit.schemas.messages import ModelRef
    from rtaudit.cli.explain import explanation_line

    common = dict(request_id="r1", part="image:0", trigger="verdict", model=ModelRef(name="open-nsfw", version="0.1.0+864bb37bf886"),
                  method="gradcam++", target="nsfw", layer="Relu_48", box_threshold=0.5, produced_at_ms=1)
    ok = Explanation(status="ok", score=0.25, peak_box=(1, 2, 3, 4), heatmap_size=(64, 48), compute_ms=41.6, **common)  # type: ignore[arg-type]
    assert explanation_line(ok) == "  explain r1 image:0 gradcam++ nsfw=0.250 peak box [1, 2, 3, 4] heatmap 64x48 (verdict, 42 ms)"
    gone = Explanation(status="unavailable", error_code="not_held", error="no image task of this request is held", **common)  # type: ignore[arg-type]
    assert explanation_line(gone) == "  explain r1 image:0 unavailable: not_held: no image task of this request is held"
