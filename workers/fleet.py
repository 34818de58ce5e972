"""Run the whole fleet locally: embedded broker (when no external bootstrap is set),
topics, and one or more ``faust -A workers.<role> worker`` processes per role.

Readiness is proven end to end: a probe request with text and an image must come
back as a complete verdict (every consumer group has joined and every model loaded).
"""

from __future__ import annotations

import base64
import io
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image, ImageDraw

from engine.clock import now_ms
from schemas.messages import AuditRequest, MediaItem
from topics.admin import ensure_topics
from topics.catalog import catalog
from workers.broker import EmbeddedBroker, is_listening
from workers.client import AuditClient, verdict_reader
from workers.settings import Settings

log = logging.getLogger(__name__)
ROLES = ("router", "text", "image", "ocr", "fusion")


class FleetNotReady(RuntimeError):
    """The probe verdict did not arrive in time; the message names the workers that exited."""


def faust_executable() -> str:
    return str(Path(sys.executable).with_name("faust"))


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
    processes: dict[str, list[subprocess.Popen[bytes]]] = field(default_factory=dict)
    #: role → index of the last process started (log files are ``<role>-<index>.log``).
    spawned: dict[str, int] = field(default_factory=dict)

    def start_broker_if_needed(self) -> None:
        """Start the embedded broker when the profile is local and nothing listens on its port."""
        if self.settings.bootstrap_servers is None and not is_listening("127.0.0.1", self.settings.embedded_port):
            self.broker = EmbeddedBroker(self.settings.embedded_port).start()

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
        (a caller that runs only some roles proves readiness its own way)."""
        self.start_broker_if_needed()
        ensure_topics(self.settings.bootstrap, catalog(self.settings.partitions))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for role in self.roles:
            for _ in range(self.replicas.get(role, 1)):
                self.spawn(role)

    def spawn(self, role: str) -> subprocess.Popen[bytes]:
        """Start one more ``faust -A workers.<role> worker`` process (it joins the role's consumer group)."""
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **self.env}
        if self.config is not None:
            env["RTAUDIT_CONFIG"] = str(Path(self.config).resolve())
        if self.settings.bootstrap_servers is None:
            env["RTAUDIT_EMBEDDED_PORT"] = str(self.settings.embedded_port)
        if self.settings.metrics_port:
            env["RTAUDIT_METRICS_PORT"] = str(self.settings.metrics_port + len(self._all()))
        index = self.spawned[role] = self.spawned.get(role, -1) + 1
        with open(self.log_dir / f"{role}-{index}.log", "wb") as logf:
            proc = subprocess.Popen(
                [faust_executable(), "-A", f"workers.{role}", "worker", "-l", "info", "--without-web"],
                env=env, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.processes.setdefault(role, []).append(proc)
        return proc

    def _all(self) -> list[subprocess.Popen[bytes]]:
        return [p for procs in self.processes.values() for p in procs]

    def exited(self) -> list[str]:
        """Workers that stopped without :meth:`stop` (killed on purpose ones are forgotten)."""
        return [f"{role} (exit {p.returncode})" for role, procs in self.processes.items() for p in procs if p.poll() is not None]

    def kill(self, role: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to every process of ``role`` and forget them (a crash, for failover tests)."""
        for p in self.processes.pop(role, []):
            if p.poll() is None:
                p.send_signal(sig)
            p.wait()

    def wait_ready(self, timeout_s: float) -> float:
        """Send probe requests until one's verdict is complete; returns seconds waited."""
        started = time.monotonic()
        reader = verdict_reader(self.settings)
        client = AuditClient(self.settings)
        try:
            while time.monotonic() - started < timeout_s:
                if self.exited():
                    raise FleetNotReady(f"workers exited: {self.exited()}; logs in {self.log_dir}")
                probe = probe_request()
                client.submit(probe)
                client.flush()
                got = reader.wait_for({probe.request_id}, timeout_s=min(30.0, timeout_s))
                if probe.request_id in got and got[probe.request_id][0].complete:
                    return time.monotonic() - started
            raise FleetNotReady(f"no complete probe verdict within {timeout_s} s; logs in {self.log_dir}")
        finally:
            reader.close()

    def stop(self) -> None:
        """SIGTERM every worker (Faust leaves its groups cleanly), SIGKILL stragglers, stop the broker."""
        procs = self._all()
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.processes.clear()
        if self.broker is not None:
            self.broker.stop()
            self.broker = None

    def __enter__(self) -> "Fleet":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
