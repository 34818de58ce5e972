"""``rtaudit chaos``: steady mixed load through a supervised fleet while workers are killed.

The harness (issue 10.4), on a private embedded broker on a free loopback port:

1. starts a supervised :class:`workers.fleet.Fleet` with every role (router, text, image,
   OCR, fusion), ready once a probe request gets a complete verdict;
2. sends open-loop mixed load for ``duration_s``: text requests, text + a small drawn
   image (image and OCR stages), and a few images of rendered words (OCR reads them),
   all built here, images with Pillow;
3. meanwhile runs the fault plan (:func:`plan_faults`, seeded): ``kill -9`` of the
   process group of a random worker every few seconds, and, half way through, a rolling
   ``SIGTERM`` restart of every role, one after the other (each role must serve a fresh
   request before the next one is stopped). The supervisor restarts every one of them;
4. stops the load, waits until every request has a verdict or the last deadline + the
   fusion grace (+ a margin) has passed, reads ``audit.verdicts`` whole twice: with a raw
   consumer (every record counts) and through the client (:func:`workers.client.verdict_reader`,
   which drops repeated request ids), and tallies (:func:`tally`).

Latency is end to end, from the request's ``created_at_ms`` to the verdict's arrival at a
reader that runs for the whole load (through the client). The pure parts (the fault plan,
:class:`Progress`, :func:`tally`, :func:`p99`) need no Kafka and are unit-tested.
"""

from __future__ import annotations

import base64
import io
import json
import math
import random
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: worker roles the harness kills (the fleet's roles).
ROLES = ("router", "text", "image", "ocr", "fusion")
#: request kinds of the load: text only; a caption + a drawn picture (image and OCR stages
#: run on it); an image of rendered words alone (OCR finds text in it).
KINDS = ("text", "image", "ocr")
#: part statuses that show a stage answered (``missing``: it did not, before the deadline).
ANSWERED = ("ok", "expired", "error")
#: tenant of every chaos request (the default policy; the SLO rides on each request).
TENANT = "chaos"
#: seconds the plan reserves for each step of the rolling restart (the run waits longer if needed).
ROLLING_STEP_S = 12.0
#: longest wait for a role to serve again during the rolling restart, s.
ROLLING_WAIT_S = 90.0
#: extra wait past the last deadline + grace before the verdicts are read, s.
SETTLE_MARGIN_S = 5.0
#: after that, the wait goes on while verdicts keep arriving (none for this long ends it), s ...
LATE_IDLE_S = 5.0
#: ... up to this much longer, s.
LATE_CAP_S = 120.0


# ---------------------------------------------------------------- the fault plan (pure)


@dataclass(frozen=True)
class Fault:
    """One planned fault: at ``at_s`` seconds after the load started, send ``signal``
    (``SIGKILL`` or ``SIGTERM``) to the process group of the ``role`` worker. A rolling
    step (``rolling``) waits until the previous rolling step's role serves again."""

    at_s: float
    role: str
    signal: str = "SIGKILL"
    rolling: bool = False


def plan_faults(
    seed: int, kills: int, start_s: float, end_s: float, roles: Iterable[str] = ROLES,
    rolling: Iterable[str] = ROLES, rolling_step_s: float = ROLLING_STEP_S,
) -> list[Fault]:
    """``kills`` SIGKILLs spread over ``[start_s, end_s]`` (evenly spaced, each jittered by at
    most 30 % of the spacing), roles drawn as successive shuffles of ``roles`` (every role is
    killed as often as the others, give or take one, never twice in a row), and a rolling
    SIGTERM restart of ``rolling`` (shuffled) half way through, for which the plan reserves
    ``rolling_step_s`` per role. Deterministic for a ``seed``; sorted by time.

    Raises:
        ValueError: a negative count, an empty or unknown role list, or a window too short
            for the rolling restart.
    """
    roles, rolling = list(roles), list(rolling)
    if kills < 0:
        raise ValueError(f"kills must be >= 0, got {kills}")
    if kills and not roles:
        raise ValueError("no role to kill")
    unknown = sorted(set(roles + rolling) - set(ROLES))
    if unknown:
        raise ValueError(f"unknown roles {unknown}: roles are {', '.join(ROLES)}")
    reserved = rolling_step_s * len(rolling)
    span = end_s - start_s - reserved
    if (kills or rolling) and span <= 0:
        raise ValueError(f"a fault window of {end_s - start_s:.0f} s is too short for a rolling restart of "
                         f"{len(rolling)} roles ({reserved:.0f} s reserved)")
    rng = random.Random(seed)
    order: list[str] = []
    while len(order) < kills:
        perm = rng.sample(roles, len(roles))
        if order and len(perm) > 1 and perm[0] == order[-1]:
            perm[0], perm[1] = perm[1], perm[0]
        order += perm
    gap = span / kills if kills else 0.0
    times = [start_s + (i + 0.5) * gap + rng.uniform(-0.3, 0.3) * gap for i in range(kills)]
    split = kills // 2  # kills before the rolling restart
    rolling_at = start_s + split * gap
    faults = [Fault(round(t + (reserved if i >= split else 0.0), 3), order[i]) for i, t in enumerate(times)]
    rolling_order = rng.sample(rolling, len(rolling))
    faults += [Fault(round(rolling_at + k * rolling_step_s, 3), role, "SIGTERM", rolling=True)
               for k, role in enumerate(rolling_order)]
    return sorted(faults, key=lambda f: f.at_s)


# ---------------------------------------------------------------- progress and tally (pure)


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
        """The target: nothing lost, no duplicate through the client."""
        return not self.lost and not self.client_duplicates and not self.not_acknowledged


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
    conflicting = sorted(rid for rid, rs in records.items() if len({(x.complete, x.decision, x.parts) for x in rs}) > 1)
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
                                     f"{ids(r.raw_duplicates)}" + (f"; {len(r.conflicting_duplicates)} not identical" if r.conflicting_duplicates else "")),
        ("duplicates through the client", f"{len(r.client_duplicates)} (the client dropped {r.client_dropped} repeats)"),
        ("incomplete verdicts", f"{r.incomplete}" + (f" (parts not ok: {parts})" if parts else "")),
        ("P99 before the faults", ms(r.p99_before_ms)),
        ("P99 during the faults", ms(r.p99_during_ms)),
        ("P99 after the last fault", ms(r.p99_after_ms)),
        ("P99 by kind, whole run", ", ".join(f"{k} {ms(v)}" for k, v in r.p99_by_kind.items()) or "n/a"),
        (f"time to recover (P99 of a 5 s window < {slo_ms / 1000:g} s SLO)",
         "n/a" if r.recover_s is None else f"{r.recover_s:.0f} s after the last fault"),
    ]


# ---------------------------------------------------------------- the load


def _png(img: object) -> str:
    buf = io.BytesIO()
    img.save(buf, format="PNG")  # type: ignore[attr-defined]
    return base64.b64encode(buf.getvalue()).decode("ascii")


def drawn_images(seed: int, n: int = 8, side: int = 96) -> list[str]:
    """``n`` small pictures (shapes on a colour, ``side`` px square) as base64 PNG: the image
    stage scores them, OCR finds little text in them (about 0.3 s each on one core)."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        img = Image.new("RGB", (side, side), tuple(rng.randrange(256) for _ in range(3)))
        draw = ImageDraw.Draw(img)
        for _ in range(4):
            x, y = rng.randrange(side - 16), rng.randrange(side - 16)
            draw.ellipse((x, y, x + rng.randrange(8, 40), y + rng.randrange(8, 40)), fill=tuple(rng.randrange(256) for _ in range(3)))
        out.append(_png(img))
    return out


#: words rendered into the OCR images.
OCR_PHRASES = ("free money now", "meet me tonight", "buy cheap pills", "great photo", "you idiot", "hello there")


def rendered_images(size_px: int = 18) -> list[str]:
    """Short phrases rendered black on white with Pillow's bundled font, base64 PNG (OCR
    reads them: about 1 s each on one core)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size_px)
    out = []
    for phrase in OCR_PHRASES:
        left, top, right, bottom = font.getbbox(phrase)
        img = Image.new("RGB", (right - left + 20, bottom - top + 20), "white")
        ImageDraw.Draw(img).text((10 - left, 10 - top), phrase, fill="black", font=font)
        out.append(_png(img))
    return out


class RequestMaker:
    """Builds the load's requests: kind drawn with ``image_share`` and ``ocr_share`` (the rest
    text), texts from the demo corpus, images from :func:`drawn_images` / :func:`rendered_images`."""

    def __init__(self, run: str, seed: int, slo_ms: int, image_share: float, ocr_share: float) -> None:
        from workers.demo import demo_texts

        self.run, self.slo_ms = run, slo_ms
        self.image_share, self.ocr_share = image_share, ocr_share
        self.rng = random.Random(seed)
        self.texts = [t for _, t in demo_texts()] or ["hello"]
        self.drawn, self.rendered = drawn_images(seed), rendered_images()

    def kind(self) -> str:
        x = self.rng.random()
        return "ocr" if x < self.ocr_share else "image" if x < self.ocr_share + self.image_share else "text"

    def make(self, i: int, created_ms: int):  # type: ignore[no-untyped-def]
        from schemas.messages import AuditRequest, MediaItem

        kind = self.kind()
        rid = f"{self.run}-{i:06d}-{kind}"
        text: str | None = self.rng.choice(self.texts)
        media = []
        if kind == "image":
            text = text[:80]  # type: ignore[index]
            media = [MediaItem(type="image", data_b64=self.rng.choice(self.drawn), name="drawn.png")]
        elif kind == "ocr":
            text = None
            media = [MediaItem(type="image", data_b64=self.rng.choice(self.rendered), name="words.png")]
        req = AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=created_ms, slo_ms=self.slo_ms, text=text, media=media)
        return Sent(rid, kind, created_ms), req


# ---------------------------------------------------------------- the run


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

    @classmethod
    def quick(cls, **kw: object) -> "ChaosOptions":
        """Under a minute of load: 5 kills, no rolling restart."""
        base: dict[str, object] = dict(kills=5, duration_s=45.0, rolling=(), warmup_s=8.0, tail_s=12.0)
        return cls(**{**base, **kw})  # type: ignore[arg-type]


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

    def __init__(self, options: ChaosOptions, base_settings, say: Callable[[str], None] = print) -> None:  # type: ignore[no-untyped-def]
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

    # -- threads ---------------------------------------------------------------------
    def _reader(self, reader) -> None:  # type: ignore[no-untyped-def]
        while not self._stop_reader.is_set():
            for verdict, arrived in reader.stream(timeout_s=0.5):
                self.progress.record(verdict.request_id, dict(verdict.parts), arrived, self.sent.get(verdict.request_id))

    def _load(self, client, maker: RequestMaker, t0: float) -> None:  # type: ignore[no-untyped-def]
        from engine.clock import now_ms
        from schemas.codec import encode

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
    def _slot(self, fleet, role: str):  # type: ignore[no-untyped-def]
        return next((s for s in list(fleet.slots) if s.role == role), None)

    def _alive_proc(self, fleet, role: str, wait_s: float):  # type: ignore[no-untyped-def]
        """The role's running process, waiting up to ``wait_s`` for the supervisor to restart it."""
        end = time.monotonic() + wait_s
        while True:
            slot = self._slot(fleet, role)
            if slot is not None and slot.proc.poll() is None:
                return slot.proc
            if time.monotonic() >= end:
                return None
            time.sleep(0.1)

    def _send(self, fleet, fault: Fault) -> FaultDone:  # type: ignore[no-untyped-def]
        from engine.clock import now_ms
        from workers.children import signal_group

        proc = self._alive_proc(fleet, fault.role, 10.0)
        if proc is None:
            done = FaultDone(fault, now_ms(), None, note="skipped: not running after 10 s")
        else:
            signal_group(proc, getattr(signal, fault.signal))
            done = FaultDone(fault, now_ms(), proc.pid)
        self.faults.append(done)
        return done

    def _rolling_step(self, fleet, fault: Fault) -> FaultDone:  # type: ignore[no-untyped-def]
        """Wait until the role's current process answers (a rolling restart never stops a process
        still starting), SIGTERM it, wait for the supervisor's new process, then until it answered
        a request sent after it started."""
        from engine.clock import now_ms

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

    def _run_faults(self, fleet, plan: list[Fault], t0: float) -> None:  # type: ignore[no-untyped-def]
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

        from schemas.codec import decode
        from schemas.messages import Verdict
        from topics.catalog import VERDICTS
        from workers.kafka import consumer_config

        consumer = Consumer(consumer_config(self.settings, f"chaos-raw-{uuid.uuid4().hex[:8]}", **{"enable.partition.eof": True}))
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
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                    continue
                key = (m.key() or b"").decode("utf-8", "replace")
                if not key.startswith(self.run_id):
                    continue
                v = decode(m.value(), Verdict)
                out.append(RawVerdict(key, v.complete, v.decision, tuple(sorted(v.parts.items())), tuple(v.reasons), v.decided_at_ms))
        finally:
            consumer.close()
        return out

    def read_client(self) -> tuple[dict[str, int], int]:
        """``audit.verdicts`` read whole through the client (dropping repeats): yields per id, repeats dropped."""
        from workers.client import verdict_reader

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
        from engine.clock import now_ms
        from workers.client import AuditClient, verdict_reader
        from workers.fleet import Fleet

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
        fleet = Fleet(self.settings, config=o.config, log_dir=self.log_dir, env=env, supervise=True,
                      on_event=lambda msg: self.say(f"  fleet: {msg}") if ("restart" in msg or "exited" in msg) else None)
        interrupted = False
        load_s = 0.0
        reader_thread = load_thread = None
        try:
            fleet.start(ready_timeout_s=300)
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
                        time.monotonic() - started, interrupted, repeated)


def write_json(run: ChaosRun, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run.to_json(), indent=1, default=str))
    return path


def fault_line(f: FaultDone, t0_ms: int) -> str:
    """One line of the fault log (for reports)."""
    return f"t={(f.at_ms - t0_ms) / 1000:.1f} s {f.fault.signal} {f.fault.role} pid {f.pid}{' ' + f.note if f.note else ''}"
