"""Tenant isolation through a real fleet (issue 10): a quiet tenant's P50/P99 alone and next to a
tenant flooding at 5x the text stage's capacity, per quota configuration, in one run.

``rtaudit bench --isolation [--quick]``. On a private embedded broker: the router, fusion and a
text worker (the real :func:`rtaudit.workers.modality.modality_app`, balanced profile) whose model
stage is :class:`CostStage`, a deterministic cost of ``batch_ms + item_ms x n`` per batch of ``n``
(slept, off the event loop, as inference is). The defaults, 20 ms + 6 ms/item, are MiniLM's cost
on one core of the 2-core development machine (docs/benchmarks.md "Measured": 154 texts/s at batch 64, about
28 ms alone); a sleep keeps the model's cost fixed whatever else runs on the cores, so the
capacity, ``64 / (20 + 6 x 64 ms)`` = 158 requests/s, is known before the run and the ratios
measure the fleet, not the neighbours' CPU noise. The router, fusion, broker and load generator
still share the machine's cores with the flood: their cost is part of the measurement.

Per configuration (``throttle``, ``delay`` and ``lower_lane`` at ``quota_share`` of capacity, no
quota; one flooding tenant id each, all in the settings file), a fresh fleet on a fresh broker (no
backlog or broker state carried over from the configuration before) runs three phases of open-loop
load (requests due at a constant rate; latency from the due time = ``created_at_ms`` to the
verdict's arrival at the bench; an unanswered request counts with the time waited): a warm-up, the
quiet tenant alone for ``phase_s`` seconds, then with the flooding tenant for ``phase_s``; the ratio
is the second P99 over the first. Every tenant asks for the ``hi`` lane (as the virtual-time
``benchmarks/tenant_isolation.py`` row "lower_lane (both ask hi)"), so the quiet tenant always
shares its lane with the flood.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from rtaudit.engine.models import StageOutput
from rtaudit.engine.models.null import NULL_SCORES
from rtaudit.schemas.messages import ModalityTask, ModelRef, Verdict
from rtaudit.tools.bench.load import fetched
from rtaudit.tools.demo.corpus import percentile

QUIET = "quiet"
#: configuration → the flooding tenant's id and ``over_quota`` (``None``: no quota).
CONFIGS: dict[str, tuple[str, str | None]] = {
    "throttle": ("flood-throttle", "throttle"), "delay": ("flood-delay", "delay"),
    "lower_lane": ("flood-lower", "lower_lane"), "no quota": ("flood-none", None),
}
#: the worker role the fleet spawns for the text stage: ``faust -A rtaudit.tools.bench.isolation``.
WORKER_ROLE = "bench.isolation"
#: environment of the worker process: the model's cost per batch and per item, ms.
BATCH_MS_ENV, ITEM_MS_ENV = "ISOLATION_BENCH_BATCH_MS", "ISOLATION_BENCH_ITEM_MS"
#: the issue's target: quiet P99 with the neighbour / alone.
TARGET_RATIO = 1.2
THROTTLED_REASON = "rejected: throttled"


@dataclass(frozen=True)
class Cost:
    """The model's cost: ``batch_ms + item_ms x n`` ms for a batch of ``n``; ``max_size`` the text
    stage's largest batch (balanced profile: 64)."""

    batch_ms: float = 20.0
    item_ms: float = 6.0
    max_size: int = 64

    def batch_s(self, n: int) -> float:
        """Seconds one batch of ``n`` items takes."""
        return (self.batch_ms + self.item_ms * n) / 1000.0

    @property
    def capacity_per_s(self) -> float:
        """Items/s at full batches: ``max_size / batch_s(max_size)``."""
        return self.max_size / self.batch_s(self.max_size)


class CostStage:
    """A :class:`rtaudit.engine.models.ModelStage` that sleeps ``cost.batch_s(n)`` per ``infer`` of
    ``n`` inputs and returns :data:`NULL_SCORES` (below every threshold) for each."""

    def __init__(self, cost: Cost) -> None:
        self.stage, self.cost = "text", cost
        self.model = ModelRef(name="cost", version=f"{cost.batch_ms:g}ms+{cost.item_ms:g}ms/item")
        self._output = StageOutput(scores=dict(NULL_SCORES))

    def prepare(self, task: ModalityTask) -> str:
        return task.text or ""

    def infer(self, inputs: list[str]) -> list[StageOutput]:
        time.sleep(self.cost.batch_s(len(inputs)))
        return [self._output] * len(inputs)


def stage_factory(settings: Any) -> CostStage:
    """The worker's stage, its cost from :data:`BATCH_MS_ENV` and :data:`ITEM_MS_ENV` (ms)."""
    return CostStage(Cost(float(os.environ.get(BATCH_MS_ENV, 20.0)), float(os.environ.get(ITEM_MS_ENV, 6.0)),
                          settings.batch.config("text").max_size))


def __getattr__(name: str) -> Any:
    """``app``: the text worker's Faust app serving :class:`CostStage`, built on first access only
    (``faust -A rtaudit.tools.bench.isolation worker``), so importing this module starts nothing."""
    if name == "app":
        from rtaudit.workers.modality import modality_app

        globals()["app"] = modality_app("text", "text", stage_factory)
        return globals()["app"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def outcome_of(v: Verdict) -> str:
    """``throttled`` (the router answered it over quota), ``expired`` (a part expired before
    inference), ``ok`` (complete) or ``incomplete`` (anything else: fusion decided at the deadline)."""
    if any(r.startswith(THROTTLED_REASON) for r in v.reasons):
        return "throttled"
    if "expired" in v.parts.values():
        return "expired"
    return "ok" if v.complete else "incomplete"


@dataclass
class Answer:
    """One request due (= created) at ``due_s`` (epoch s): verdict arrival ``arrived_s``, :func:`outcome_of`; with ``hops``,
    its partial's batch size, ``queue_ms``, ``scored_ms`` (produced) and its manifest's ``routed_ms`` (record time), epoch ms."""

    due_s: float
    hops: bool = False
    arrived_s: float | None = None
    outcome: str | None = None
    reasons: tuple[str, ...] = ()
    batch_size: int | None = None
    queue_ms: float | None = None
    routed_ms: int | None = None
    scored_ms: int | None = None


@dataclass(frozen=True)
class Phase:
    """One phase: the quiet tenant's latency P50/P99 (ms), outcomes, P50/P99 per hop (``router``: created
    → manifest produced; ``text``: → partial produced; ``fusion``: → verdict read), mean micro-batch and
    P50 ``queue_ms``; the flood's verdicts by outcome (+ ``unanswered``); the router's counters of its
    requests ``delayed`` (held, then routed) and ``lowered`` (to ``lo``), ``None`` when not read; % of
    a core per process; the load generator's worst lag behind schedule, ms; the reasons of the quiet tenant's
    verdicts that were not ``ok``, counted. Rates in requests/s."""

    name: str
    quiet_rate: float
    flood_rate: float
    quiet_sent: int
    quiet_outcomes: dict[str, int]
    p50_ms: float
    p99_ms: float
    hops: dict[str, tuple[float, float]] = field(default_factory=dict)
    quiet_batch_mean: float = float("nan")
    quiet_queue_p50_ms: float = float("nan")
    flood: dict[str, int] = field(default_factory=dict)
    delayed: int | None = None
    lowered: int | None = None
    cpu_pct: dict[str, float] = field(default_factory=dict)
    send_lag_ms: float = 0.0
    quiet_reasons: dict[str, int] = field(default_factory=dict)


def _pct(values: Sequence[float]) -> tuple[float, float]:
    return percentile(list(values), 50), percentile(list(values), 99)


def summarize(name: str, quiet_rate: float, flood_rate: float, quiet: Sequence[Answer], flood: Sequence[Answer],
              censor_s: float, **extra: Any) -> Phase:
    """One :class:`Phase` from its answers; an unanswered quiet request counts with ``censor_s - due_s``
    (so the tail is never flattered)."""
    lat = [((a.arrived_s if a.arrived_s is not None else censor_s) - a.due_s) * 1000.0 for a in quiet]
    outcomes = Counter(a.outcome for a in quiet if a.outcome is not None)
    full = [a for a in quiet if a.routed_ms and a.scored_ms and a.arrived_s]
    hops = {"router": [a.routed_ms - a.due_s * 1000 for a in full], "text": [a.scored_ms - a.routed_ms for a in full],  # type: ignore[operator]  # the times are set for every row of full (filtered on them above)
            "fusion": [a.arrived_s * 1000 - a.scored_ms for a in full]}  # type: ignore[operator]  # the times are set for every row of full (filtered on them above)
    sizes = [a.batch_size for a in quiet if a.batch_size]
    return Phase(
        name, quiet_rate, flood_rate, len(quiet), dict(outcomes), *_pct(lat),
        hops={k: _pct(v) for k, v in hops.items() if v},
        quiet_batch_mean=sum(sizes) / len(sizes) if sizes else float("nan"),
        quiet_queue_p50_ms=percentile([a.queue_ms for a in quiet if a.queue_ms is not None], 50),
        flood=dict(Counter(a.outcome or "unanswered" for a in flood)),
        quiet_reasons=dict(Counter(r for a in quiet if a.outcome not in (None, "ok") for r in a.reasons)), **extra,
    )


@dataclass(frozen=True)
class Pair:
    """One configuration: the quiet tenant ``alone``, then with the flooding neighbour (``flood``)."""

    config: str
    alone: Phase
    flood: Phase

    @property
    def ratio(self) -> float:
        """The quiet tenant's P99 with the neighbour over its P99 alone (``nan`` when alone's is 0)."""
        return self.flood.p99_ms / self.alone.p99_ms if self.alone.p99_ms > 0 else float("nan")


def ratio_table(pairs: Sequence[Pair]) -> list[str]:
    """Markdown rows, one per configuration: the quiet tenant's P50/P99 alone and with the neighbour,
    the P99 ratio against :data:`TARGET_RATIO`, and what the flooding tenant's requests got."""
    out = ["| neighbour | quiet alone P50 / P99 ms | with neighbour P50 / P99 ms | P99 ratio (target <= 1.2) | "
           "quiet ok / sent | flood: inferred / throttled / expired / incomplete / unanswered | delayed (router) | "
           "lower lane (router) |", "|---|---|---|---|---|---|---|---|"]
    for p in pairs:
        a, f, r = p.alone, p.flood, p.ratio
        counts = " / ".join(str(f.flood.get(k, 0)) for k in ("ok", "throttled", "expired", "incomplete", "unanswered"))
        out.append(f"| {p.config} | {a.p50_ms:.0f} / {a.p99_ms:.0f} | {f.p50_ms:.0f} / {f.p99_ms:.0f} | "
                   f"**{r:.2f}** {'met' if r <= TARGET_RATIO else 'not met'} | {f.quiet_outcomes.get('ok', 0)} / {f.quiet_sent} | {counts} | "
                   f"{'-' if f.delayed is None else f.delayed} | {'-' if f.lowered is None else f.lowered} |")
    return out


def hop_table(pairs: Sequence[Pair]) -> list[str]:
    """Markdown rows: where the quiet tenant's time went, alone → with the neighbour (P99 per hop, ms),
    its micro-batches, the load generator's lag and the CPU each process used with the neighbour."""
    out = ["| neighbour | quiet P99 router hop ms | text hop | fusion hop | quiet mean batch, P50 to batch ms | "
           "generator lag ms | CPU % with neighbour: router / fusion / text / broker / bench |", "|---|---|---|---|---|---|---|"]
    for p in pairs:
        a, f = p.alone, p.flood
        hops = " | ".join(f"{a.hops.get(h, (0, float('nan')))[1]:.0f} → {f.hops.get(h, (0, float('nan')))[1]:.0f}"
                          for h in ("router", "text", "fusion"))
        cpu = " / ".join(f"{f.cpu_pct.get(k, float('nan')):.0f}" for k in ("router", "fusion", WORKER_ROLE, "broker", "bench"))
        out.append(f"| {p.config} | {hops} | {a.quiet_batch_mean:.1f}, {a.quiet_queue_p50_ms:.0f} → "
                   f"{f.quiet_batch_mean:.1f}, {f.quiet_queue_p50_ms:.0f} | {a.send_lag_ms:.0f} → {f.send_lag_ms:.0f} | {cpu} |")
    return out


def settings_toml(port: int, state_dir: Path, metrics_port: int, quota_rate: float, quota_burst: float) -> str:
    """The run's settings file: every tenant on the ``hi`` lane; one flooding tenant per :data:`CONFIGS`
    entry with its quota (``quota_rate`` requests/s, ``quota_burst`` at once)."""
    lines = [f"embedded_port = {port}", f'state_dir = "{state_dir}"', f"metrics_port = {metrics_port}"]
    for tenant, over in [(QUIET, None), *CONFIGS.values()]:
        lines += [f"[tenants.{tenant}]", 'lane = "hi"']
        if over is not None:
            lines += [f"[tenants.{tenant}.quota]", f"rate_per_s = {quota_rate:.3f}", f"burst = {quota_burst:.3f}", f'over_quota = "{over}"']
    return "\n".join(lines) + "\n"


def router_counters(text: str) -> dict[tuple[str, str, str], float]:
    """``(metric, tenant, action or outcome) → value`` of the router's quota counters in a Prometheus
    text exposition (``rtaudit_over_quota_requests_total``, ``rtaudit_quota_delayed_requests_total``)."""
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, s.labels.get("tenant", ""), s.labels.get("action", s.labels.get("outcome", ""))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples
            if s.name in ("rtaudit_over_quota_requests_total", "rtaudit_quota_delayed_requests_total")}


class VerdictReader:
    """Follows ``audit.verdicts`` and ``audit.scores`` from the beginning (no group) in a thread, filling each expected
    request's :class:`Answer` (scores decoded only for ``hops`` answers; ids not expected are skipped undecoded)."""

    def __init__(self, settings: Any) -> None:
        from rtaudit.topics.catalog import SCORES, VERDICTS
        from rtaudit.workers.kafka import consumer_config

        self._verdicts = VERDICTS
        self._consumer = Consumer(consumer_config(settings, group_id=f"rtaudit-isolation-{uuid.uuid4().hex[:8]}"))
        self._consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in (SCORES, VERDICTS)
                               for p in range(settings.partitions)])
        self.answers: dict[str, Answer] = {}
        self._open, self._cond, self._stop = 0, threading.Condition(), threading.Event()
        self._thread = threading.Thread(target=self._run, name="isolation-reader", daemon=True)
        self._thread.start()

    def expect(self, due: dict[str, float], hops: bool) -> None:
        with self._cond:
            self.answers.update({rid: Answer(d, hops) for rid, d in due.items()})
            self._open += len(due)

    def wait(self, timeout_s: float) -> bool:
        """Until every expected request has its verdict, or ``timeout_s``; whether they all have."""
        end = time.monotonic() + timeout_s
        with self._cond:
            while self._open > 0 and time.monotonic() < end:
                self._cond.wait(0.2)
            return self._open == 0

    def _run(self) -> None:
        from rtaudit.schemas.codec import decode, decode_scores_record
        from rtaudit.schemas.errors import AuditError
        from rtaudit.schemas.messages import Manifest, PartialScore

        for msgs, now in fetched(self._consumer, self._stop):
            with self._cond:
                for m in msgs:
                    a = None if m.error() or m.key() is None else self.answers.get(m.key().decode("utf-8", "replace"))
                    try:
                        if a is not None and m.topic() == self._verdicts:
                            if a.arrived_s is None:
                                v = decode(m.value(), Verdict)
                                a.arrived_s, a.outcome = now, outcome_of(v)
                                if a.outcome != "ok":
                                    a.reasons = tuple(v.reasons)
                                self._open -= 1
                        elif a is not None and a.hops:
                            rec = decode_scores_record(m.value())
                            if isinstance(rec, PartialScore) and rec.status == "ok" and a.batch_size is None:
                                a.batch_size, a.queue_ms, a.scored_ms = rec.timings.batch_size, rec.timings.queue_ms, rec.produced_at_ms
                            elif isinstance(rec, Manifest) and a.routed_ms is None:
                                a.routed_ms = m.timestamp()[1]
                    except AuditError:
                        continue
                self._cond.notify_all()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._consumer.close()


@dataclass
class IsolationOptions:
    """One run. Rates are shares of the text stage's capacity (:attr:`Cost.capacity_per_s`): the quiet
    tenant ``quiet_share``, the flood ``flood_x``, the flood's quota ``quota_share`` with a burst of
    ``burst_s`` seconds of it; ``phase_s`` / ``warmup_s`` seconds of load per phase; ``configs`` among
    :data:`CONFIGS`, each measured as an alone phase then a phase with the neighbour."""

    cost: Cost = field(default_factory=Cost)
    quiet_share: float = 0.1
    flood_x: float = 5.0
    quota_share: float = 0.25
    burst_s: float = 0.05
    phase_s: float = 30.0
    warmup_s: float = 8.0
    configs: tuple[str, ...] = tuple(CONFIGS)
    out_dir: Path = Path(".rtaudit/bench/isolation")

    @classmethod
    def quick(cls, **kw: Any) -> "IsolationOptions":
        """Short phases (8 s, warm-up 4 s): about 2-3 minutes on 2 cores."""
        return cls(**{"phase_s": 8.0, "warmup_s": 4.0, **kw})

    def describe(self) -> str:
        c, cap = self.cost, self.cost.capacity_per_s
        return (f"text stage {c.batch_ms:g} ms + {c.item_ms:g} ms/item per batch (capacity {cap:.0f}/s at batch {c.max_size}); "
                f"quiet {self.quiet_share * cap:.1f}/s, flood {self.flood_x * cap:.0f}/s, flood quota {self.quota_share * cap:.1f}/s "
                f"burst {max(1.0, self.quota_share * cap * self.burst_s):g}; {self.phase_s:g} s phases")


@dataclass
class IsolationRun:
    """One run's configuration pairs (in order), wall time (s) and the machine's load average at its start."""

    options: IsolationOptions
    pairs: list[Pair]
    wall_s: float
    load_avg: tuple[float, ...]


def main(opts: IsolationOptions, say: Callable[[str], None] = print) -> IsolationRun:
    """:func:`run`, then print its two tables (Markdown) and write ``isolation.json`` in ``opts.out_dir``."""
    result = run(opts, say)
    say(f"\n{opts.describe()}; load average {result.load_avg[0]:.2f} at the start; {result.wall_s:.0f} s\n")
    for line in [*ratio_table(result.pairs), "", *hop_table(result.pairs)]:
        say(line)
    ratios = {p.config: p.ratio for p in result.pairs}
    (opts.out_dir / "isolation.json").write_text(json.dumps({**asdict(result), "ratios": ratios}, indent=1, default=str))
    return result


def run(opts: IsolationOptions, say: Callable[[str], None] = print) -> IsolationRun:
    """Per configuration, a fresh fleet on a private embedded broker (no backlog or broker state carried
    over): a warm-up, the quiet tenant alone, then with the neighbour; stopped. Raises ``RuntimeError``
    when a fleet gives no verdict within 180 s."""
    started, load_avg = time.monotonic(), os.getloadavg()
    root = opts.out_dir.resolve()
    say(f"tenant isolation: {opts.describe()}; logs in {root / 'logs'}")
    pairs = []
    for c in opts.configs:
        with _stand(opts, root / "logs" / c.replace(" ", "_"), say) as stand:
            stand.phase("warm-up", opts.warmup_s, None)
            pairs.append(Pair(c, stand.phase("alone", opts.phase_s, None), stand.phase(c, opts.phase_s, c)))
    return IsolationRun(opts, pairs, time.monotonic() - started, load_avg)


@contextmanager
def _stand(opts: IsolationOptions, log_dir: Path, say: Callable[[str], None]) -> Iterator["_Stand"]:
    """A fleet (router, fusion, the cost-stage text worker) on a new embedded broker, ready, with a reader and a producer."""
    from rtaudit.tools.bench.rig import free_port, free_port_block
    from rtaudit.tools.fleet.local import Fleet
    from rtaudit.workers.kafka import producer_config
    from rtaudit.workers.settings import load_settings

    started, quota = time.monotonic(), opts.quota_share * opts.cost.capacity_per_s
    log_dir.mkdir(parents=True, exist_ok=True)
    config = log_dir / "isolation.toml"
    # metrics ports: this process's base, then one per worker (the router's counters are read)
    port = free_port()
    config.write_text(settings_toml(port, log_dir / "state", free_port_block(4), quota, max(1.0, quota * opts.burst_s)))
    settings = load_settings(config, embedded_port=port)  # explicit: an exported RTAUDIT_EMBEDDED_PORT does not move it
    env = {BATCH_MS_ENV: str(opts.cost.batch_ms), ITEM_MS_ENV: str(opts.cost.item_ms), "RTAUDIT_STATE_DIR": str(log_dir / "state")}
    fleet = Fleet(settings, config=config, roles=("router", "fusion", WORKER_ROLE), log_dir=log_dir, env=env)
    fleet.launch()
    stand = None
    try:
        stand = _Stand(fleet, VerdictReader(settings), Producer(producer_config(settings)), opts, say)
        stand.wait_ready()
        say(f"fleet ready after {time.monotonic() - started:.0f} s")
        yield stand
    finally:
        if stand is not None:
            stand.reader.close()
            stand.producer.flush(5)
            del stand  # librdkafka reconnects until its producer is destroyed: drop it before the broker goes
        fleet.stop()


class _Stand:
    """The running fleet, the reader and the producer of one :func:`run`."""

    def __init__(self, fleet: Any, reader: VerdictReader, producer: Producer, opts: IsolationOptions,
                 say: Callable[[str], None]) -> None:
        self.fleet, self.reader, self.producer, self.opts, self.say = fleet, reader, producer, opts, say
        self.run_id, self.n = uuid.uuid4().hex[:6], 0
        self.router_port = next(s.metrics_port for s in fleet.slots if s.role == "router")

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far per process: each role, the broker and this one (the load generator and reader)."""
        from rtaudit.tools.bench.rig import process_cpu_seconds

        procs = {role: [p.pid for p in ps] for role, ps in self.fleet.processes.items()}
        if self.fleet.broker is not None and self.fleet.broker.process is not None:
            procs["broker"] = [self.fleet.broker.process.pid]
        procs["bench"] = [os.getpid()]
        return {k: sum(process_cpu_seconds(p) for p in v) for k, v in procs.items()}

    def send(self, sends: list[tuple[float, str, str]]) -> float:
        """``(due_s, request id, tenant)`` requests, each at its due time (open loop); the worst lag, ms."""
        from rtaudit.schemas.codec import encode
        from rtaudit.schemas.messages import AuditRequest
        from rtaudit.topics.catalog import REQUESTS
        from rtaudit.tools.bench.load import Send, send_open_loop

        def value(rid: str, tenant: str) -> Callable[[float], bytes]:
            return lambda due: encode(AuditRequest(request_id=rid, tenant_id=tenant, created_at_ms=int(due * 1000),
                                                   text="an ordinary sentence about the weather"))

        return send_open_loop(self.producer, [Send(d, REQUESTS, rid, value(rid, t)) for d, rid, t in sends])

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        """A quiet request every 10 s until one gets its verdict. Raises ``RuntimeError`` after ``timeout_s``."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.fleet.exited():
                raise RuntimeError(f"workers exited: {self.fleet.exited()}; logs in {self.fleet.log_dir}")
            rid, self.n = f"{self.run_id}-probe-{self.n}", self.n + 1
            self.reader.expect({rid: time.time()}, hops=False)
            self.send([(time.time(), rid, QUIET)])
            if self.reader.wait(10.0):
                return
        raise RuntimeError(f"the fleet gave no verdict within {timeout_s:.0f} s; logs in {self.fleet.log_dir}")

    def phase(self, name: str, seconds: float, config: str | None) -> Phase:
        """``seconds`` of the quiet tenant's load, with the flooding tenant of ``config`` (``None``: alone);
        waits for every verdict, at most 15 s after the last due time."""
        cap = self.opts.cost.capacity_per_s
        tenant = CONFIGS[config][0] if config else None
        streams = [(QUIET, self.opts.quiet_share * cap), *([(tenant, self.opts.flood_x * cap)] if tenant else [])]
        t0, sends, ids = time.time() + 0.3, [], {}
        self.n += 1
        for k, (who, rate) in enumerate(streams):
            ids[who] = [f"{self.run_id}-{self.n}-{k}-{i}" for i in range(max(3, round(rate * seconds)))]
            due = [t0 + i / rate for i in range(len(ids[who]))]
            self.reader.expect(dict(zip(ids[who], due)), hops=who == QUIET)
            sends += [(d, rid, who) for d, rid in zip(due, ids[who])]
        before, wall = self.cpu(), time.monotonic()
        lag_ms = self.send(sorted(sends))
        self.reader.wait(max(1.0, max(d for d, _, _ in sends) + 15.0 - time.time()))
        censor, after = time.time(), self.cpu()
        extra: dict[str, Any] = {"send_lag_ms": lag_ms, "cpu_pct": {
            k: 100.0 * (after[k] - before[k]) / (time.monotonic() - wall) for k in after if k in before}}
        if tenant and (counters := _scrape(self.router_port)) is not None:
            extra["delayed"] = int(counters.get(("rtaudit_quota_delayed_requests_total", tenant, "routed"), 0))
            extra["lowered"] = int(counters.get(("rtaudit_over_quota_requests_total", tenant, "lower_lane"), 0))
        a = self.reader.answers
        result = summarize(name, streams[0][1], streams[-1][1] if tenant else 0.0, [a[i] for i in ids[QUIET]],
                           [a[i] for i in ids.get(tenant, [])], censor, **extra)
        self.say(f"  {name:<10} quiet P50 {result.p50_ms:6.0f} ms  P99 {result.p99_ms:6.0f} ms  {result.quiet_outcomes}  "
                 f"flood {result.flood}  hop P99 ms " + " ".join(f"{h} {v[1]:.0f}" for h, v in result.hops.items()))
        return result


def _scrape(port: int) -> dict[tuple[str, str, str], float] | None:
    """The router's quota counters from its Prometheus endpoint; ``None`` when it cannot be read."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return router_counters(r.read().decode())
    except OSError:
        return None
