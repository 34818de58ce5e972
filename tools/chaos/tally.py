"""Progress and tally of ``rtaudit chaos`` (pure): what was sent, what came back, P99, time to recover."""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from rtaudit.tools.chaos.plan import ANSWERED


@dataclass(frozen=True)
class Sent:
    """A request of the load: id, kind (:data:`KINDS`) and ``created_at_ms``."""

    rid: str
    kind: str
    created_ms: int


class Progress:
    """What the live reader saw (thread-safe): first arrival per request id, how often the
    client yielded each id, and per role the newest ``created_at_ms`` among the verdicts
    that role took part in (so "has ``role`` answered a request sent after ``t``?" is one
    lookup). Router and fusion take part in every verdict; a stage role (text, image, OCR)
    in those whose ``parts`` show its answer (``<stage>/<part>`` with status ``ok``,
    ``expired`` or ``error``; not ``missing``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.arrived_ms: dict[str, int] = {}
        self.yields: Counter[str] = Counter()
        self.newest_served_ms: dict[str, int] = {}
        #: wall time of the last arrival, s.
        self.last_arrival_s = 0.0

    def record(self, rid: str, parts: dict[str, str], arrived_ms: int, sent: Sent | None) -> None:
        with self._lock:
            self.last_arrival_s = arrived_ms / 1000.0
            self.yields[rid] += 1
            self.arrived_ms.setdefault(rid, arrived_ms)
            if sent is None:
                return
            roles = {"router", "fusion"} | {key.split("/", 1)[0] for key, status in parts.items()
                                            if "/" in key and status in ANSWERED}
            for role in roles:
                self.newest_served_ms[role] = max(self.newest_served_ms.get(role, 0), sent.created_ms)

    def served_since(self, role: str, since_ms: int) -> bool:
        """Whether ``role`` answered a request created at or after ``since_ms``."""
        with self._lock:
            return self.newest_served_ms.get(role, -1) >= since_ms

    def have(self, rids: Iterable[str]) -> bool:
        with self._lock:
            return all(r in self.arrived_ms for r in rids)


def p99(values: list[float]) -> float | None:
    """Nearest-rank 99th percentile (``None`` for no values; ``inf`` counts as a value)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


@dataclass(frozen=True)
class RawVerdict:
    """One record of ``audit.verdicts`` as the raw consumer read it."""

    rid: str
    complete: bool
    decision: str
    parts: tuple[tuple[str, str], ...] = ()
    #: for the report only (not compared): the verdict's reasons and decision time.
    reasons: tuple[str, ...] = field(default=(), compare=False)
    decided_at_ms: int = field(default=0, compare=False)


@dataclass
class ChaosResult:
    """The tally of one run (see :func:`tally`); latencies in ms, times in s from the load's start."""

    sent: int
    not_acknowledged: int
    verdicts: int
    verdict_records: int
    lost: list[str]
    raw_duplicates: dict[str, int]
    conflicting_duplicates: list[str]
    client_duplicates: dict[str, int]
    client_dropped: int
    incomplete: int
    incomplete_parts: dict[str, int]
    p99_before_ms: float | None
    p99_during_ms: float | None
    p99_after_ms: float | None
    recover_s: float | None
    kills: int
    terms: int
    by_kind: dict[str, int] = field(default_factory=dict)
    #: P99 over the whole run per request kind, ms.
    p99_by_kind: dict[str, float | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """The target: nothing lost, no duplicate through the client, no two different verdicts for one id."""
        return not self.lost and not self.client_duplicates and not self.not_acknowledged and not self.conflicting_duplicates


def recovery_s(samples: list[tuple[int, float]], last_fault_ms: int, slo_ms: float, window_s: float = 5.0,
               step_s: float = 1.0, end_ms: int | None = None) -> float | None:
    """Seconds from ``last_fault_ms`` to the start of the first window (``window_s`` long,
    sliding by ``step_s``, requests grouped by creation time) whose P99 latency is under
    ``slo_ms``; ``samples`` are ``(created_ms, latency_ms)`` with ``inf`` for a lost request.
    0 when the first window after the last fault is already under the SLO; ``None`` when no
    window is (or there is no request after the last fault)."""
    after = sorted((c, lat) for c, lat in samples if c >= last_fault_ms)
    if not after:
        return None
    end = end_ms if end_ms is not None else after[-1][0]
    start = last_fault_ms
    while start <= end:
        stop = start + window_s * 1000
        window = [lat for c, lat in after if start <= c < stop]
        q = p99(window)
        if q is not None and q < slo_ms:
            return round((start - last_fault_ms) / 1000.0, 3)
        start += int(step_s * 1000)
    return None


def tally(
    sent: dict[str, Sent], acknowledged: set[str], raw: list[RawVerdict], client_yields: dict[str, int],
    client_dropped: int, arrived_ms: dict[str, int], fault_ms: list[tuple[int, str]], slo_ms: float,
    window_s: float = 5.0,
) -> ChaosResult:
    """Count the run.

    Args:
        sent: every request the load built, by id.
        acknowledged: ids the broker acknowledged (what "sent" counts).
        raw: the verdict records of this run's requests, in partition order (the first
            record of an id is the one a client keeps).
        client_yields: how many times a deduplicating client reader yielded each id.
        client_dropped: repeats the client reader dropped.
        arrived_ms: first arrival of each id's verdict at the live reader.
        fault_ms: ``(wall ms, signal name)`` of each fault sent.
        slo_ms: the requests' SLO.
    """
    records: dict[str, list[RawVerdict]] = {}
    for r in raw:
        if r.rid in sent:
            records.setdefault(r.rid, []).append(r)
    lost = sorted(rid for rid in acknowledged if rid not in records)
    dups = {rid: len(rs) for rid, rs in records.items() if len(rs) > 1}
    # two records of one id that differ in decision, completeness, parts or reasons: a consumer that
    # keeps the last record per key (a compacted topic, a table, a sink) may keep the wrong decision
    conflicting = sorted(rid for rid, rs in records.items()
                         if len({(x.complete, x.decision, x.parts, x.reasons) for x in rs}) > 1)
    firsts = [rs[0] for rs in records.values()]
    incomplete_parts: Counter[str] = Counter()
    for v in firsts:
        if not v.complete:
            for part, status in v.parts:
                if status != "ok":
                    incomplete_parts[f"{part.rsplit(':', 1)[0]} {status}"] += 1
    samples: list[tuple[int, float]] = []
    per_kind: dict[str, list[float]] = {}
    for rid in acknowledged:
        s = sent[rid]
        if rid in arrived_ms:
            lat = float(arrived_ms[rid] - s.created_ms)
        elif rid not in records:
            lat = math.inf
        else:
            continue  # a verdict the live reader had not seen yet: no arrival time
        samples.append((s.created_ms, lat))
        per_kind.setdefault(s.kind, []).append(lat)
    times = sorted(t for t, _ in fault_ms)
    first, last = (times[0], times[-1]) if times else (None, None)

    def q(pred: Callable[[int], bool]) -> float | None:
        return p99([lat for c, lat in samples if pred(c)])

    return ChaosResult(
        sent=len(acknowledged), not_acknowledged=len(set(sent) - acknowledged),
        verdicts=sum(1 for rid in acknowledged if rid in records), verdict_records=sum(len(rs) for rs in records.values()),
        lost=lost, raw_duplicates=dups, conflicting_duplicates=conflicting,
        client_duplicates={rid: n for rid, n in client_yields.items() if n > 1 and rid in sent},
        client_dropped=client_dropped,
        incomplete=sum(1 for v in firsts if not v.complete), incomplete_parts=dict(incomplete_parts),
        p99_before_ms=q(lambda c: first is None or c < first),
        p99_during_ms=q(lambda c: first is not None and last is not None and first <= c <= last),
        p99_after_ms=q(lambda c: last is not None and c > last),
        recover_s=recovery_s(samples, last, slo_ms, window_s) if last is not None else None,
        kills=sum(1 for _, sig in fault_ms if sig == "SIGKILL"), terms=sum(1 for _, sig in fault_ms if sig == "SIGTERM"),
        by_kind=dict(Counter(sent[rid].kind for rid in acknowledged)),
        p99_by_kind={k: p99(v) for k, v in sorted(per_kind.items())},
    )


def result_rows(r: ChaosResult, slo_ms: float) -> list[tuple[str, str]]:
    """``(measure, value)`` rows of the chaos table."""

    def ms(x: float | None) -> str:
        return "n/a" if x is None else ("never (lost)" if math.isinf(x) else f"{x:,.0f} ms")

    def ids(d: Iterable[str]) -> str:
        d = sorted(d)
        return "" if not d else " (" + ", ".join(d[:3]) + (f" +{len(d) - 3}" if len(d) > 3 else "") + ")"

    kinds = ", ".join(f"{k} {n}" for k, n in sorted(r.by_kind.items()))
    parts = ", ".join(f"{k} {n}" for k, n in sorted(r.incomplete_parts.items()))
    return [
        ("faults", f"{r.kills} kill -9, {r.terms} SIGTERM (rolling restart)"),
        ("requests sent (acknowledged)", f"{r.sent} ({kinds})" + (f"; {r.not_acknowledged} not acknowledged" if r.not_acknowledged else "")),
        ("verdicts (distinct request ids)", f"{r.verdicts} from {r.verdict_records} records"),
        ("lost (sent, no verdict)", f"{len(r.lost)}{ids(r.lost)}"),
        ("duplicates, raw consumer", f"{sum(n - 1 for n in r.raw_duplicates.values())} extra records on {len(r.raw_duplicates)} ids"
                                     f"{ids(r.raw_duplicates)}"),
        ("different verdicts for one id (target 0)", f"{len(r.conflicting_duplicates)}{ids(r.conflicting_duplicates)}"),
        ("duplicates through the client", f"{len(r.client_duplicates)} (the client dropped {r.client_dropped} repeats)"),
        ("incomplete verdicts", f"{r.incomplete}" + (f" (parts not ok: {parts})" if parts else "")),
        ("P99 before the faults", ms(r.p99_before_ms)),
        ("P99 during the faults", ms(r.p99_during_ms)),
        ("P99 after the last fault", ms(r.p99_after_ms)),
        ("P99 by kind, whole run", ", ".join(f"{k} {ms(v)}" for k, v in r.p99_by_kind.items()) or "n/a"),
        (f"time to recover (P99 of a 5 s window < {slo_ms / 1000:g} s SLO)",
         "n/a" if r.recover_s is None else f"{r.recover_s:.0f} s after the last fault"),
    ]
