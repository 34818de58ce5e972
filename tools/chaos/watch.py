"""What the scenarios of ``rtaudit chaos`` send and what comes back: one long-running client, readers
of ``audit.verdicts`` that are reopened after a broker restart, and the supervisor's exit lines."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rtaudit.tools.chaos.rows import EXIT_LINE
from rtaudit.tools.chaos.tally import RawVerdict, Sent

if TYPE_CHECKING:
    from rtaudit.schemas.messages import Priority, Verdict
    from rtaudit.workers.client import RecordReader
    from rtaudit.workers.settings import Settings

#: worker log lines that mean a crash or a consumer that left its group (the poll interval exceeded).
CRASH_MARKS = ("record never tracked", "batch loop failed", "intake thread stopped")
GROUP_EXIT_MARKS = ("MAXPOLL", "maximum poll interval", "leaving group")


class Watch:
    """The load's bookkeeping (thread-safe): every request built (:class:`Sent`), when the broker
    acknowledged it (wall ms, from the long-running client's delivery reports), every verdict record a
    raw reader saw (:class:`RawVerdict`, first arrival per id) and how often a deduplicating client
    reader yielded each id. Both readers read ``audit.verdicts`` from the beginning; :meth:`reopen`
    replaces them after a broker restart (a restarted memory-only broker starts every topic at offset 0,
    and a reader positioned past that never reads again)."""

    def __init__(self, settings: Settings) -> None:
        from rtaudit.workers.client import AuditClient

        self.settings = settings
        self._lock = threading.Lock()
        self.sent: dict[str, Sent] = {}
        self.acked_ms: dict[str, int] = {}
        self.raw: dict[str, list[RawVerdict]] = {}
        self.arrived_ms: dict[str, int] = {}
        self.client_yields: Counter[str] = Counter()
        self.client_dropped = 0
        self.client = AuditClient(settings, on_delivered=self._delivered)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._readers: list[RecordReader[Verdict]] = []
        self.reopen()

    # -- sending ---------------------------------------------------------------------
    def _delivered(self, rid: str) -> None:
        from rtaudit.engine.clock import now_ms

        with self._lock:
            self.acked_ms.setdefault(rid, now_ms())

    def submit(self, rid: str, kind: str, text: str, priority: Priority | None, slo_ms: int) -> None:
        """Build and send one text request (``kind`` labels it in the tally)."""
        from rtaudit.engine.clock import now_ms
        from rtaudit.schemas.messages import AuditRequest
        from rtaudit.tools.chaos.plan import TENANT

        created = now_ms()
        req = AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=created, slo_ms=slo_ms, text=text,
                           priority=priority)
        with self._lock:
            self.sent[rid] = Sent(rid, kind, created)
        self.client.submit(req)

    def flush(self, timeout_s: float) -> str | None:
        """Wait up to ``timeout_s`` s for the acknowledgements; ``None``, or the client's one-line
        :class:`rtaudit.workers.client.DeliveryError` (what is not acknowledged stays counted as such)."""
        from rtaudit.workers.client import DeliveryError

        try:
            self.client.flush(timeout_s)
        except DeliveryError as exc:
            return str(exc)
        return None

    # -- reading ---------------------------------------------------------------------
    def reopen(self) -> None:
        """Stop the readers (if any) and start new ones from the beginning of ``audit.verdicts``."""
        from rtaudit.workers.client import verdict_reader

        self._close_readers()
        self._stop = threading.Event()
        raw, client = verdict_reader(self.settings, dedupe=False), verdict_reader(self.settings)
        self._readers = [raw, client]
        self._threads = [threading.Thread(target=self._read_raw, args=(raw, self._stop), name="chaos-raw", daemon=True),
                         threading.Thread(target=self._read_client, args=(client, self._stop), name="chaos-client", daemon=True)]
        for t in self._threads:
            t.start()

    def _read_raw(self, reader: RecordReader[Verdict], stop: threading.Event) -> None:
        while not stop.is_set():
            for v, arrived in reader.stream(timeout_s=0.5):
                rec = RawVerdict(v.request_id, v.complete, v.decision, tuple(sorted(v.parts.items())), tuple(v.reasons),
                                 v.decided_at_ms)
                with self._lock:
                    self.raw.setdefault(v.request_id, []).append(rec)
                    self.arrived_ms.setdefault(v.request_id, arrived)

    def _read_client(self, reader: RecordReader[Verdict], stop: threading.Event) -> None:
        base = self.client_dropped
        while not stop.is_set():
            for v, _ in reader.stream(timeout_s=0.5):
                with self._lock:
                    self.client_yields[v.request_id] += 1
            with self._lock:
                self.client_dropped = base + reader.duplicates_dropped

    def _close_readers(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)
        for r in self._readers:
            r.close()
        self._threads, self._readers = [], []

    def answered(self, rids: set[str]) -> set[str]:
        with self._lock:
            return rids & set(self.arrived_ms)

    def last_arrival_ms(self, prefix: str) -> int:
        with self._lock:
            return max((t for rid, t in self.arrived_ms.items() if rid.startswith(prefix)), default=0)

    def close(self) -> None:
        self._close_readers()
        self.flush(10)


class ExitLog:
    """The fleet supervisor's exit lines with their wall time (pass :meth:`on_event` as ``Fleet(on_event=...)``)."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.lines: list[tuple[int, str]] = []

    def on_event(self, msg: str) -> None:
        from rtaudit.engine.clock import now_ms

        if EXIT_LINE.match(msg):
            self.lines.append((now_ms(), msg))
        if "restart" in msg or "exited" in msg:
            self.say(f"  fleet: {msg}")


class LogMarks:
    """Counts lines holding any of ``marks`` appended to the worker logs of ``log_dir`` since :meth:`mark`."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self._sizes: dict[Path, int] = {}

    def mark(self) -> None:
        self._sizes = {p: p.stat().st_size for p in self.log_dir.glob("*.log")}

    def since(self, marks: tuple[str, ...]) -> list[str]:
        """``"<log file>: <line>"`` for each matching line written since :meth:`mark`."""
        out = []
        for p in sorted(self.log_dir.glob("*.log")):
            with open(p, "rb") as f:
                f.seek(self._sizes.get(p, 0))
                for line in f.read().decode("utf-8", "replace").splitlines():
                    if any(m in line for m in marks):
                        out.append(f"{p.name}: {line.strip()[:200]}")
        return out


def wait_until(pred: Callable[[], bool], timeout_s: float, step_s: float = 0.2) -> bool:
    """Poll ``pred`` until it holds (``True``) or ``timeout_s`` seconds pass (``False``)."""
    end = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() >= end:
            return False
        time.sleep(step_s)
    return True
