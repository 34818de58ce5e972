"""Who runs the fleet on a port: a claim file per broker address, held with ``flock``.

``rtaudit up``, ``demo`` and ``broker`` claim their broker address before they start
anything: ``<runtime dir>/port-<port>.lock`` (``$XDG_RUNTIME_DIR/rtaudit``, else
``/tmp/rtaudit-<uid>``), locked with ``flock`` for the life of the process and holding
a JSON :class:`FleetRecord` (pid, checkout, version, git commit, settings hash, run id,
log folder). The kernel drops the lock when the process dies however it dies, so a
claim whose lock is free is stale and is taken over. A second fleet on a claimed
address is refused with one line naming the owner and how to stop it; a port that
something listens on without a claim (an older rtaudit, another program) is refused
too, naming the listening pid when ``/proc`` shows it.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Literal

from rtaudit.tools.fleet.broker import is_listening
from rtaudit.workers.settings import Settings

#: the repository this code runs from (where ``workers/`` lives).
CHECKOUT = Path(__file__).resolve().parents[2]
Kind = Literal["fleet", "broker"]


def runtime_dir() -> Path:
    """Folder of the claim files, private to this user."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "rtaudit" if base else Path(f"/tmp/rtaudit-{os.getuid()}")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def claim_name(settings: Settings) -> str:
    """``port-<embedded port>`` for the embedded broker, else a name for the bootstrap servers."""
    if settings.bootstrap_servers is None:
        return f"port-{settings.embedded_port}"
    return "bootstrap-" + hashlib.sha256(settings.bootstrap_servers.encode()).hexdigest()[:12]


def settings_hash(settings: Settings) -> str:
    """A short digest of every setting (two fleets with different settings differ here)."""
    return hashlib.sha256(settings.model_dump_json().encode()).hexdigest()[:12]


def git_commit(checkout: Path = CHECKOUT) -> str:
    """The checkout's ``HEAD`` commit (12 hex digits), or ``unknown`` outside git."""
    try:
        out = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def package_version() -> str:
    try:
        return importlib.metadata.version("rtaudit")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def new_run_id() -> str:
    """``YYYYmmdd-HHMMSS-<pid>``: names a run's log folder."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


@dataclass(frozen=True)
class FleetRecord:
    """What a claim file says about the process that holds it."""

    kind: Kind
    pid: int
    bootstrap: str
    checkout: str
    version: str
    commit: str
    settings_hash: str
    run_id: str
    log_dir: str
    started_at: str

    @classmethod
    def ours(cls, settings: Settings, kind: Kind, run_id: str, log_dir: Path | None) -> "FleetRecord":
        return cls(
            kind=kind, pid=os.getpid(), bootstrap=settings.bootstrap, checkout=str(CHECKOUT), version=package_version(),
            commit=git_commit(), settings_hash=settings_hash(settings), run_id=run_id,
            log_dir=str(log_dir.resolve()) if log_dir else "", started_at=time.strftime("%Y-%m-%d %H:%M:%S"),
        )

    def differences(self, other: "FleetRecord") -> list[str]:
        """What differs between two fleets' code and settings (``commit abc != def``)."""
        fields = ("kind", "checkout", "version", "commit", "settings_hash")
        return [f"{f} {getattr(self, f)} != {getattr(other, f)}" for f in fields if getattr(self, f) != getattr(other, f)]

    def same_fleet(self, other: "FleetRecord") -> bool:
        """Same code (checkout, version, commit) and same settings: a fleet ``demo`` may reuse."""
        return not self.differences(other)

    def describe(self) -> str:
        what = "rtaudit fleet" if self.kind == "fleet" else "rtaudit broker"
        return (f"the {what} of pid {self.pid} from {self.checkout} (version {self.version}, commit {self.commit}, "
                f"settings {self.settings_hash}, started {self.started_at}"
                f"{', logs in ' + self.log_dir if self.log_dir else ''})")


class FleetConflict(RuntimeError):
    """The broker address is in use by another fleet or process; the message says which and
    how to stop it. ``record`` is the owner's claim (``None``: a listener without one)."""

    def __init__(self, message: str, record: FleetRecord | None = None) -> None:
        super().__init__(message)
        self.record = record


def stop_hint(record: FleetRecord, settings: Settings) -> str:
    port = f" --port {settings.embedded_port}" if settings.bootstrap_servers is None else ""
    return f"stop it with `kill {record.pid}` or `rtaudit down{port}`"


def read_claim(settings: Settings) -> FleetRecord | None:
    """The live claim on the settings' broker address, or ``None`` (no claim, or a stale one)."""
    path = runtime_dir() / f"{claim_name(settings)}.lock"
    try:
        f = open(path, "r")
    except FileNotFoundError:
        return None
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held: its owner is alive
            try:
                return FleetRecord(**json.loads(f.read() or "{}"))
            except (TypeError, ValueError):
                return None
        fcntl.flock(f, fcntl.LOCK_UN)
        return None


def live_claims() -> list[FleetRecord]:
    """Every live claim of this user's fleets and brokers (any address), oldest first: what a
    command that found no broker at its own address can point to."""
    out = []
    for path in sorted(runtime_dir().glob("*.lock")):
        try:
            f = open(path, "r")
        except OSError:
            continue
        with f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # held: its owner is alive
                try:
                    out.append(FleetRecord(**json.loads(f.read() or "{}")))
                except (TypeError, ValueError):
                    pass
                continue
            fcntl.flock(f, fcntl.LOCK_UN)
    return sorted(out, key=lambda r: r.started_at)


class Claim:
    """This process's claim on a broker address (hold it for the fleet's life; ``release``
    or process exit drops it)."""

    def __init__(self, settings: Settings, record: FleetRecord) -> None:
        self.settings, self.record = settings, record
        self.path = runtime_dir() / f"{claim_name(settings)}.lock"
        self._file: IO[str] | None = None

    def acquire(self) -> "Claim":
        """Take the claim. Raises :class:`FleetConflict` when another live process holds it or,
        for the embedded broker, when something unclaimed listens on the port."""
        f = open(self.path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            owner = read_claim(self.settings)
            if owner is None:  # released between the two calls
                return self.acquire()
            raise FleetConflict(f"{self.settings.bootstrap} is in use by {owner.describe()}: "
                                f"{stop_hint(owner, self.settings)}", owner) from None
        if self.settings.bootstrap_servers is None and is_listening("127.0.0.1", self.settings.embedded_port):
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()
            pid = listener_pid(self.settings.embedded_port)
            who = f"pid {pid} ({process_command(pid)})" if pid else "a process this user cannot see"
            hint = f": stop it with `kill {pid}`" if pid else ""
            raise FleetConflict(f"port {self.settings.embedded_port} is in use by {who}, not by an rtaudit fleet of "
                                f"this version{hint}, or set embedded_port to a free port")
        f.seek(0)
        f.truncate()
        f.write(json.dumps(asdict(self.record)))
        f.flush()
        self._file = f
        return self

    def release(self) -> None:
        if self._file is not None:
            self._file.seek(0)
            self._file.truncate()
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None

    def __enter__(self) -> "Claim":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def listener_pid(port: int) -> int | None:
    """The pid listening on TCP ``port`` (IPv4 or IPv6), from ``/proc``; ``None`` if unseen."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:
            continue  # gone, or not ours to read
        for fd in fds:
            try:
                if os.readlink(fd) in inodes:
                    return int(proc.name)
            except OSError:
                continue  # closed meanwhile: one closing fd must not hide the rest of the process's
    return None


def process_command(pid: int) -> str:
    """The command line of ``pid`` (first 120 characters), or ``?``."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:120] or "?"
