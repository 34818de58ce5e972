"""The pure arithmetic of ``rtaudit bench``: schedules, step statistics, the knee, the ratios."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rtaudit.tools.bench import mixed_reference
from rtaudit.tools.bench.inputs import Limit, batch_sizes, modality_of
from rtaudit.tools.bench.stats import (
    Ratio, Sample, StepResult, batch_histogram, cpu_percent, departure_rate, find_knee, format_hist, mean_batch_size, merge_schedules,
    midpoint_rate, safe_ratio, schedule, step_count, step_rates, summarize_step, throughput_within_p99,
)


def step(offered: float, achieved: float, p99: float, unanswered: int = 0) -> StepResult:
    return StepResult(
        target="t", offered_per_s=offered, duration_s=1.0, sent=10, ok=10 - unanswered, failed=0, unanswered=unanswered,
        achieved_per_s=achieved, p50_ms=p99 / 2, p95_ms=p99, p99_ms=p99, slo_ms=1000, slo_misses=0,
        batch_mean={}, batch_hist={},
    )


# ------------------------------------------------------------ schedules


def test_schedule_is_open_loop_constant_rate() -> None:
    assert schedule(4.0, 5, t0_s=10.0) == [10.0, 10.25, 10.5, 10.75, 11.0]


def test_schedule_rejects_non_positive_rate() -> None:
    with pytest.raises(ValueError):
        schedule(0.0, 3)


@given(st.floats(0.01, 1e5), st.integers(1, 500))
def test_schedule_spacing_is_the_inverse_rate(rate: float, n: int) -> None:
    due = schedule(rate, n, 5.0)
    assert len(due) == n and due[0] == 5.0
    assert all(math.isclose(b - a, 1.0 / rate, rel_tol=1e-6) for a, b in zip(due, due[1:]))


def test_step_rates_ascending_fractions_of_reference() -> None:
    assert step_rates(200.0, (1.0, 0.25, 0.5)) == [50.0, 100.0, 200.0]
    with pytest.raises(ValueError):
        step_rates(0.0, (0.5,))


def test_step_count_is_rate_times_duration_clamped() -> None:
    assert step_count(100.0, 2.0, max_items=1000) == 200
    assert step_count(100.0, 2.0, max_items=150) == 150
    assert step_count(0.1, 2.0, max_items=150) == 3  # at least the minimum
    assert step_count(10.5, 1.0, max_items=150) == 11  # rounded up


def test_merge_schedules_interleaves_by_due_time() -> None:
    hi = [(0.0, "h0"), (1.0, "h1")]
    lo = [(0.5, "l0"), (1.0, "l1"), (1.5, "l2")]
    assert [x for _, x in merge_schedules(hi, lo)] == ["h0", "l0", "h1", "l1", "l2"]


def test_midpoint_is_geometric() -> None:
    assert midpoint_rate(100.0, 400.0) == pytest.approx(200.0)


# ------------------------------------------------------------ batch sizes


def test_batch_histogram_counts_batches_not_items() -> None:
    # two batches of 4 (8 items say 4), one of 1, one of 3 (bucket le=4), one of 64
    sizes = [4] * 8 + [1] + [3] * 3 + [64] * 64
    assert batch_histogram(sizes) == {1: 1.0, 4: 3.0, 64: 1.0}
    assert format_hist(batch_histogram(sizes)) == "1:1 4:3 64:1"


def test_batch_histogram_puts_oversized_batches_in_the_last_bucket() -> None:
    assert batch_histogram([512] * 512) == {256: 1.0}


def test_mean_batch_size_is_items_over_batches() -> None:
    assert mean_batch_size([4] * 8 + [1]) == pytest.approx(9 / 3)
    assert math.isnan(mean_batch_size([]))


# ------------------------------------------------------------ step statistics


def test_summarize_measures_from_due_time_and_censors_the_unanswered() -> None:
    samples = [Sample(due_s=i * 0.1, arrived_s=i * 0.1 + 0.05, status="ok", batch_sizes={"text": 2}) for i in range(9)]
    samples.append(Sample(due_s=0.9))  # never answered
    r = summarize_step("text worker", 10.0, samples, slo_ms=500, censor_s=3.0)
    assert r.sent == 10 and r.ok == 9 and r.unanswered == 1 and r.failed == 0
    assert r.p50_ms == pytest.approx(50.0)
    # the lost item counts with latency censor - due = 2100 ms, so the tail shows it
    assert r.p99_ms > 1000
    assert r.slo_misses == 1
    assert r.achieved_per_s == pytest.approx(10.0)  # 9 ok arrivals from 0.05 to 0.85 s: departures at 10/s
    assert r.batch_mean == {"text": pytest.approx(2.0)}
    assert not r.keeps_up(bound_ms=1000)


def test_summarize_counts_expired_and_late_as_slo_misses() -> None:
    samples = [
        Sample(0.0, 0.1, "ok"), Sample(0.1, 0.3, "ok"), Sample(0.2, 0.9, "ok"),  # last one 700 ms: late
        Sample(0.3, 0.5, "expired"), Sample(0.4, 0.5, "error"),
    ]
    r = summarize_step("x", 10.0, samples, slo_ms=500, censor_s=1.0)
    assert r.ok == 3 and r.failed == 2 and r.slo_misses == 3


def test_summarize_rejects_an_empty_step() -> None:
    with pytest.raises(ValueError):
        summarize_step("x", 1.0, [], slo_ms=1, censor_s=0)


# ------------------------------------------------------------ knee and ratios


def test_knee_is_the_last_step_that_keeps_up() -> None:
    steps = [step(100, 99, 20), step(200, 198, 40), step(400, 390, 90), step(800, 500, 3000)]
    assert find_knee(steps, bound_ms=1000).offered_per_s == 400


def test_knee_needs_throughput_latency_and_no_losses() -> None:
    assert find_knee([step(100, 90, 20)], bound_ms=1000) is None  # achieved < 95 % of offered
    assert find_knee([step(100, 99, 1200)], bound_ms=1000) is None  # P99 over the bound
    assert find_knee([step(100, 99, 20, unanswered=1)], bound_ms=1000) is None
    assert find_knee([], bound_ms=1000) is None


def test_knee_ignores_a_noisy_failure_below_it() -> None:
    steps = [step(100, 80, 20), step(200, 199, 40), step(400, 300, 900)]
    assert find_knee(steps, bound_ms=1000).offered_per_s == 200


def test_throughput_within_p99_picks_the_fastest_step_under_the_latency() -> None:
    steps = [step(100, 99, 20), step(200, 198, 60), step(400, 390, 150)]
    assert throughput_within_p99(steps, 100).achieved_per_s == 198
    assert throughput_within_p99(steps, 10) is None


def test_ratio_direction_and_missing_values() -> None:
    assert Ratio("text", "knee / limit", 0.93, 0.9, "at_least").met is True
    assert Ratio("text", "p99", 180.0, 150.0, "at_most").met is False
    assert Ratio("text", "x", None, 1.0, "at_least").met is None
    assert safe_ratio(3.0, 0.0) is None and safe_ratio(None, 1.0) is None and safe_ratio(3.0, 2.0) == 1.5


# ------------------------------------------------------------ bench plan helpers


def test_batch_sizes_are_powers_of_two_up_to_the_max() -> None:
    assert batch_sizes(64) == [1, 2, 4, 8, 16, 32, 64]
    assert batch_sizes(6) == [1, 2, 4, 6]
    assert batch_sizes(1) == [1]


def test_stage_modalities_come_from_the_router_table() -> None:
    assert (modality_of("text"), modality_of("image"), modality_of("ocr")) == ("text", "image", "image")
    with pytest.raises(ValueError):
        modality_of("audio-asr")


def test_mixed_reference_adds_per_request_inference_cost() -> None:
    limits = {s: Limit(s, "m", {1: r}) for s, r in (("text", 1000.0), ("image", 10.0), ("ocr", 1.0))}
    # 1 ms text + 10 % × (100 ms + 1000 ms) = 111 ms per request
    assert mixed_reference(limits, 0.1) == pytest.approx(1 / 0.111)


def test_achieved_is_the_departure_rate_whatever_the_latency() -> None:
    # 20 items offered at 10/s, each answered 300 ms late: still 10/s, not 20 / 2.2 s
    samples = [Sample(i * 0.1, i * 0.1 + 0.3, "ok") for i in range(20)]
    assert summarize_step("x", 10.0, samples, slo_ms=500, censor_s=5).achieved_per_s == pytest.approx(10.0)
    # past capacity: answers leave at the service rate (4/s) however fast they came
    samples = [Sample(i * 0.1, 1.0 + i * 0.25, "ok") for i in range(20)]
    assert summarize_step("x", 10.0, samples, slo_ms=9000, censor_s=9).achieved_per_s == pytest.approx(4.0)


def test_departure_rate_ignores_the_edges() -> None:
    # 100 answers at 50/s, but the last one is 2 s late (one slow straggler)
    arrivals = [i * 0.02 for i in range(99)] + [1.98 + 2.0]
    assert departure_rate(arrivals) == pytest.approx(50.0)
    assert departure_rate([1.0]) == 0.0 and departure_rate([1.0, 1.5]) == pytest.approx(2.0)


# ------------------------------------------------------------ the stepping policy (no broker: a modelled system)


class _Reader:
    def settle(self, timeout_s: float) -> bool:
        return True


class _Rig:
    reader = _Reader()


def _series(monkeypatch: pytest.MonkeyPatch, capacity: float, rates: list[float], stop_after: int = 2, refine: int = 2) -> list[float]:
    """Run ``run_series`` against a system that serves ``capacity`` items/s (P99 explodes past it);
    returns the offered rates in the order they were stepped."""
    import rtaudit.tools.bench.runner as bench

    order: list[float] = []

    def fake_step(rig, streams, duration_s, max_items, tag):  # type: ignore[no-untyped-def]
        rate = streams[0].rate
        order.append(rate)
        ok = rate <= capacity
        return [step(rate, rate if ok else capacity, 50.0 if ok else 5000.0)]

    monkeypatch.setattr(bench, "run_step", fake_step)
    plan = bench.StagePlan(slo_ms=1000, step_s=1.0, fractions=(), naive_fractions=())
    opts = bench.BenchOptions(stop_after=stop_after, refine=refine)
    steps = bench.run_series(
        _Rig(), lambda r: bench.Stream("t", "topic", r, lambda i, rid: lambda due: b"", 1000),  # type: ignore[arg-type]
        rates, plan, opts, bench.Budget(3600), "t", lambda s: None,
    )
    assert [s.offered_per_s for s in steps] == sorted(order)  # returned in offered order
    return order


def test_series_stops_after_consecutive_failures_then_bisects(monkeypatch: pytest.MonkeyPatch) -> None:
    order = _series(monkeypatch, capacity=250, rates=[100, 200, 300, 400, 500, 600])
    assert order[:4] == [100, 200, 300, 400]  # two failures in a row: stop
    assert order[4] == pytest.approx(math.sqrt(200 * 300))  # bisect between the knee and the first failure
    assert order[5] == pytest.approx(math.sqrt(order[4] * 300))
    assert len(order) == 6


def test_series_steps_down_when_even_the_first_step_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    order = _series(monkeypatch, capacity=20, rates=[100, 200], refine=0)
    assert order == [100, 200, pytest.approx(100 / 3), pytest.approx(100 / 9)]


def test_series_goes_beyond_the_plan_while_it_keeps_up(monkeypatch: pytest.MonkeyPatch) -> None:
    order = _series(monkeypatch, capacity=150, rates=[50, 100], stop_after=1, refine=0)
    assert order == [50, 100, pytest.approx(130), pytest.approx(169)]


def test_cpu_percent_is_cpu_seconds_over_wall_time() -> None:
    assert cpu_percent({"text": 1.0, "broker": 2.0}, {"text": 1.5, "broker": 2.25, "new": 9.0}, 2.0) == {"text": 25.0, "broker": 12.5}
    assert cpu_percent({}, {"x": 1.0}, 0.0) == {}


def test_queue_time_median_per_stage() -> None:
    samples = [Sample(0.0, 0.1, "ok", {"text": 1}, {"text": q}) for q in (10.0, 20.0, 30.0)]
    assert summarize_step("x", 10.0, samples, slo_ms=500, censor_s=1).queue_p50_ms == {"text": 20.0}


def test_limit_within_the_slo_keeps_batches_that_fit_twice() -> None:
    # batch 64 at 128/s takes 500 ms; batch 256 at 160/s takes 1600 ms
    lim = Limit("text", "m", {1: 40.0, 16: 110.0, 64: 128.0, 256: 160.0})
    assert lim.best_size == 256 and lim.batch_ms(64) == pytest.approx(500.0)
    assert lim.best_within(1000.0) == 64  # 2 × 500 ms fits a 1 s SLO, 2 × 1600 ms does not
    assert lim.best_within(3200.0) == 256
    assert lim.best_within(40.0) is None  # even one item (25 ms) cannot be inferred twice in 40 ms


def test_knee_ratios_name_the_threads_and_the_slo_bound_limit() -> None:
    from rtaudit.tools.bench import TargetResult
    from rtaudit.tools.bench.report import ratios

    lim = Limit("text", "m", {1: 40.0, 64: 128.0, 256: 160.0}, threads=1, every_core=(2, {64: 200.0, 256: 250.0}))
    knee = step(115.0, 115.0, 600.0)
    res = TargetResult("text", 1000.0, limit=lim, worker=[step(50.0, 50.0, 200.0), knee, step(140.0, 110.0, 1500.0)], max_batch=64)
    got = {r.name: r for r in ratios(res)}
    assert got["knee throughput / limit"].value == pytest.approx(115 / 160)
    assert "1 inference thread(s)" in got["knee throughput / limit"].detail
    assert "every core (2 threads): 250/s" in got["knee throughput / limit"].detail
    within = got["knee throughput / limit within the SLO"]
    assert within.value == pytest.approx(115 / 128) and within.met is False


def test_a_knee_is_a_lower_bound_until_a_step_above_it_fails() -> None:
    from rtaudit.tools.bench.stats import saturated

    kept = [step(10.0, 10.0, 100.0), step(30.0, 30.0, 200.0)]
    assert find_knee(kept, 1000.0) is kept[1] and not saturated(kept, 1000.0)
    assert saturated([*kept, step(60.0, 40.0, 2000.0)], 1000.0)
    assert saturated([step(60.0, 40.0, 2000.0)], 1000.0)  # no knee at all: past capacity from the start


# ------------------------------------------------------------ the overhead bench (pure parts)


@pytest.mark.parametrize("target", ["router", "text", "fusion", "fleet"])
def test_overhead_records_are_valid_contract_records_keyed_for_their_target(target: str) -> None:
    from rtaudit.schemas.codec import decode, decode_scores_record
    from rtaudit.schemas.messages import AuditRequest, Manifest, ModalityTask, PartialScore
    from rtaudit.tools.bench.feed import input_topic, records

    recs = records(target, "hello there", "rid-1", 30_000)
    assert all(topic == input_topic(target) for topic, _ in recs)
    values = [make(1_700_000_000.0) for _, make in recs]
    if target in ("router", "fleet"):
        assert decode(values[0], AuditRequest).request_id == "rid-1"
    elif target == "text":
        task = decode(values[0], ModalityTask)
        assert (task.part, task.lane, task.deadline_ms - task.created_at_ms) == ("text:0", "lo", 30_000)
    else:  # fusion: the manifest first, then the partial it expects
        manifest, partial = (decode_scores_record(v) for v in values)
        assert isinstance(manifest, Manifest) and isinstance(partial, PartialScore)
        assert manifest.expected == [partial.key] and partial.status == "ok"


def test_router_outputs_need_a_task_and_a_manifest() -> None:
    from rtaudit.tools.bench.feed import output_labels

    labels, required = output_labels("router")
    assert required == {"task", "manifest"}
    assert labels["audit.text.lo"] == labels["audit.text.hi"] == "task" and labels["audit.scores"] == "manifest"


def test_overhead_rates_and_cpu_per_thousand() -> None:
    from rtaudit.tools.bench.feed import RawRates
    from rtaudit.tools.bench.overhead import TargetOverhead

    r = TargetOverhead("fusion", "null", ("fusion",), inputs_per_request=2, requests=1000, answered=1000, seconds=0.5,
                       raw=RawRates(2000, 300.0, 100_000.0, 400_000.0), cpu_s={"fusion": 0.3, "broker": 0.1}, cpu_window_s=0.6)
    assert r.per_s == 2000 and r.input_records_per_s == 4000
    assert r.of_raw_consume == pytest.approx(0.01)
    assert r.cpu_per_1k("fusion") == pytest.approx(0.3) and r.cpu_per_1k("router") is None
    assert r.busy("fusion") == pytest.approx(0.5)
    empty = TargetOverhead("text", "null", ("text",), inputs_per_request=1)
    assert empty.per_s == 0 and empty.of_raw_consume is None and empty.cpu_per_1k("text") is None
