"""Benchmark arithmetic for ``rtaudit bench`` (pure: no Kafka, no clocks read here).

* open-loop schedules: item ``i`` of a step at rate ``r`` is due at ``t0 + i / r``
  seconds, whatever happened to earlier items; latency is measured from that due
  time, so a stalled system cannot slow its own load down and hide its queueing
  (coordinated omission; see Gil Tene, "How NOT to measure latency", and the
  constant-throughput mode of wrk2);
* step statistics: offered rate, achieved throughput, P50/P95/P99 latency,
  SLO misses, micro-batch size distribution;
* the knee of a stepped load (the last step that keeps up with its offered rate
  within the latency bound) and the ratios the issue asks for.

Percentiles come from :func:`rtaudit.tools.demo.corpus.percentile` (``statistics.quantiles``,
inclusive method), the same definition the demo summary uses.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from rtaudit.tools.demo.corpus import percentile

#: A step "keeps up" when it achieves at least this share of its offered rate (Locust-style knee).
KEEP_UP_RATIO = 0.95
#: Upper bounds of the batch-size buckets, as the ``rtaudit_batch_size`` Prometheus histogram.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def step_rates(reference_per_s: float, fractions: Sequence[float]) -> list[float]:
    """Offered rates (items/s) of a stepped load: ``reference × fraction``, ascending.

    Raises ``ValueError`` when the reference or a fraction is not positive."""
    if reference_per_s <= 0 or any(f <= 0 for f in fractions):
        raise ValueError(f"rates must be positive: reference {reference_per_s}, fractions {list(fractions)}")
    return sorted(reference_per_s * f for f in fractions)


def midpoint_rate(good_per_s: float, bad_per_s: float) -> float:
    """Geometric mean of the last rate that kept up and the first that did not (one bisection step)."""
    return math.sqrt(good_per_s * bad_per_s)


def step_count(rate_per_s: float, duration_s: float, max_items: int, min_items: int = 3) -> int:
    """Items in one step: ``rate × duration`` rounded up, clamped to ``[min_items, max_items]``."""
    return max(min_items, min(max_items, math.ceil(rate_per_s * duration_s)))


def schedule(rate_per_s: float, count: int, t0_s: float = 0.0) -> list[float]:
    """Due times (s) of ``count`` items at a constant ``rate_per_s`` from ``t0_s``: ``t0 + i / rate``."""
    if rate_per_s <= 0:
        raise ValueError(f"rate must be positive, got {rate_per_s}")
    return [t0_s + i / rate_per_s for i in range(count)]


def merge_schedules(*streams: Iterable[tuple[float, object]]) -> list[tuple[float, object]]:
    """Interleave several ``(due_s, item)`` streams into one, by due time (stable for ties)."""
    merged = [entry for stream in streams for entry in stream]
    merged.sort(key=lambda entry: entry[0])
    return merged


def batch_histogram(item_batch_sizes: Iterable[int]) -> dict[int, float]:
    """Batches per size bucket, from the batch size each *item* reported.

    Every item of a batch of ``b`` reports ``b``, so ``b`` items count as one batch.
    Keys are bucket upper bounds (:data:`BATCH_BUCKETS`, Prometheus ``le``); sizes
    above the last bucket fall into it.
    """
    hist: dict[int, float] = {}
    for size, items in Counter(item_batch_sizes).items():
        if size <= 0:
            continue
        le = next((b for b in BATCH_BUCKETS if size <= b), BATCH_BUCKETS[-1])
        hist[le] = hist.get(le, 0.0) + items / size
    return dict(sorted(hist.items()))


def mean_batch_size(item_batch_sizes: Sequence[int]) -> float:
    """Mean items per batch: items divided by batches (``nan`` when there are none)."""
    sizes = [s for s in item_batch_sizes if s > 0]
    batches = sum(1.0 / s for s in sizes)
    return len(sizes) / batches if batches else float("nan")


@dataclass(frozen=True)
class Sample:
    """One item of a step: when it was due and, if answered, when and how.

    ``status`` is the partial's (``ok``, ``error``, ``expired``) or, for a verdict,
    ``ok`` when complete and ``incomplete`` otherwise; ``None`` when no answer came.
    ``batch_sizes`` maps stage → the micro-batch size reported by that stage's partial.
    """

    due_s: float
    arrived_s: float | None = None
    status: str | None = None
    batch_sizes: dict[str, int] = field(default_factory=dict)
    #: the partial's ``timings.queue_ms`` (routed → its batch formed), per stage.
    queue_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StepResult:
    """What one step measured. Rates in items/s, latencies in ms from each item's due time."""

    target: str
    offered_per_s: float
    duration_s: float
    sent: int
    ok: int
    failed: int
    unanswered: int
    achieved_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    slo_ms: float
    slo_misses: int
    batch_mean: dict[str, float]
    batch_hist: dict[str, dict[int, float]]
    #: how far the load generator fell behind its own schedule at worst, ms.
    send_lag_ms: float = 0.0
    #: median time from routing (the due time, per stage) to the item's batch forming, ms, per stage.
    queue_p50_ms: dict[str, float] = field(default_factory=dict)
    #: CPU used during the step per process (worker roles, naive, peers, broker, bench), % of one core.
    cpu_pct: dict[str, float] = field(default_factory=dict)
    note: str = ""
    #: CPU seconds used during the step per process (same keys as ``cpu_pct``), s.
    cpu_s: dict[str, float] = field(default_factory=dict)

    def keeps_up(self, bound_ms: float, ratio: float = KEEP_UP_RATIO) -> bool:
        """Achieved ≥ ``ratio`` × offered, P99 ≤ ``bound_ms`` and every item answered."""
        return self.achieved_per_s >= ratio * self.offered_per_s and self.p99_ms <= bound_ms and self.unanswered == 0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def summarize_step(
    target: str, offered_per_s: float, samples: Sequence[Sample], slo_ms: float, censor_s: float,
    send_lag_ms: float = 0.0, note: str = "", cpu_pct: dict[str, float] | None = None,
    cpu_s: dict[str, float] | None = None,
) -> StepResult:
    """Statistics of one step.

    Args:
        target: what was measured (``text worker``, ``text naive``...).
        offered_per_s: the step's scheduled rate.
        samples: one per item sent, in due order.
        slo_ms: latency budget; an item misses it when it was not answered ``ok`` within it.
        censor_s: when the step stopped waiting; an unanswered item counts with latency
            ``censor_s - due_s`` (a lower bound, so the tail is never flattered).

    Achieved throughput is the departure rate of ``ok`` answers (:func:`departure_rate`):
    at or under capacity it tracks the offered rate whatever the latency, so short
    steps are not penalised; past it, it is the rate the system really served.
    """
    if not samples:
        raise ValueError("a step needs at least one sample")
    first_due = min(s.due_s for s in samples)
    latencies = [
        ((s.arrived_s if s.arrived_s is not None else censor_s) - s.due_s) * 1000.0 for s in samples
    ]
    ok = [s for s in samples if s.status == "ok"]
    answered = [s for s in samples if s.arrived_s is not None]
    achieved = departure_rate([s.arrived_s for s in ok if s.arrived_s is not None])
    misses = sum(1 for s, lat in zip(samples, latencies) if s.status != "ok" or lat > slo_ms)
    by_stage: dict[str, list[int]] = {}
    queued: dict[str, list[float]] = {}
    for s in samples:
        for stage, size in s.batch_sizes.items():
            by_stage.setdefault(stage, []).append(size)
        for stage, q in s.queue_ms.items():
            queued.setdefault(stage, []).append(q)
    return StepResult(
        target=target, offered_per_s=offered_per_s,
        duration_s=(max(s.due_s for s in samples) - first_due) + 1.0 / offered_per_s,
        sent=len(samples), ok=len(ok), failed=len(answered) - len(ok), unanswered=len(samples) - len(answered),
        achieved_per_s=achieved,
        p50_ms=percentile(latencies, 50), p95_ms=percentile(latencies, 95), p99_ms=percentile(latencies, 99),
        slo_ms=slo_ms, slo_misses=misses,
        batch_mean={k: mean_batch_size(v) for k, v in by_stage.items()},
        batch_hist={k: batch_histogram(v) for k, v in by_stage.items()},
        send_lag_ms=send_lag_ms, note=note, cpu_pct=dict(cpu_pct or {}), cpu_s=dict(cpu_s or {}),
        queue_p50_ms={k: percentile(v, 50) for k, v in queued.items()},
    )


def departure_rate(arrivals_s: Sequence[float]) -> float:
    """Answers per second from their arrival times: between the 10th and 90th arrival
    percentiles when there are 20 or more (robust to the first and last items' latency
    jitter and to batch-quantised arrivals), else from the first to the last; 0 for fewer than two."""
    a = sorted(arrivals_s)
    if len(a) < 2:
        return 0.0
    lo, hi = (int(0.1 * (len(a) - 1)), int(0.9 * (len(a) - 1))) if len(a) >= 20 else (0, len(a) - 1)
    span = a[hi] - a[lo]
    return (hi - lo) / span if span > 0 else 0.0


def find_knee(steps: Sequence[StepResult], bound_ms: float, ratio: float = KEEP_UP_RATIO) -> StepResult | None:
    """The knee of a stepped load: the highest-offered step that keeps up (achieved ≥
    ``ratio`` × offered, P99 ≤ ``bound_ms``, nothing unanswered); ``None`` when none does."""
    good = [s for s in steps if s.keeps_up(bound_ms, ratio)]
    return max(good, key=lambda s: s.offered_per_s, default=None)


def saturated(steps: Sequence[StepResult], bound_ms: float, ratio: float = KEEP_UP_RATIO) -> bool:
    """True when some step above the knee failed to keep up: the knee is the capacity. False
    when every step kept up (the run ended first): the knee is only a lower bound."""
    knee = find_knee(steps, bound_ms, ratio)
    return any(not s.keeps_up(bound_ms, ratio) and (knee is None or s.offered_per_s > knee.offered_per_s) for s in steps)


def peak_throughput(steps: Sequence[StepResult]) -> float:
    """The most items/s any step achieved (0 when there are none)."""
    return max((s.achieved_per_s for s in steps), default=0.0)


def throughput_within_p99(steps: Sequence[StepResult], p99_ms: float) -> StepResult | None:
    """The step with the highest achieved throughput whose P99 is at most ``p99_ms``
    and that answered everything; ``None`` when no step is that fast."""
    fits = [s for s in steps if s.p99_ms <= p99_ms and s.unanswered == 0]
    return max(fits, key=lambda s: s.achieved_per_s, default=None)


@dataclass(frozen=True)
class Ratio:
    """One target of the issue, as measured: ``value`` against ``target`` (``at_least`` or ``at_most``)."""

    stage: str
    name: str
    value: float | None
    target: float
    direction: str  # "at_least" | "at_most"
    detail: str = ""

    @property
    def met(self) -> bool | None:
        if self.value is None or math.isnan(self.value):
            return None
        return self.value >= self.target if self.direction == "at_least" else self.value <= self.target


def safe_ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or ``None`` when either is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def cpu_percent(before: dict[str, float], after: dict[str, float], wall_s: float) -> dict[str, float]:
    """CPU seconds used between two snapshots, per process name, as % of one core over ``wall_s``."""
    if wall_s <= 0:
        return {}
    return {k: round(100.0 * (after[k] - before[k]) / wall_s, 1) for k in after if k in before}


def cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds used between two snapshots, per process name present in both, s."""
    return {k: round(after[k] - before[k], 4) for k in after if k in before}


def cpu_ms_per_item(step: StepResult, processes: Sequence[str]) -> float | None:
    """CPU ms the named processes used during ``step`` per item answered ``ok``; ``None`` when
    the step answered nothing or recorded no CPU seconds for one of them."""
    if step.ok <= 0 or any(p not in step.cpu_s for p in processes):
        return None
    return 1000.0 * sum(step.cpu_s[p] for p in processes) / step.ok


# ---------------------------------------------------------------- peers


@dataclass(frozen=True)
class PeerComparison:
    """The worker against one peer, both stepped with the same load in the same run.

    Rates in items/s, latencies in ms. ``at_peer_p99`` is the worker's best step whose P99
    is within the peer's P99 at the peer's knee; ``throughput_ratio`` = its achieved rate
    over the peer's knee throughput (the issue's target: ≥ 1.2). ``p99_70_ratio`` = the
    worker's P99 at 70 % of its own capacity over the peer's at 70 % of the peer's (≤ 1).
    A ratio is ``None`` when a side was not measured (no knee, no 70 % step, or a knee
    that is only a lower bound: capacity not found).
    """

    peer: str
    worker_knee: StepResult | None
    peer_knee: StepResult | None
    at_peer_p99: StepResult | None
    throughput_ratio: float | None
    worker_70: StepResult | None
    peer_70: StepResult | None
    p99_70_ratio: float | None
    #: each side's knee is the capacity (a step above it failed), not only a lower bound.
    worker_saturated: bool
    peer_saturated: bool


def compare_peer(
    peer: str, worker: Sequence[StepResult], peer_steps: Sequence[StepResult], bound_ms: float,
    worker_70: StepResult | None = None, peer_70: StepResult | None = None,
) -> PeerComparison:
    """Compare the worker's stepped series with a peer's (same offered rates and ``bound_ms``).

    The throughput ratio needs the peer's knee; it is rated even when the worker never
    saturated (its knee is then a lower bound, so the ratio is too). The P99 ratio at 70 %
    needs both 70 % steps and both capacities found (70 % of a lower bound is not 70 % load).
    """
    wk, pk = find_knee(worker, bound_ms), find_knee(peer_steps, bound_ms)
    at = throughput_within_p99(worker, pk.p99_ms) if pk is not None else None
    w_sat, p_sat = saturated(worker, bound_ms), saturated(peer_steps, bound_ms)
    ratio_70 = None
    if worker_70 is not None and peer_70 is not None and w_sat and p_sat:
        ratio_70 = safe_ratio(worker_70.p99_ms, peer_70.p99_ms)
    return PeerComparison(
        peer=peer, worker_knee=wk, peer_knee=pk, at_peer_p99=at,
        throughput_ratio=safe_ratio(at.achieved_per_s if at else None, pk.achieved_per_s if pk else None),
        worker_70=worker_70, peer_70=peer_70, p99_70_ratio=ratio_70, worker_saturated=w_sat, peer_saturated=p_sat,
    )


def side_by_side(series: dict[str, Sequence[StepResult]], digits: int = 1) -> list[tuple[float, dict[str, StepResult]]]:
    """Steps of several series aligned by offered rate (items/s, rounded to ``digits``):
    one ``(rate, {series name: its step at that rate})`` per rate any series offered, ascending.
    A series with two steps at the same rounded rate keeps the later one."""
    rows: dict[float, dict[str, StepResult]] = {}
    for name, steps in series.items():
        for s in steps:
            rows.setdefault(round(s.offered_per_s, digits), {})[name] = s
    return sorted(rows.items())


def format_hist(hist: dict[int, float]) -> str:
    """``"1:12 4:30 64:7"``: batches per bucket (upper bound: count), rounded."""
    return " ".join(f"{le}:{round(n)}" for le, n in hist.items() if round(n) > 0)
