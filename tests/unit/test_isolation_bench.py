"""The pure parts of the real-fleet tenant isolation bench (tools/bench/isolation.py): outcomes,
phase statistics, ratios and tables, the settings file, the router's counters, the cost stage."""

from __future__ import annotations

import math
import time
import tomllib
from pathlib import Path

import pytest

from rtaudit.schemas.messages import ModalityTask, Verdict
from rtaudit.tools.bench import isolation as iso
from rtaudit.workers.settings import Settings


def verdict(**kw) -> Verdict:  # type: ignore[no-untyped-def]
    base = dict(request_id="r1", tenant_id="t", decision="allow", complete=True, policy_version="p",
                created_at_ms=1, deadline_ms=2, decided_at_ms=3, latency_ms=2)
    return Verdict(**{**base, **kw})


def test_outcome_of_names_throttled_expired_ok_and_incomplete() -> None:
    assert iso.outcome_of(verdict()) == "ok"
    assert iso.outcome_of(verdict(complete=False, decision="review",
                                  reasons=["rejected: throttled: over quota 39.5 req/s"])) == "throttled"
    assert iso.outcome_of(verdict(complete=False, parts={"text:0": "expired"})) == "expired"
    assert iso.outcome_of(verdict(complete=False, parts={"text:0": "missing"})) == "incomplete"


def test_summarize_counts_unanswered_at_the_censor_time_and_splits_hops() -> None:
    quiet = [iso.Answer(100.0 + i, True, 100.0 + i + 0.05, "ok", batch_size=2, queue_ms=10.0,
                        routed_ms=int((100.0 + i) * 1000) + 5, scored_ms=int((100.0 + i) * 1000) + 40) for i in range(99)]
    quiet.append(iso.Answer(200.0, True))  # never answered: counts with censor - due = 3000 ms
    flood = [iso.Answer(1.0, False, 2.0, "throttled")] * 3 + [iso.Answer(1.0, False, 2.0, "ok"), iso.Answer(1.0)]
    p = iso.summarize("throttle", 10.0, 500.0, quiet, flood, censor_s=203.0, delayed=4)
    assert p.quiet_sent == 100 and p.quiet_outcomes == {"ok": 99}
    assert p.p50_ms == pytest.approx(50.0, abs=0.01)
    assert p.p99_ms > 50.0  # the unanswered one is in the tail, not dropped
    assert p.flood == {"throttled": 3, "ok": 1, "unanswered": 1}
    assert p.hops["router"][0] == pytest.approx(5.0, abs=1.0)
    assert p.hops["text"][0] == pytest.approx(35.0, abs=1.0)
    assert p.hops["fusion"][0] == pytest.approx(10.0, abs=1.0)
    assert p.quiet_batch_mean == 2.0 and p.quiet_queue_p50_ms == 10.0 and p.delayed == 4 and p.lowered is None


def phase(name: str, p50: float, p99: float, **kw) -> iso.Phase:  # type: ignore[no-untyped-def]
    return iso.Phase(name, 15.8, kw.pop("flood_rate", 0.0), 100, {"ok": 100}, p50, p99, **kw)


def test_ratio_is_p99_with_the_neighbour_over_alone_and_the_tables_say_met_or_not() -> None:
    met = iso.Pair("throttle", phase("alone", 60, 80), phase("throttle", 70, 92, flood_rate=790,
                                                                 flood={"ok": 40, "throttled": 700}))
    missed = iso.Pair("lower_lane", phase("alone", 60, 80), phase("lower_lane", 300, 400, flood_rate=790, lowered=650))
    assert met.ratio == pytest.approx(1.15) and missed.ratio == pytest.approx(5.0)
    assert math.isnan(iso.Pair("x", phase("alone", 0, 0), phase("x", 1, 1)).ratio)
    rows = iso.ratio_table([met, missed])
    assert len(rows) == 4 and rows[0].startswith("| neighbour |")
    assert "**1.15** met" in rows[2] and "40 / 700 / 0 / 0 / 0" in rows[2]
    assert "**5.00** not met" in rows[3] and rows[3].endswith("| - | 650 |")
    hops = iso.hop_table([met, missed])
    assert len(hops) == 4 and all(r.count("|") == hops[0].count("|") for r in hops)


def test_settings_file_puts_every_tenant_on_hi_with_each_flood_tenants_quota(tmp_path: Path) -> None:
    text = iso.settings_toml(19092, tmp_path / "state", 9300, 39.5, 2.0)
    s = Settings(**tomllib.loads(text))
    assert s.embedded_port == 19092 and s.metrics_port == 9300
    assert {t: p.lane for t, p in s.tenants.items()} == {iso.QUIET: "hi", **{t: "hi" for t, _ in iso.CONFIGS.values()}}
    for tenant, over in iso.CONFIGS.values():
        q = s.tenants[tenant].quota
        if over is None:
            assert q.limit.unlimited
        else:
            assert (q.over_quota, q.rate_per_s, q.burst) == (over, 39.5, 2.0)


def test_router_counters_reads_the_quota_counters_by_tenant_and_action() -> None:
    text = "\n".join([
        "# TYPE rtaudit_over_quota_requests_total counter",
        'rtaudit_over_quota_requests_total{action="lower_lane",tenant="flood-lower"} 650.0',
        'rtaudit_over_quota_requests_total{action="delay",tenant="flood-delay"} 700.0',
        "# TYPE rtaudit_quota_delayed_requests_total counter",
        'rtaudit_quota_delayed_requests_total{outcome="routed",tenant="flood-delay"} 80.0',
        "# TYPE rtaudit_other_total counter",
        'rtaudit_other_total{role="router"} 1.0',
    ]) + "\n"
    c = iso.router_counters(text)
    assert c[("rtaudit_over_quota_requests_total", "flood-lower", "lower_lane")] == 650
    assert c[("rtaudit_quota_delayed_requests_total", "flood-delay", "routed")] == 80
    assert len(c) == 3


def test_cost_stage_sleeps_batch_plus_item_cost_and_scores_every_input() -> None:
    cost = iso.Cost(batch_ms=20, item_ms=6, max_size=64)
    assert cost.capacity_per_s == pytest.approx(64 / 0.404)
    stage = iso.CostStage(iso.Cost(batch_ms=5, item_ms=2, max_size=8))
    task = ModalityTask(request_id="r", tenant_id="t", part="text:0", modality="text", lane="hi",
                        created_at_ms=1, deadline_ms=2, routed_at_ms=1, text="hello")
    assert stage.prepare(task) == "hello"
    started = time.perf_counter()
    out = stage.infer(["a"] * 5)
    assert time.perf_counter() - started >= 0.014 and len(out) == 5 and stage.stage == "text"
    assert stage.model.name == "cost"


def test_importing_the_module_builds_no_app_and_unknown_names_raise() -> None:
    assert "app" not in vars(iso)
    with pytest.raises(AttributeError):
        iso.no_such_name  # noqa: B018


def test_a_metrics_port_block_is_free_and_outside_the_ephemeral_range() -> None:
    import socket

    from rtaudit.tools.bench.rig import PORT_BLOCK_RANGE, free_port_block

    base = free_port_block(4)
    assert PORT_BLOCK_RANGE[0] <= base and base + 4 <= PORT_BLOCK_RANGE[1]
    for port in range(base, base + 4):
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
