"""One ``rtaudit chaos`` run: the supervised fleet, the load, the faults, the reads, the table."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from rtaudit.tools.chaos.plan import Fault, LATE_CAP_S, LATE_IDLE_S, ROLES, ROLLING_STEP_S, ROLLING_WAIT_S, SETTLE_MARGIN_S, plan_faults
from rtaudit.tools.chaos.tally import ChaosResult, Progress, RawVerdict, Sent, tally
from rtaudit.tools.chaos.load import RequestMaker
from rtaudit.tools.chaos.watch import ExitLog


@dataclass(frozen=True)
class ChaosOptions:
    """Options of one run (``rtaudit chaos``)."""

    kills: int = 20
    duration_s: float = 180.0
    seed: int = 1
    rate: float = 5.0
    image_share: float = 0.03
    ocr_share: float = 0.01
    slo_ms: int = 10_000
    #: roles restarted one after the other with SIGTERM (empty: no rolling restart).
    rolling: tuple[str, ...] = ROLES
    warmup_s: float = 15.0
    tail_s: float = 30.0
    out_dir: Path = Path(".rtaudit/chaos")
    config: Path | None = None
    #: longest wait for the fleet's first complete probe verdict, s (a loaded machine needs minutes).
    ready_timeout_s: float = 600.0

    @classmethod
    def quick(cls, **kw: object) -> "ChaosOptions":
        """Under a minute of load: 5 kills, no rolling restart."""
        base: dict[str, object] = dict(kills=5, duration_s=45.0, rolling=(), warmup_s=8.0, tail_s=12.0)
        return cls(**{**base, **kw})  # type: ignore[arg-type]  # keyword overrides checked by the dataclass at run time


@dataclass
class FaultDone:
    """A fault as it happened: planned fault, wall time it was sent (ms), pid, and for a
    rolling step when the role served again (ms; ``None``: not within the wait)."""

    fault: Fault
    at_ms: int
    pid: int | None
    back_ms: int | None = None
    note: str = ""


@dataclass
class ChaosRun:
    options: ChaosOptions
    run_id: str
    log_dir: Path
    result: ChaosResult
    faults: list[FaultDone]
    restarts: dict[str, int]
    load_s: float
    wall_s: float
    interrupted: bool = False
    #: every record of the first 20 repeated request ids (what differs, when each was decided).
    repeated: dict[str, list[RawVerdict]] = field(default_factory=dict)
    #: the supervisor's worker exit lines, ``(wall ms, line)``.
    exits: list[tuple[int, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "repeated": {rid: [asdict(v) for v in vs] for rid, vs in self.repeated.items()},
            "run_id": self.run_id, "log_dir": str(self.log_dir), "options": {**asdict(self.options), "out_dir": str(self.options.out_dir),
                                                                          "config": str(self.options.config) if self.options.config else None},
            "result": asdict(self.result), "restarts": self.restarts, "load_s": self.load_s, "wall_s": self.wall_s,
            "faults": [{**asdict(f.fault), "at_ms": f.at_ms, "pid": f.pid, "back_ms": f.back_ms, "note": f.note} for f in self.faults],
        }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Chaos:
    """One chaos run (see the module doc). ``say`` gets one line per event."""

    def __init__(self, options: ChaosOptions, base_settings, say: Callable[[str], None] = print) -> None:
        self.opts = options
        self.say = say
        self.run_id = f"chaos-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
        self.out_dir = Path(options.out_dir).resolve()
        self.log_dir = self.out_dir / self.run_id / "logs"
        self.settings = base_settings.model_copy(update=dict(
            bootstrap_servers=None, kafka_profile="local", embedded_port=free_port(), metrics_port=0,
        ))
        self.sent: dict[str, Sent] = {}
        self.acked: set[str] = set()
        self.progress = Progress()
        self.faults: list[FaultDone] = []
        self._stop_load = threading.Event()
        self._stop_reader = threading.Event()
        self._load_error: BaseException | None = None
        #: the supervisor's exit lines (worker crashes the harness did not cause are told apart by pid).
        self.exits = ExitLog(say)

    # -- threads ---------------------------------------------------------------------
    def _reader(self, reader) -> None:
        while not self._stop_reader.is_set():
            for verdict, arrived in reader.stream(timeout_s=0.5):
                self.progress.record(verdict.request_id, dict(verdict.parts), arrived, self.sent.get(verdict.request_id))

    def _load(self, client, maker: RequestMaker, t0: float) -> None:
        from rtaudit.engine.clock import now_ms
        from rtaudit.schemas.codec import encode

        try:
            i = 0
            while not self._stop_load.is_set():
                due = t0 + i / self.opts.rate
                wait = due - time.time()
                if wait > 0 and self._stop_load.wait(wait):
                    break
                s, req = maker.make(i, now_ms())
                self.sent[s.rid] = s
                client.submit_raw(s.rid.encode(), encode(req))
                i += 1
        except BaseException as exc:  # noqa: BLE001 - reported by run()
            self._load_error = exc

    # -- faults ----------------------------------------------------------------------
    def _slot(self, fleet, role: str):
        return next((s for s in list(fleet.slots) if s.role == role), None)

    def _alive_proc(self, fleet, role: str, wait_s: float):
        """The role's running process, waiting up to ``wait_s`` for the supervisor to restart it."""
        end = time.monotonic() + wait_s
        while True:
            slot = self._slot(fleet, role)
            if slot is not None and slot.proc.poll() is None:
                return slot.proc
            if time.monotonic() >= end:
                return None
            time.sleep(0.1)

    def _send(self, fleet, fault: Fault) -> FaultDone:
        from rtaudit.engine.clock import now_ms
        from rtaudit.tools.fleet.children import signal_group

        proc = self._alive_proc(fleet, fault.role, 10.0)
        if proc is None:
            done = FaultDone(fault, now_ms(), None, note="skipped: not running after 10 s")
        else:
            signal_group(proc, getattr(signal, fault.signal))
            done = FaultDone(fault, now_ms(), proc.pid)
        self.faults.append(done)
        return done

    def _rolling_step(self, fleet, fault: Fault) -> FaultDone:
        """Wait until the role's current process answers (a rolling restart never stops a process
        still starting), SIGTERM it, wait for the supervisor's new process, then until it answered
        a request sent after it started."""
        from rtaudit.engine.clock import now_ms

        slot = self._slot(fleet, fault.role)
        if slot is not None:
            since = int(time.time() * 1000 - (time.monotonic() - slot.started_s) * 1000)
            end = time.monotonic() + ROLLING_WAIT_S
            while not self.progress.served_since(fault.role, since) and time.monotonic() < end and not self._stop_load.is_set():
                time.sleep(0.2)
        done = self._send(fleet, fault)
        if done.pid is None:
            return done
        end = time.monotonic() + ROLLING_WAIT_S
        restarted_ms = None
        while time.monotonic() < end and not self._stop_load.is_set():
            slot = self._slot(fleet, fault.role)
            if restarted_ms is None and slot is not None and slot.proc.pid != done.pid and slot.proc.poll() is None:
                restarted_ms = now_ms()
            if restarted_ms is not None and self.progress.served_since(fault.role, restarted_ms):
                done.back_ms = now_ms()
                break
            time.sleep(0.2)
        if done.back_ms is None:
            done.note = f"not answering again within {ROLLING_WAIT_S:.0f} s"
        return done

    def _run_faults(self, fleet, plan: list[Fault], t0: float) -> None:
        delay = 0.0  # how far the rolling restart ran past its reserved time
        for fault in plan:
            wait = t0 + fault.at_s + delay - time.time()
            if wait > 0 and self._stop_load.wait(wait):
                return
            if fault.rolling:
                planned_end = t0 + fault.at_s + delay + ROLLING_STEP_S
                done = self._rolling_step(fleet, fault)
                delay += max(0.0, time.time() - planned_end)
                back = f"answering again after {(done.back_ms - done.at_ms) / 1000:.1f} s" if done.back_ms else done.note
                self.say(f"  t={time.time() - t0:6.1f} s  SIGTERM {fault.role} (pid {done.pid}, rolling restart): {back}")
            else:
                done = self._send(fleet, fault)
                self.say(f"  t={time.time() - t0:6.1f} s  kill -9 {fault.role} (pid {done.pid}){' ' + done.note if done.note else ''}")

    # -- reading back ----------------------------------------------------------------
    def read_raw(self) -> list[RawVerdict]:
        """Every verdict record of this run on ``audit.verdicts``, read whole with a raw consumer."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        from rtaudit.schemas.codec import decode
        from rtaudit.schemas.messages import Verdict
        from rtaudit.topics.catalog import VERDICTS
        from rtaudit.workers.kafka import consumer_config

        consumer = Consumer(consumer_config(self.settings, f"chaos-raw-{uuid.uuid4().hex[:8]}", None, **{"enable.partition.eof": True}))
        out: list[RawVerdict] = []
        try:
            parts = consumer.list_topics(VERDICTS, timeout=10).topics[VERDICTS].partitions
            consumer.assign([TopicPartition(VERDICTS, p, 0) for p in parts])
            at_end: set[int] = set()
            deadline = time.monotonic() + 60
            while len(at_end) < len(parts):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{VERDICTS} did not reach its end within 60 s")
                m = consumer.poll(1.0)
                if m is None:
                    continue
                if (err := m.error()) is not None:
                    if err.code() == KafkaError._PARTITION_EOF and (p := m.partition()) is not None:
                        at_end.add(p)
                    continue
                key = (m.key() or b"").decode("utf-8", "replace")
                if not key.startswith(self.run_id):
                    continue
                v = decode(m.value() or b"", Verdict)
                out.append(RawVerdict(key, v.complete, v.decision, tuple(sorted(v.parts.items())), tuple(v.reasons), v.decided_at_ms))
        finally:
            consumer.close()
        return out

    def read_client(self) -> tuple[dict[str, int], int]:
        """``audit.verdicts`` read whole through the client (dropping repeats): yields per id, repeats dropped."""
        from rtaudit.workers.client import verdict_reader

        yields: Counter[str] = Counter()
        with verdict_reader(self.settings) as reader:
            idle_since = time.monotonic()
            while time.monotonic() - idle_since < 3.0:
                got = False
                for verdict, _ in reader.stream(timeout_s=1.0):
                    got = True
                    if verdict.request_id.startswith(self.run_id):
                        yields[verdict.request_id] += 1
                if got:
                    idle_since = time.monotonic()
            return dict(yields), reader.duplicates_dropped

    # -- the whole run ---------------------------------------------------------------
    def run(self) -> ChaosRun:
        from rtaudit.workers.client import AuditClient, verdict_reader
        from rtaudit.tools.fleet.local import Fleet

        o = self.opts
        started = time.monotonic()
        end_faults = o.duration_s - o.tail_s
        plan = plan_faults(o.seed, o.kills, o.warmup_s, end_faults, rolling=o.rolling)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        maker = RequestMaker(self.run_id, o.seed, o.slo_ms, o.image_share, o.ocr_share)
        self.say(f"rtaudit chaos {self.run_id}: broker 127.0.0.1:{self.settings.embedded_port}, logs in {self.log_dir}")
        self.say(f"  load {o.rate:g} requests/s for {o.duration_s:.0f} s (image {o.image_share:.0%}, OCR {o.ocr_share:.0%}), "
                 f"SLO {o.slo_ms / 1000:g} s; {o.kills} kills" + (f" from t={o.warmup_s:.0f} s to t={end_faults:.0f} s" if o.kills else "") +
                 f"{', rolling restart of ' + ', '.join(o.rolling) if o.rolling else ''}; seed {o.seed}")
        env = {"RTAUDIT_METRICS_PORT": "0", "RTAUDIT_KAFKA_PROFILE": "local", "RTAUDIT_STATE_DIR": str(self.out_dir / self.run_id / "state")}
        fleet = Fleet(self.settings, config=o.config, log_dir=self.log_dir, env=env, supervise=True, on_event=self.exits.on_event)
        interrupted = False
        load_s = 0.0
        reader_thread = load_thread = None
        try:
            fleet.start(ready_timeout_s=o.ready_timeout_s)
            self.say(f"  fleet ready after {time.monotonic() - started:.0f} s")
            reader = verdict_reader(self.settings)
            reader_thread = threading.Thread(target=self._reader, args=(reader,), name="chaos-reader", daemon=True)
            reader_thread.start()
            client = AuditClient(self.settings, on_delivered=self.acked.add)
            t0 = time.time() + 0.5
            load_thread = threading.Thread(target=self._load, args=(client, maker, t0), name="chaos-load", daemon=True)
            load_thread.start()
            try:
                self._run_faults(fleet, plan, t0)
                # the load runs its full duration, and at least tail_s past the last fault
                last = max((f.at_ms / 1000.0 for f in self.faults), default=t0)
                stop_at = max(t0 + o.duration_s, last + o.tail_s)
                while time.time() < stop_at and not self._stop_load.wait(min(1.0, stop_at - time.time())):
                    pass
            except KeyboardInterrupt:
                interrupted = True
                self.say("  interrupted: stopping the load, reading what arrived")
            self._stop_load.set()
            load_thread.join(10)
            load_s = time.time() - t0
            client.flush(30)
            if self._load_error is not None:
                raise self._load_error
            last_deadline_s = max(s.created_ms for s in self.sent.values()) / 1000.0 + o.slo_ms / 1000.0
            settle_until = last_deadline_s + self.settings.fusion_grace_ms / 1000.0 + SETTLE_MARGIN_S
            self.say(f"  load stopped after {load_s:.0f} s ({len(self.acked)} requests acknowledged); waiting for the "
                     f"verdicts (last deadline + grace + {SETTLE_MARGIN_S:g} s: up to {max(0.0, settle_until - time.time()):.0f} s)")
            # past that point, wait on while verdicts still arrive (a backlog draining), never past LATE_CAP_S:
            # a lost request never arrives, so waiting longer cannot hide a loss
            while not self.progress.have(self.acked):
                now = time.time()
                if now >= settle_until + LATE_CAP_S or (now >= settle_until and now - self.progress.last_arrival_s > LATE_IDLE_S):
                    break
                time.sleep(0.5)
            raw = self.read_raw()
            client_yields, client_dropped = self.read_client()
            self._stop_reader.set()
            reader_thread.join(5)
            reader.close()
            result = tally(
                self.sent, set(self.acked), raw, client_yields, client_dropped, dict(self.progress.arrived_ms),
                [(f.at_ms, f.fault.signal) for f in self.faults if f.pid is not None], o.slo_ms,
            )
        finally:
            self._stop_load.set()
            self._stop_reader.set()
            fleet.stop()
        repeated = {rid: [v for v in raw if v.rid == rid] for rid in sorted(result.raw_duplicates)[:20]}
        return ChaosRun(o, self.run_id, self.log_dir, result, self.faults, dict(fleet.restarts), load_s,
                        time.monotonic() - started, interrupted, repeated, list(self.exits.lines))


def write_json(run: ChaosRun, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run.to_json(), indent=1, default=str))
    return path


def fault_line(f: FaultDone, t0_ms: int) -> str:
    """One line of the fault log (for reports)."""
    return f"t={(f.at_ms - t0_ms) / 1000:.1f} s {f.fault.signal} {f.fault.role} pid {f.pid}{' ' + f.note if f.note else ''}"
