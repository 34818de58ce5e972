"""``rtaudit bench --model null|lexical|minilm``: the fleet's own cost, per role and end to end.

With the null model (:class:`rtaudit.engine.models.null.NullStage`: fixed scores in O(1)) what
is left is the path around the model — intake, decode, batching, encode, produce,
commit — the bound of the fleet on a GPU (issue 11). For each target (``router``,
``text``, ``fusion``, each one worker process, and the ``fleet``: router → text →
fusion, one process each), on a private embedded broker on a free loopback port:

1. **raw client** — the target's input records (the same bytes) produced by
   confluent-kafka to an empty topic of their own (all handed over, one flush), then
   consumed back by a fresh consumer: records/s each, no processing. The physical
   limit of this broker, client and machine.
2. **saturation** — the worker process(es) started (``Fleet.spawn``) and proven ready
   by a probe record; then all ``records`` requests produced at once to the target's
   input topic (:mod:`rtaudit.tools.bench.feed` lists the topics), timed from the first
   produce until the output topics hold every output (read by key with a raw
   confluent-kafka consumer: nothing decoded). Rate = requests done / that time; CPU
   seconds of each process (``/proc/<pid>/stat``, sampled every 0.25 s) from the first
   produce to the first sample after the last output, per 1,000 requests.
3. **hop latency** — open-loop load at ``latency_load`` (10 %) of the saturated rate for
   ``latency_s``: P50/P99 from each record's due time to its output being read; then the
   raw client's hop (produce → consume, no worker) at the same rate on another topic of
   its own. The difference is what the worker's hop adds.

The bench talks only to topics, so it measures whatever the workers are (Faust
agents or batched confluent-kafka loops). Results: :func:`rtaudit.tools.bench.report.overhead_table`
and ``overhead.json``.
"""

from __future__ import annotations

import logging
import math
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from rtaudit.tools.bench.feed import (
    ROLES, TARGETS, OutputReader, RawRates, output_labels, produce_all, raw_rates, records,
)
from rtaudit.tools.bench.load import Send, send_open_loop
from rtaudit.tools.bench.rig import free_port, process_cpu_seconds
from rtaudit.tools.bench.runner import host_info
from rtaudit.tools.bench.stats import schedule
from rtaudit.tools.demo.corpus import demo_texts, percentile
from rtaudit.tools.fleet.local import Fleet
from rtaudit.workers.kafka import producer_config
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)
MODELS = ("null", "lexical", "minilm")
#: budget of the saturation records: far enough that nothing expires however slow the worker.
SATURATION_SLO_MS = 1_800_000
#: budget of the hop-latency records, ms.
HOP_SLO_MS = 30_000
#: extra wait for the last hop-latency outputs, s.
HOP_DRAIN_S = 5.0
#: CPU times are sampled this often while the saturation outputs come, s (the window ends at the sample after the last).
CPU_SAMPLE_S = 0.25


@dataclass
class OverheadOptions:
    """One overhead run. ``records``: requests produced at once per target (fusion gets two
    records per request: its manifest and its partial)."""

    model: str = "null"
    targets: tuple[str, ...] = TARGETS
    records: int = 20_000
    #: share of the saturated rate the hop latency is measured at.
    latency_load: float = 0.1
    latency_s: float = 5.0
    #: most hop-latency requests per target.
    latency_max_records: int = 5_000
    #: longest wait for the saturation outputs, s (a slower target reports what arrived).
    saturation_timeout_s: float = 120.0
    start_timeout_s: float = 180.0
    out_dir: Path = Path(".rtaudit/bench")
    config: Path | None = None

    @classmethod
    def quick(cls, **overrides: object) -> "OverheadOptions":
        """About 1-2 minutes on 2 cores: 5,000 requests per target, 2 s of latency load."""
        values: dict[str, object] = dict(records=5_000, latency_s=2.0, latency_max_records=1_000, saturation_timeout_s=40.0)
        return cls(**{**values, **overrides})  # type: ignore[arg-type]  # keyword overrides checked by the dataclass at run time


@dataclass(frozen=True)
class Hop:
    """Latency through one hop at a constant offered rate: due time → output read, ms."""

    rate_per_s: float
    sent: int
    answered: int
    p50_ms: float
    p99_ms: float


@dataclass
class TargetOverhead:
    """What was measured for one target (see the module doc)."""

    target: str
    model: str
    roles: tuple[str, ...]
    #: input records per request (fusion: 2).
    inputs_per_request: int
    requests: int = 0
    raw: RawRates | None = None
    #: seconds from start until the probe was answered (process start, model load, group join).
    start_s: float | None = None
    answered: int = 0
    #: first produce → last output, s.
    seconds: float = 0.0
    #: CPU seconds per process (roles, ``broker``, ``bench``) over the saturation window.
    cpu_s: dict[str, float] = field(default_factory=dict)
    #: wall seconds of that window.
    cpu_window_s: float = 0.0
    hop: Hop | None = None
    raw_hop: Hop | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def per_s(self) -> float:
        """Requests done per second at saturation (verdicts/s for fusion and the fleet)."""
        return self.answered / self.seconds if self.seconds > 0 else 0.0

    @property
    def input_records_per_s(self) -> float:
        return self.per_s * self.inputs_per_request

    @property
    def of_raw_consume(self) -> float | None:
        """Input records/s through the target over the raw client's consume rate of the same records."""
        return self.input_records_per_s / self.raw.consume_per_s if self.raw and self.raw.consume_per_s else None

    def cpu_per_1k(self, process: str) -> float | None:
        """CPU seconds of ``process`` per 1,000 requests done."""
        if process not in self.cpu_s or not self.answered:
            return None
        return 1000.0 * self.cpu_s[process] / self.answered

    def busy(self, process: str) -> float | None:
        """Share of one core ``process`` used during the saturation window."""
        return self.cpu_s[process] / self.cpu_window_s if process in self.cpu_s and self.cpu_window_s > 0 else None


@dataclass
class OverheadRun:
    host: dict[str, object]
    model: str
    options: dict[str, object]
    targets: list[TargetOverhead] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False


# ---------------------------------------------------------------- the stand


class Stand:
    """A private embedded broker on a free loopback port with the topic catalogue and a
    producer; the target's workers start on demand (``Fleet.spawn``), with the text model
    of the run (``RTAUDIT_TEXT_MODEL``). A new broker per target: no record, offset or
    group of another target is there."""

    def __init__(self, base: Settings, opts: OverheadOptions, target: str) -> None:
        self.settings = base.model_copy(update=dict(
            bootstrap_servers=None, kafka_profile="local", embedded_port=free_port(), metrics_port=0, text_model=opts.model,
        ))
        log_dir = opts.out_dir / "logs" / f"overhead-{target}"
        self.fleet = Fleet(self.settings, config=opts.config, roles=(), log_dir=log_dir, env={
            "RTAUDIT_METRICS_PORT": "0", "RTAUDIT_KAFKA_PROFILE": "local", "RTAUDIT_TEXT_MODEL": opts.model,
            "RTAUDIT_STATE_DIR": str(opts.out_dir / "state"),
        })
        self.readers: list[OutputReader] = []

    def __enter__(self) -> "Stand":
        self.fleet.launch()
        try:
            self.producer = Producer(producer_config(self.settings))
        except BaseException:
            self.fleet.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for reader in self.readers:
            reader.close()
        self.producer.flush(5)
        del self.producer  # librdkafka reconnects until destroyed: drop it before the broker goes
        self.fleet.stop()

    def reader(self, labels: dict[str, str], required: frozenset[str]) -> OutputReader:
        reader = OutputReader(self.settings, labels, required)
        self.readers.append(reader)
        return reader

    def scratch_topic(self, name: str) -> str:
        """A new empty topic with the catalogue's partition count."""
        topic = f"rtaudit-bench.{name}.{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": self.settings.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=self.settings.partitions, replication_factor=-1)])[topic].result(15)
        return topic

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds so far of each worker role (summed over its processes), the broker and this process."""
        pids = {role: [p.pid for p in ps] for role, ps in self.fleet.processes.items()}
        if self.fleet.broker is not None and self.fleet.broker.process is not None:
            pids["broker"] = [self.fleet.broker.process.pid]
        pids["bench"] = [os.getpid()]
        out = {}
        for name, ps in pids.items():
            try:
                out[name] = sum(process_cpu_seconds(p) for p in ps)
            except (OSError, ValueError, IndexError):
                continue
        return out


# ---------------------------------------------------------------- one target


class TargetRun:
    """The three measurements of one target on its stand (module doc, steps 1-3)."""

    def __init__(self, stand: Stand, opts: OverheadOptions, target: str, say: Callable[[str], None]) -> None:
        self.stand, self.opts, self.target, self.say = stand, opts, target, say
        self.texts = [t for _, t in demo_texts()]
        self.run_id = uuid.uuid4().hex[:6]
        self.res = TargetOverhead(target, opts.model, ROLES[target], len(records(target, "x", "x", 1)))

    def batch(self, ids: list[str], slo_ms: int) -> list[tuple[str, bytes, bytes]]:
        now = time.time()
        return [(topic, rid.encode(), make(now)) for i, rid in enumerate(ids)
                for topic, make in records(self.target, self.texts[i % len(self.texts)], rid, slo_ms)]

    def run(self) -> TargetOverhead:
        res, stand, opts = self.res, self.stand, self.opts
        ids = [f"{self.run_id}-s{i}" for i in range(opts.records)]
        batch = self.batch(ids, SATURATION_SLO_MS)
        res.requests = len(ids)
        self.say(f"{self.target}: raw confluent-kafka produce and consume of {len(batch):,} records on {stand.settings.bootstrap}…")
        res.raw = raw_rates(stand.settings, stand.producer, stand.scratch_topic("raw"), batch)

        self.say(f"{self.target}: starting {', '.join(res.roles)} (text model {opts.model})…")
        reader = stand.reader(*output_labels(self.target))
        for role in res.roles:
            stand.fleet.spawn(role)
        res.start_s = self.probe(reader)

        self.say(f"{self.target}: {len(ids):,} requests at once…")
        reader.expect(ids)
        cpu_before, t0 = stand.cpu_seconds(), time.time()
        produce_all(stand.producer, batch)
        samples = [(time.time(), stand.cpu_seconds())]  # CPU every 0.25 s: the window ends with the last output
        while not reader.wait(ids, CPU_SAMPLE_S):
            samples.append((time.time(), stand.cpu_seconds()))
            if samples[-1][0] - t0 > opts.saturation_timeout_s:
                res.notes.append(f"saturation: not every output within {opts.saturation_timeout_s:g} s (rate from those that came)")
                break
        samples.append((time.time(), stand.cpu_seconds()))
        done = [t for t in reader.done_at(ids) if t is not None]
        res.answered = len(done)
        res.seconds = (max(done) if done else samples[-1][0]) - t0
        t1, cpu_after = next((s for s in samples if s[0] >= t0 + res.seconds), samples[-1])
        res.cpu_s = {k: cpu_after[k] - v for k, v in cpu_before.items() if k in cpu_after}
        res.cpu_window_s = t1 - t0

        rate = opts.latency_load * res.per_s
        if rate <= 0:
            res.notes.append("no hop latency: nothing came out at saturation")
            return res
        self.say(f"{self.target}: hop latency at {rate:,.0f} requests/s ({opts.latency_load:.0%} of saturation)…")
        res.hop = self.hop(reader, rate, None)
        raw_topic = stand.scratch_topic("rawhop")
        res.raw_hop = self.hop(stand.reader({raw_topic: "raw"}, frozenset({"raw"})), rate, raw_topic)
        return res

    def probe(self, reader: OutputReader) -> float:
        """Send one request every 10 s until one is answered; seconds waited. Raises
        ``RuntimeError`` naming the logs when a worker exits or nothing answers in time."""
        started = time.monotonic()
        while time.monotonic() - started < self.opts.start_timeout_s:
            if self.stand.fleet.exited():
                raise RuntimeError(f"workers exited: {self.stand.fleet.exited()}; logs in {self.stand.fleet.log_dir}")
            rid = f"probe-{uuid.uuid4().hex[:10]}"
            reader.expect([rid])
            now = time.time()
            produce_all(self.stand.producer, [(topic, rid.encode(), make(now)) for topic, make in records(self.target, "bench probe", rid, 600_000)])
            if reader.wait([rid], 10.0):
                return time.monotonic() - started
        raise RuntimeError(f"no answer from {self.target} within {self.opts.start_timeout_s:g} s; logs in {self.stand.fleet.log_dir}")

    def hop(self, reader: OutputReader, rate: float, topic: str | None) -> Hop:
        """Open-loop load at ``rate`` requests/s for ``latency_s`` into the target's input topic
        (or ``topic``, for the raw client's hop); latency from due time to output read."""
        opts = self.opts
        n = max(20, min(opts.latency_max_records, math.ceil(rate * opts.latency_s)))
        tag = "r" if topic else "h"
        ids = [f"{self.run_id}-{tag}{i}" for i in range(n)]
        due = schedule(rate, n, time.time() + 0.2)
        sends = [Send(d, topic or t, rid, make) for i, (rid, d) in enumerate(zip(ids, due))
                 for t, make in records(self.target, self.texts[i % len(self.texts)], rid, HOP_SLO_MS)]
        reader.expect(ids)
        send_open_loop(self.stand.producer, sends)
        reader.wait(ids, max(0.0, due[-1] + HOP_DRAIN_S - time.time()))
        lat = [(t - d) * 1000.0 for t, d in zip(reader.done_at(ids), due) if t is not None]
        return Hop(rate, n, len(lat), percentile(lat, 50), percentile(lat, 99))


# ---------------------------------------------------------------- the run


class OverheadBench:
    """Every target of :class:`OverheadOptions` in turn, each on its own stand. A target that
    fails keeps what it measured and says why in its notes; the others still run. Ctrl-C
    stops the target being measured (its processes and broker) and returns what was measured."""

    def __init__(self, opts: OverheadOptions, settings: Settings, say: Callable[[str], None]) -> None:
        if opts.model not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, got {opts.model!r}")
        bad = [t for t in opts.targets if t not in TARGETS]
        if bad:
            raise ValueError(f"targets must be among {', '.join(TARGETS)}, got {bad}")
        self.opts, self.settings, self.say = opts, settings, say

    def run(self) -> OverheadRun:
        opts = self.opts
        run = OverheadRun(host_info(), opts.model, {
            "records": opts.records, "latency_load": opts.latency_load, "latency_s": opts.latency_s,
            "partitions": self.settings.partitions, "batch_profile": self.settings.batch.profile,
        })
        started = time.monotonic()
        for target in opts.targets:
            stand = Stand(self.settings, opts, target)
            job = TargetRun(stand, opts, target, self.say)
            try:
                with stand:
                    job.run()
            except KeyboardInterrupt:
                job.res.notes.append("interrupted")
                run.targets.append(job.res)
                run.interrupted = True
                break
            except Exception as exc:  # one target's failure must not lose the others: noted, logged, shown
                log.exception("overhead bench: target %s failed", target)
                job.res.notes.append(f"failed: {exc}")
            run.targets.append(job.res)
        run.wall_s = time.monotonic() - started
        return run
