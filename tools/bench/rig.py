"""The bench's rig: a private embedded broker on a free loopback port with the topic
catalogue, the worker processes, the naive consumer and the peers (:mod:`rtaudit.tools.bench.peers`)
it starts, and one open-loop step of load through it (``run_step``). Used by
:mod:`rtaudit.tools.bench.runner`."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from rtaudit.schemas.messages import MediaItem
from rtaudit.topics.catalog import lane_topic
from rtaudit.tools.bench.inputs import Corpus, modality_of, task_value
from rtaudit.tools.bench.load import ArrivalReader, Measure, Send, naive_command, send_open_loop
from rtaudit.tools.bench.stats import StepResult, cpu_delta, cpu_percent, schedule, step_count, summarize_step
from rtaudit.tools.fleet.children import popen_options, stop_group
from rtaudit.tools.fleet.local import Fleet
from rtaudit.workers.kafka import producer_config
from rtaudit.workers.settings import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: listening ports of a block are drawn from here: below Linux's ephemeral range (32768-60999), which
#: client sockets (every Kafka connection of the fleet) take their local ports from.
PORT_BLOCK_RANGE = (20000, 32000)


def free_port_block(n: int, tries: int = 200) -> int:
    """The first of ``n`` consecutive loopback ports that are free now, for a fleet's metrics
    ports (the fleet gives its workers ``base + 1``, ``base + 2``...). ``free_port() + k`` was not
    enough: the kernel hands the ports after an ephemeral one to client connections (seen in CI: a
    router exiting with ``Address already in use`` on its metrics port).

    Raises:
        RuntimeError: no free block in ``tries`` draws.
    """
    import random

    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(PORT_BLOCK_RANGE[0], PORT_BLOCK_RANGE[1] - n)
        socks = []
        try:
            for port in range(base, base + n):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError(f"no {n} consecutive free loopback ports in {PORT_BLOCK_RANGE}")


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, every thread) used so far by process ``pid``, from
    ``/proc/<pid>/stat`` (Linux). Raises ``OSError`` when there is no such process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def process_tree(pid: int) -> list[int]:
    """``pid`` and every live descendant of it (children, their children…), from ``/proc``
    (Linux): a peer and what it started, even those in sessions of their own (Ray's actors)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # exited meanwhile
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo += children.get(p, [])
    return tree


def _started_at(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), ``None`` when it is gone."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its live descendants (those that
    already exited are not counted). Raises ``OSError`` when ``pid`` is gone."""
    total = process_cpu_seconds(pid)
    for p in process_tree(pid)[1:]:
        try:
            total += process_cpu_seconds(p)
        except (OSError, ValueError, IndexError):
            continue
    return total


# ---------------------------------------------------------------- the rig


class Rig:
    """A private embedded broker on a free loopback port with the topic catalogue, an
    arrival reader and a producer; worker roles and the naive consumer start on demand.
    Every rig is a new broker, so every consumer group in it is fresh."""

    def __init__(self, base: Settings, log_dir: Path, config: Path | None, env: dict[str, str] | None = None) -> None:
        self.settings = base.model_copy(update=dict(
            bootstrap_servers=None, kafka_profile="local", embedded_port=free_port(), metrics_port=0,
        ))
        self.fleet = Fleet(self.settings, config=config, roles=(), log_dir=log_dir, env={
            "RTAUDIT_METRICS_PORT": "0", "RTAUDIT_KAFKA_PROFILE": "local",
            "RTAUDIT_STATE_DIR": str(log_dir.parent / "state"), **(env or {}),
        })
        self.run_id = uuid.uuid4().hex[:6]
        #: the reference process running now (the naive consumer or a peer), and its name.
        self._naive: subprocess.Popen[bytes] | None = None
        self._naive_name = "naive"

    def __enter__(self) -> "Rig":
        self.fleet.launch()
        try:
            self.reader = ArrivalReader(self.settings)
            self.producer = Producer(producer_config(self.settings))
        except BaseException:
            self.fleet.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_naive()
        self.reader.close()
        self.producer.flush(5)
        del self.producer  # librdkafka handles reconnect until destroyed: drop it before the broker goes
        self.fleet.stop()

    @property
    def bootstrap(self) -> str:
        return self.settings.bootstrap

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) used so far by each process of the rig: worker roles
        (summed over replicas), the naive consumer, the broker and this process (the load
        generator and reader). Linux ``/proc``; empty elsewhere."""
        procs: dict[str, list[int]] = {role: [p.pid for p in ps] for role, ps in self.fleet.processes.items()}
        if self.fleet.broker is not None and self.fleet.broker.process is not None:
            procs["broker"] = [self.fleet.broker.process.pid]
        procs["bench"] = [os.getpid()]
        out: dict[str, float] = {}
        for name, pids in procs.items():
            try:
                out[name] = sum(process_cpu_seconds(pid) for pid in pids)
            except (OSError, ValueError, IndexError):
                continue
        if self._naive is not None:  # with its descendants: a peer's own processes count too
            try:
                out[self._naive_name] = tree_cpu_seconds(self._naive.pid)
            except (OSError, ValueError, IndexError):
                pass
        return out

    def start_fleet(self, roles: tuple[str, ...], timeout_s: float = 240.0) -> None:
        """Every role of the fleet, ready when a probe request gets a complete verdict."""
        for role in roles:
            self.fleet.spawn(role)
        self.fleet.wait_ready(timeout_s)

    def start_worker(self, role: str, timeout_s: float = 180.0) -> float:
        """One worker process of ``role``; returns seconds until it answered a probe task."""
        self.fleet.spawn(role)
        return self.probe(lane_topic(modality_of(role), "lo"), role, timeout_s)

    def start_naive(self, role: str, timeout_s: float = 120.0) -> tuple[str, float]:
        """The naive consumer of ``role`` in its own process, on its own new topic; returns
        ``(topic, seconds until it answered a probe)``."""
        return self.start_reference("naive", role, lambda topic: naive_command(role, topic), timeout_s)

    def start_reference(self, name: str, role: str, command: Callable[[str], list[str]], timeout_s: float = 120.0,
                        env: dict[str, str] | None = None) -> tuple[str, float]:
        """A reference consumer of ``role`` (the naive consumer or a peer: ``command(topic)``
        is its command line) in its own process group, on its own new topic, with the rig's
        settings in its environment (and ``env``); its CPU is reported as ``name``. Returns
        ``(topic, seconds until it answered a probe)``. One reference runs at a time."""
        self.stop_naive()
        topic = f"rtaudit-bench.{name}.{role}.{self.run_id}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=self.settings.partitions, replication_factor=-1)])[topic].result(15)
        full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **self.fleet.env, "RTAUDIT_EMBEDDED_PORT": str(self.settings.embedded_port),
                    **(env or {})}
        if self.fleet.config is not None:
            full_env["RTAUDIT_CONFIG"] = str(self.fleet.config)
        self.fleet.log_dir.mkdir(parents=True, exist_ok=True)
        self._naive_name = name
        with open(self.fleet.log_dir / f"{name}-{role}.log", "wb") as logf:
            self._naive = subprocess.Popen(
                command(topic), env=full_env, stdout=logf, stderr=subprocess.STDOUT, **popen_options(),
            )
        return topic, self.probe(topic, role, timeout_s)

    def stop_naive(self) -> None:
        """Stop the reference process (naive consumer or peer) and its process group: SIGTERM,
        then SIGKILL to what is left after 20 s; then SIGKILL any descendant still alive that
        left the group (Ray's actors run in sessions of their own)."""
        if self._naive is not None:
            tree = {pid: _started_at(pid) for pid in process_tree(self._naive.pid)[1:]}
            stop_group(self._naive, timeout_s=20.0)
            for pid, started in tree.items():
                if started is not None and _started_at(pid) == started:  # the same process, not a reused pid
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            self._naive = None

    def probe(self, topic: str, role: str, timeout_s: float) -> float:
        """Send a small task every 15 s until one of them is answered (a slow stage, OCR on a
        busy CPU, may take longer than that per item); seconds waited. Raises
        ``RuntimeError`` naming the worker log when nothing answers in time."""
        started = time.monotonic()
        item: str | MediaItem = "bench probe" if modality_of(role) == "text" else Corpus.build().rendered[0]
        sent: list[str] = []
        while time.monotonic() - started < timeout_s:
            if self.fleet.exited():
                raise RuntimeError(f"workers exited: {self.fleet.exited()}; logs in {self.fleet.log_dir}")
            if self._naive is not None and self._naive.poll() is not None:
                raise RuntimeError(f"the {self._naive_name} {role} consumer exited ({self._naive.returncode}); "
                                   f"log {self.fleet.log_dir / f'{self._naive_name}-{role}.log'}")
            rid = f"probe-{uuid.uuid4().hex[:10]}"
            sent.append(rid)
            self.reader.expect({rid: time.time()}, "partial")
            send_open_loop(self.producer, [Send(time.time(), topic, rid, task_value(role, item, rid, "lo", 600_000))])
            if self.reader.wait(sent, timeout_s=min(15.0, timeout_s), any_of=True):
                return time.monotonic() - started
        raise RuntimeError(f"no answer from {role} on {topic} within {timeout_s} s; logs in {self.fleet.log_dir}")


# ---------------------------------------------------------------- steps


@dataclass(frozen=True)
class Stream:
    """One open-loop stream of a step: ``rate`` items/s of ``make(i, rid)`` values to ``topic``."""

    label: str
    topic: str
    rate: float
    make: Callable[[int, str], Callable[[float], bytes]]
    slo_ms: float
    measure: Measure = "partial"


def run_step(rig: Rig, streams: list[Stream], duration_s: float, max_items: int, tag: str) -> list[StepResult]:
    """Send every stream for ``duration_s`` on its schedule, wait until all are answered
    (or each item's SLO + 2 s passed since its due time), and summarize each stream."""
    t0 = time.time() + 0.2
    sends: list[Send] = []
    per_stream: list[list[str]] = []
    for k, st in enumerate(streams):
        n = step_count(st.rate, duration_s, max_items)
        ids = [f"{rig.run_id}-{tag}-{k}-{i}" for i in range(n)]
        due = schedule(st.rate, n, t0)
        rig.reader.expect(dict(zip(ids, due)), st.measure)
        sends += [Send(d, st.topic, rid, st.make(i, rid)) for i, (rid, d) in enumerate(zip(ids, due))]
        per_stream.append(ids)
    cpu_before, wall_before = rig.cpu_seconds(), time.monotonic()
    lag_ms = send_open_loop(rig.producer, sends)
    last_due = max(s.due_s for s in sends)
    wait_s = max(st.slo_ms for st in streams) / 1000.0 + 2.0
    rig.reader.wait([i for ids in per_stream for i in ids], timeout_s=max(0.0, last_due + wait_s - time.time()))
    censor = time.time()
    cpu_after = rig.cpu_seconds()
    cpu = cpu_percent(cpu_before, cpu_after, time.monotonic() - wall_before)
    cpu_s = cpu_delta(cpu_before, cpu_after)
    return [
        summarize_step(st.label, st.rate, rig.reader.samples(ids), st.slo_ms, censor, lag_ms, cpu_pct=cpu, cpu_s=cpu_s)
        for st, ids in zip(streams, per_stream)
    ]
