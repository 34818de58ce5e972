"""Tenant isolation (issue 10.8): a quiet tenant's P99 alone and next to a tenant flooding at 5× capacity.

What runs: the fleet's own router quota (:class:`rtaudit.engine.quota.TenantQuotas` with each tenant's
:class:`rtaudit.engine.policy.QuotaPolicy`) and the text stage's own micro-batcher
(:class:`rtaudit.engine.batcher.Batcher` with the ``balanced`` profile's text limits from
``workers/batch_settings.py``), driven as a discrete-event simulation in *virtual* time: the model
stage is a fixed cost per batch (``b + a·n``, ``--batch-ms`` and ``--item-ms``), arrivals are
seeded Poisson streams, and the lane topics are unbounded FIFOs (Kafka) that the intake moves
into the batcher while its lane has room (``max_queued``) and, for the low lane, while the
batcher does not ask for it to be paused. Virtual time makes the figure reproducible and free
of the noise of a shared machine; it measures the policies (quota, lanes, batching, fairness),
not Python's per-item overhead (``rtaudit bench`` measures that through a real fleet).

Capacity = ``max_size / (b + a·max_size)`` items/s. The flooding tenant sends 5× that, the quiet
tenant 10 % of it; both use the default lane (``lo``) unless the row says otherwise. The
"bursty" rows replace the flood by a neighbour within its quota on average that sends
``--burst-n`` requests at once every ``--burst-every-s`` (its bucket's burst is that size):
there the backlog sits inside the batcher, where fair sharing decides who goes first. A
second table sweeps the flooding tenant's quota (throttle, fair batcher). Latency is
arrival → end of the batch that answered the item (an item expired at its deadline counts at its
SLO); the first ``--warmup-s`` seconds are left out of the percentiles. Each row's ratio is the
quiet tenant's P99 with the neighbour over its P99 alone under the same lanes and batcher; the
target is <= 1.2.

    .venv/bin/python benchmarks/tenant_isolation.py [--seconds 10] [--item-ms 0] [--quota-share 0.5] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from rtaudit.engine.batcher import Batcher
from rtaudit.engine.batcher_config import BatcherConfig
from rtaudit.engine.lane_queue import LaneName, Pending
from rtaudit.engine.policy import QuotaPolicy
from rtaudit.engine.quota import TenantQuotas
from rtaudit.workers.batch_settings import BatchSettings

T0_MS = 1_700_000_000_000.0
QUIET, FLOOD = "quiet", "flood"


@dataclass(frozen=True)
class Scenario:
    """One row: whether the flood runs, its quota, the lane both tenants ask for, and whether
    the batcher is told the tenant (fair sharing) or not (one FIFO per lane)."""

    name: str
    flood: bool
    quota: QuotaPolicy = field(default_factory=QuotaPolicy)
    lane: LaneName = "lo"
    fair: bool = True


@dataclass
class Result:
    latencies_ms: dict[str, list[float]]
    throttled: dict[str, int]
    expired: dict[str, int]
    lowered: int
    batches: int


def poisson(rate_per_s: float, seconds: float, rng: random.Random) -> list[float]:
    """Arrival times (ms from ``T0_MS``) of a Poisson stream."""
    out, t = [], 0.0
    while True:
        t += rng.expovariate(rate_per_s) * 1000.0
        if t >= seconds * 1000.0:
            return out
        out.append(T0_MS + t)


def p(values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` in [0, 100]; NaN when empty."""
    if not values:
        return math.nan
    s = sorted(values)
    return s[max(0, math.ceil(q / 100.0 * len(s)) - 1)]


def simulate(
    scn: Scenario, config: BatcherConfig, cost_ms: Callable[[int], float], arrivals: list[tuple[float, str]],
    slo_ms: float, warmup_ms: float,
) -> Result:
    """Run one scenario to the end of its arrivals and of the work they caused."""
    now = [T0_MS]
    batcher: Batcher[int] = Batcher(config, clock=lambda: now[0])  # payload: index into arrivals
    quotas = TenantQuotas()
    topics: dict[str, deque[int]] = {"hi": deque(), "lo": deque()}
    res = Result({QUIET: [], FLOOD: []}, {QUIET: 0, FLOOD: 0}, {QUIET: 0, FLOOD: 0}, 0, 0)
    running: tuple[float, list[Pending[int]]] | None = None
    i = 0

    def intake() -> None:
        for lane in ("hi", "lo"):
            if lane == "lo" and batcher.update_lo_pause():
                continue
            topic = topics[lane]
            while topic and batcher.queued(lane) < config.queue_limit:  # type: ignore[arg-type]
                k = topic.popleft()
                at, tenant = arrivals[k]
                batcher.put_nowait(k, lane, at + slo_ms, tenant if scn.fair else None)  # type: ignore[arg-type]
        for lane in ("hi", "lo"):
            batcher.set_lag(lane, len(topics[lane]))  # type: ignore[arg-type]

    def answered(items: list[Pending[int]], at_ms: float | None) -> None:
        """Record latencies: ``at_ms`` = when the batch ended; ``None`` = expired (counts as the SLO)."""
        for item in items:
            arrived, tenant = arrivals[item.payload]
            if at_ms is None:
                res.expired[tenant] += 1
            if arrived >= T0_MS + warmup_ms:
                res.latencies_ms[tenant].append(slo_ms if at_ms is None else at_ms - arrived)

    while True:
        next_arrival = arrivals[i][0] if i < len(arrivals) else math.inf
        next_done = running[0] if running is not None else math.inf
        close = math.inf
        if running is None:
            due = batcher.close_at_ms(now[0])
            close = max(due[0], now[0]) if due is not None else math.inf
        t = min(next_arrival, next_done, close)
        if t == math.inf:
            break
        now[0] = t
        while i < len(arrivals) and arrivals[i][0] <= t:
            at, tenant = arrivals[i]
            k, i = i, i + 1
            lane: LaneName = scn.lane
            if not quotas.admit(tenant, scn.quota.limit if tenant == FLOOD else QuotaPolicy().limit, at):
                if scn.quota.over_quota == "throttle":
                    res.throttled[tenant] += 1
                    continue
                lane = "lo"
                res.lowered += 1
            topics[lane].append(k)
        if running is not None and running[0] <= t:
            answered(running[1], running[0])
            running = None
        intake()
        if running is None:
            batch = batcher.poll()
            while batch is not None and not batch.items:  # expired only: answered at once
                answered(batch.expired, None)
                intake()
                batch = batcher.poll()
            if batch is not None:
                answered(batch.expired, None)
                seconds = cost_ms(len(batch.items)) / 1000.0
                batcher.observe_duration(len(batch.items), seconds)
                running = (t + seconds * 1000.0, batch.items)
                res.batches += 1
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="length of the arrival streams (virtual time)")
    ap.add_argument("--warmup-s", type=float, default=2.0, help="arrivals left out of the percentiles")
    ap.add_argument("--batch-ms", type=float, default=20.0, help="fixed model cost per batch, ms (b)")
    ap.add_argument("--item-ms", type=float, default=0.0, help="model cost per item, ms (a)")
    ap.add_argument("--burst-n", type=int, default=400, help="bursty neighbour: requests per burst")
    ap.add_argument("--burst-every-s", type=float, default=1.0, help="bursty neighbour: seconds between bursts")
    ap.add_argument("--flood-x", type=float, default=5.0, help="flooding tenant's rate, in capacities")
    ap.add_argument("--quiet-share", type=float, default=0.1, help="quiet tenant's rate, in capacities")
    ap.add_argument("--quota-share", type=float, default=0.5, help="flooding tenant's quota, in capacities")
    ap.add_argument("--burst-s", type=float, default=0.05, help="its burst, in seconds of its quota")
    ap.add_argument("--slo-ms", type=float, default=10_000.0, help="deadline after arrival (the default policy's)")
    ap.add_argument("--profile", default="balanced", choices=["latency", "balanced", "throughput"])
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    config = BatchSettings(profile=args.profile).config("text")
    def cost_ms(n: int) -> float:
        return args.batch_ms + args.item_ms * n
    capacity = config.max_size / (cost_ms(config.max_size) / 1000.0)
    rate = args.quota_share * capacity
    limit = dict(rate_per_s=round(rate, 3), burst=max(1.0, round(rate * args.burst_s)))
    rng = random.Random(args.seed)
    quiet = [(t, QUIET) for t in poisson(args.quiet_share * capacity, args.seconds, rng)]
    flood = [(t, FLOOD) for t in poisson(args.flood_x * capacity, args.seconds, rng)]
    both = sorted(quiet + flood)
    bursts = [(T0_MS + k * args.burst_every_s * 1000.0 + 0.001 * j, FLOOD)
              for k in range(1, int(args.seconds / args.burst_every_s)) for j in range(args.burst_n)]
    bursty = sorted(quiet + bursts)
    burst_quota = QuotaPolicy(rate_per_s=args.burst_n / args.burst_every_s, burst=args.burst_n, over_quota="throttle")
    warmup_ms = args.warmup_s * 1000.0

    rows = [
        Scenario("no quota, one FIFO per lane", True, fair=False),
        Scenario("no quota, fair batcher", True),
        Scenario("quota throttle, one FIFO per lane", True, QuotaPolicy(**limit, over_quota="throttle"), fair=False),
        Scenario("quota throttle, fair batcher", True, QuotaPolicy(**limit, over_quota="throttle")),
        Scenario("quota lower_lane (both ask hi), fair", True, QuotaPolicy(**limit, over_quota="lower_lane"), lane="hi"),
    ]
    alone: dict[tuple[str, bool], float] = {}
    print(f"capacity {capacity:.0f} items/s (text, {args.profile}: max_size {config.max_size}, window "
          f"{config.window_ms:g}-{config.window_ceiling_ms:g} ms; model {args.batch_ms:g} ms + {args.item_ms:g} ms/item)")
    print(f"quiet {args.quiet_share * capacity:.0f}/s, flood {args.flood_x * capacity:.0f}/s "
          f"({args.flood_x:g}x), flood quota {limit['rate_per_s']:g}/s burst {limit['burst']:g}; "
          f"{args.seconds:g} s virtual, first {args.warmup_s:g} s not measured, seed {args.seed}\n")
    header = f"{'scenario':<40} {'quiet P50':>10} {'quiet P99':>10} {'alone P99':>10} {'ratio':>6} " \
             f"{'quiet exp':>9} {'flood done/s':>12} {'throttled':>9} {'lowered':>8}"
    print(header)
    print("-" * len(header))
    for lane in ("lo", "hi"):
        for fair in (False, True):
            r = simulate(Scenario("alone", False, lane=lane, fair=fair), config, cost_ms, quiet, args.slo_ms, warmup_ms)  # type: ignore[arg-type]
            alone[(lane, fair)] = p(r.latencies_ms[QUIET], 99)
    base = simulate(Scenario("alone", False), config, cost_ms, quiet, args.slo_ms, warmup_ms)
    q = base.latencies_ms[QUIET]
    print(f"{'quiet tenant alone':<40} {p(q, 50):>8.1f}ms {p(q, 99):>8.1f}ms {'':>10} {'':>6} {base.expired[QUIET]:>9} {'':>12} {'':>9} {'':>8}")
    measured_s = args.seconds - args.warmup_s
    rows += [
        Scenario(f"bursty {args.burst_n}/{args.burst_every_s:g}s, one FIFO per lane", True, burst_quota, fair=False),
        Scenario(f"bursty {args.burst_n}/{args.burst_every_s:g}s, fair batcher", True, burst_quota),
    ]
    for scn in rows:
        r = simulate(scn, config, cost_ms, bursty if scn.name.startswith("bursty") else both, args.slo_ms, warmup_ms)
        q = r.latencies_ms[QUIET]
        ref = alone[(scn.lane, scn.fair)]
        ratio = p(q, 99) / ref
        flood_rate = sum(1 for v in r.latencies_ms[FLOOD] if v < args.slo_ms) / measured_s
        print(f"{scn.name:<40} {p(q, 50):>8.1f}ms {p(q, 99):>8.1f}ms {ref:>8.1f}ms {ratio:>6.2f} "
              f"{r.expired[QUIET]:>9} {flood_rate:>12.0f} {r.throttled[FLOOD]:>9} {r.lowered:>8}")
    print(f"\nflooding tenant's quota (throttle, fair batcher) -> quiet P99 / alone ({alone[('lo', True)]:.1f} ms)")
    for share in (0.1, 0.25, 0.5, 0.75, 0.9):
        rate = share * capacity
        quota = QuotaPolicy(rate_per_s=round(rate, 3), burst=max(1.0, round(rate * args.burst_s)), over_quota="throttle")
        r = simulate(Scenario("sweep", True, quota), config, cost_ms, both, args.slo_ms, warmup_ms)
        q99 = p(r.latencies_ms[QUIET], 99)
        print(f"  quota {share:>4.0%} of capacity ({rate:>6.0f}/s): quiet P99 {q99:>7.1f} ms  ratio {q99 / alone[('lo', True)]:.2f}")


if __name__ == "__main__":
    main()
