"""What ``rtaudit control`` prints and parses, without Kafka: heartbeat tables, the subjects in
force, the history of ``audit.control``, the flags of a worker that serves another version
than the one in force, relative and ISO 8601 times, and the payloads the commands publish.

Everything here is pure (time is passed in, records are plain tuples), so it is unit-tested
without a broker (``tests/unit/test_cli_control.py``); :mod:`rtaudit.cli.control` reads the
topics and calls it.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from rtaudit.engine.control import ControlState, Rejected, parse
from rtaudit.engine.policy import KNOWN_CATEGORIES, TenantPolicy
from rtaudit.engine.rollout import next_step, phase_for
from rtaudit.schemas.control import (
    CONTROL_STAGES,
    BundleRef,
    HEARTBEAT_S,
    ControlMessage,
    Heartbeat,
    ModelPayload,
    BreakerPayload,
    PolicyPayload,
    PriorityPayload,
    RolloutPayload,
)

#: a heartbeat older than this is a worker that is gone, ms.
GONE_AFTER_MS = 30_000
#: a heartbeat older than this marks its worker ``stale`` (killed, hung) until it is gone: two heartbeat
#: intervals (:data:`rtaudit.schemas.control.HEARTBEAT_S`) and a second for delivery, ms.
STALE_AFTER_MS = int(2 * HEARTBEAT_S * 1000) + 1000
#: a worker may serve another version than the one in force this long after the change, ms.
CONVERGE_MS = 10_000
#: longest version the fleet table shows, characters (a longer one is elided in the middle: :func:`short_version`).
VERSION_WIDTH = 40
#: two traffic shares closer than this are the same, percentage points.
WEIGHT_TOLERANCE = 0.5

_DURATION = re.compile(r"^\+\s*((?:\d+(?:\.\d+)?\s*(?:ms|s|m|h|d)\s*)+)$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def one_line(exc: ValidationError) -> str:
    """A pydantic error as one line: ``field: message; ...`` (at most 3)."""
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()[:3])


# ---------------------------------------------------------------------------------------- parsing

def parse_time(text: str, now_ms: int) -> int:
    """Epoch ms of ``text``: a delay from ``now_ms`` (``+10m``, ``+90s``, ``+1h30m``, ``+2d``; units
    ms, s, m, h, d) or an ISO 8601 time (``2026-05-01T14:00Z``; without an offset it is local time).

    Raises:
        ValueError: neither form (the message names both).
    """
    text = text.strip()
    if text.startswith("+"):
        m = _DURATION.match(text)
        if m is None:
            raise ValueError(f"{text!r} is not a delay: write +10m, +90s, +1h30m or +2d (units ms, s, m, h, d)")
        return now_ms + round(sum(float(n) * _UNIT_MS[u] for n, u in _DURATION_PART.findall(m.group(1))))
    try:
        from dateutil.parser import isoparse  # python-dateutil (a dependency of matplotlib)
    except ImportError:  # pragma: no cover
        isoparse = datetime.fromisoformat
    try:
        when = isoparse(text)
    except (ValueError, OverflowError):
        raise ValueError(f"{text!r} is neither an ISO 8601 time (2026-05-01T14:00Z) nor a delay (+10m)") from None
    return round(when.astimezone().timestamp() * 1000)  # a naive time is local time




def policy_categories(policy: TenantPolicy) -> tuple[list[str], list[str]]:
    """``(unknown, unflagged)``: the policy's threshold categories no stage scores, and the known
    categories it has no threshold for (they never flag under it), each sorted."""
    unknown = sorted(set(policy.thresholds) - set(KNOWN_CATEGORIES))
    unflagged = sorted(set(KNOWN_CATEGORIES) - set(policy.thresholds))
    return unknown, unflagged


def read_policy(path: Path) -> TenantPolicy:
    """A :class:`TenantPolicy` from a TOML (``.toml``) or JSON file of its fields.

    Raises:
        ValueError: unreadable file, bad syntax or a bad field (one line).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON (use a .toml name for TOML)"
        raise ValueError(f"{path}: not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a table of TenantPolicy fields, got {type(data).__name__}")
    if not data:
        raise ValueError(f"{path}: empty policy file (to send the tenant back to rtaudit.toml's policy: "
                         f"`rtaudit control policy clear TENANT`)")
    try:
        return TenantPolicy.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"{path}: {one_line(exc)}") from None


def find_bundle(refs: Iterable[BundleRef], stage: str, version: str) -> BundleRef:
    """The ref of ``stage`` ``version`` among ``refs`` (a store's listing). Raises ``LookupError``."""
    refs = [r for r in refs if r.stage == stage]
    for r in refs:
        if r.version == version:
            return r
    have = ", ".join(r.version for r in refs) or "none"
    raise LookupError(f"no {stage} bundle {version} in the store ({stage} versions there: {have}); "
                      "`rtaudit model publish BUNDLE_DIR` puts one there")


# ---------------------------------------------------------------------------------------- rollouts

def promote_plan(stage: str, rollout: RolloutPayload | None) -> list[tuple[str, Any, str]]:
    """The records ``rollout promote`` publishes, in order: ``[(subject, payload, reason)]``: the
    next step (5 → 50 → 100 %), or at 100 % ``model:<stage>`` = candidate then the rollout as
    ``promoted``. Raises ``ValueError`` when no rollout of ``stage`` is active."""
    if rollout is None or not rollout.active:
        raise ValueError(f"no active rollout of {stage}" + (f" (the last one is {rollout.phase})" if rollout else "")
                         + ": `rtaudit control rollout start` begins one")
    step = next_step(rollout.weight_pct)
    if step is None:
        return [(f"model:{stage}", ModelPayload(bundle=rollout.candidate), f"promoted {rollout.candidate.version}"),
                (f"rollout:{stage}", rollout.model_copy(update={"weight_pct": 0.0, "phase": "promoted"}),
                 f"promoted {rollout.candidate.version} at 100 %")]
    return [(f"rollout:{stage}", rollout.model_copy(update={"weight_pct": step, "phase": phase_for(step)}),
             f"step to {step:g} %")]


def stop_payload(stage: str, rollout: RolloutPayload | None, phase: str) -> RolloutPayload:
    """The rollout at weight 0 in ``phase`` (``rolled_back`` | ``aborted``). Raises ``ValueError``
    when no rollout of ``stage`` is active."""
    if rollout is None or not rollout.active:
        raise ValueError(f"no active rollout of {stage} to stop" + (f" (the last one is {rollout.phase})" if rollout else ""))
    return rollout.model_copy(update={"weight_pct": 0.0, "phase": phase})


# ---------------------------------------------------------------------------------------- display

def when(ms: int) -> str:
    """``2026-05-01 12:00:00Z`` (UTC)."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def age(ms: int, now_ms: int) -> str:
    """``12 s``, ``5 min``, ``3.0 h``, ``2.0 d`` since ``ms``."""
    s = max(0.0, (now_ms - ms) / 1000)
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h" if s < 172_800 else f"{s / 86400:.1f} d"


def seen(ms: int, now_ms: int) -> str:
    """``3 s ago``, ``5 min ago``: when a heartbeat sent at ``ms`` was (:func:`age`)."""
    return f"{age(ms, now_ms)} ago"


def health(beat: Heartbeat, now_ms: int) -> str:
    """``beat``'s worker's health at ``now_ms``: ``stale`` when the heartbeat is older than
    :data:`STALE_AFTER_MS` (the worker stopped beating: killed, hung), else the health it reported
    (``ok``, ``loading``, ``degraded``)."""
    return "stale" if now_ms - beat.at_ms > STALE_AFTER_MS else beat.health


def _pct(x: float) -> str:
    return f"{x:g} %"


def summary(msg: ControlMessage, now_ms: int) -> str:
    """One line on what ``msg`` sets."""
    p = msg.payload
    if isinstance(p, ModelPayload):
        return f"{p.bundle.version} ({p.bundle.sha256[:12]})"
    if isinstance(p, RolloutPayload):
        stable = p.stable.version if p.stable else "built-in"
        if p.phase == "promoted":
            return f"{p.candidate.version} promoted (replaced {stable}; now model:{p.candidate.stage})"
        return (f"{stable} → {p.candidate.version} at {_pct(p.weight_pct)}, {p.phase}{', shadow' if p.shadow else ''}")
    if isinstance(p, PolicyPayload):
        q = p.policy.quota
        return (f"lane {p.policy.lane}, SLO {p.policy.slo_ms} ms, on_incomplete {p.policy.on_incomplete}, "
                f"{len(p.policy.thresholds)} thresholds" + (f", quota {q.rate_per_s:g}/s" if q.rate_per_s else ""))
    if isinstance(p, BreakerPayload):
        return f"{'TRIPPED' if p.tripped else 'armed'}: {p.action.replace('_', ' ')}"
    assert isinstance(p, PriorityPayload)
    parts = [f"lane {p.lane}" if p.lane else "", f"SLO {p.slo_ms} ms" if p.slo_ms else "",
             f"quota {p.quota.rate_per_s:g}/s" if p.quota else ""]
    if p.until_ms is not None:
        parts.append(f"until {when(p.until_ms)}" + (" (expired)" if p.until_ms <= now_ms else ""))
    return ", ".join(x for x in parts if x) or "no override"


def subject_rows(state: ControlState, now_ms: int) -> list[tuple[str, str, str, str, str]]:
    """``(subject, version, author, age, summary)`` per subject in force, by subject."""
    return [(s, str(m.version), m.author, age(m.at_ms, now_ms), summary(m, now_ms))
            for s, m in sorted(state.messages.items())]


@dataclass(frozen=True)
class InForce:
    """What every worker of ``stage`` should serve: version → share in percent; the key ``None``
    is the built-in model (whatever name the worker gives it); ``changed_at_ms`` is the last change."""

    stage: str
    weights: dict[str | None, float]
    changed_at_ms: int

    def describe(self) -> str:
        return ", ".join(f"{v or 'built-in'}: {_pct(w)}" for v, w in self.weights.items() if w > 0)


def in_force(state: ControlState, stage: str) -> InForce | None:
    """What the control topic puts in force for ``stage``, or ``None`` when it names nothing
    (the built-in model, nothing to compare)."""
    model, rollout = state.messages.get(f"model:{stage}"), state.messages.get(f"rollout:{stage}")
    if model is None and rollout is None:
        return None
    changed = max(m.at_ms for m in (model, rollout) if m is not None)
    r = rollout.payload if rollout is not None and isinstance(rollout.payload, RolloutPayload) else None
    stable: str | None = model.payload.bundle.version if model is not None and isinstance(model.payload, ModelPayload) else None
    if r is not None and r.active:
        if r.stable is not None:
            stable = r.stable.version
        weight = 0.0 if r.shadow else r.weight_pct
        weights: dict[str | None, float] = {stable: 100.0 - weight}
        weights[r.candidate.version] = weights.get(r.candidate.version, 0.0) + weight
        return InForce(stage, weights, changed)
    return InForce(stage, {stable: 100.0}, changed)


def mismatch(served: dict[str, float], expected: InForce, bundles: set[str]) -> bool:
    """True when ``served`` (a heartbeat's version → share) is not ``expected``; ``bundles`` are the
    version names the control topic knows, which the built-in model is not."""
    left = {v: w for v, w in served.items() if w > 0}
    for version, w in expected.weights.items():
        if version is None or w <= 0:
            continue
        if abs(left.pop(version, 0.0) - w) > WEIGHT_TOLERANCE:
            return True
    builtin = expected.weights.get(None, 0.0)
    if builtin <= 0:
        return bool(left)
    return len(left) != 1 or next(iter(left)) in bundles or abs(next(iter(left.values())) - builtin) > WEIGHT_TOLERANCE


def _bundle_names(state: ControlState) -> set[str]:
    names = set()
    for m in state.messages.values():
        if isinstance(m.payload, ModelPayload):
            names.add(m.payload.bundle.version)
        elif isinstance(m.payload, RolloutPayload):
            names.update(r.version for r in (m.payload.stable, m.payload.candidate) if r is not None)
    return names


def flags(beat: Heartbeat, state: ControlState, now_ms: int) -> list[str]:
    """Why ``beat``'s worker needs a look: it serves another mix of versions than the one in force
    more than :data:`CONVERGE_MS` after that stage's last change, a bundle failed to load, or it
    rejected control records, or it stopped beating (:func:`health`)."""
    out, names = [], _bundle_names(state)
    if health(beat, now_ms) == "stale":
        out.append(f"no heartbeat for {age(beat.at_ms, now_ms)} (one every {HEARTBEAT_S:g} s): killed or hung? "
                   f"gone after {GONE_AFTER_MS // 1000} s")
    for s in beat.serving:
        if s.stage in CONTROL_STAGES:
            expected = in_force(state, s.stage)
            if (expected is not None and now_ms - expected.changed_at_ms > CONVERGE_MS
                    and mismatch(s.weights, expected, names)):
                out.append(f"{s.stage}: serves {weights_text(s.weights) or 'nothing'}, in force {expected.describe()} "
                           f"since {age(expected.changed_at_ms, now_ms)}")
        out += [f"{s.stage} {v} failed: {why}" for v, why in s.failed.items()]
    if beat.health != "ok" and beat.detail:
        out.append(beat.detail)
    return out


def short_version(version: str, width: int) -> str:
    """``version`` in at most ``width`` characters (5 at least), elided with ``…``. A model version made of
    ``+``-joined parts (the text model's ``<manifest>+minilm-...+cascade-<profile>``) keeps its last part,
    the cascade profile: whole, after as much of its start as fits (whole parts where they do), else its
    end alone. A version without such parts keeps its two ends."""
    width = max(5, width)
    if len(version) <= width:
        return version
    parts = version.split("+")
    if len(parts) < 2 or not parts[0]:
        return version[: width // 2] + "…" + version[len(version) - (width - 1 - width // 2):]
    tail = f"+{parts[-1]}"
    if len(tail) >= width:
        return "…" + version[len(version) - (width - 1):]
    for k in range(len(parts) - 2, 0, -1):  # whole parts of the start where they fit: 2026-12-04-e70823+…+cascade-fast
        head = "+".join(parts[:k]) + "+"
        if len(head) + 1 + len(tail) <= width:
            return head + "…" + tail
    return version[: width - 1 - len(tail)] + "…" + tail


def fit_versions(text: str, width: int, floor: int = 12) -> str:
    """``text`` (:func:`serving_text`, or any text naming versions between spaces) in ``width`` characters
    where it can be: its words longer than some length (the versions) cut to it by :func:`short_version`,
    trailing ``:``, ``,`` or ``;`` kept, the length as large as fits but not under ``floor``; a text that
    does not fit even so comes back with its words at ``floor`` characters."""
    if len(text) <= width:
        return text
    words = text.split(" ")
    cores = [w.rstrip(":,;") for w in words]
    room = width - (len(text) - sum(len(c) for c in cores))
    cap = max(len(c) for c in cores)
    while cap > floor and sum(min(len(c), cap) for c in cores) > room:
        cap -= 1
    return " ".join(short_version(c, cap) + w[len(c):] for c, w in zip(cores, words))


def weights_text(weights: dict[str, float], version_width: int | None = None) -> str:
    """``v1: 95 %, v2: 5 %``; with ``version_width``, each version cut to it (:func:`short_version`)."""
    return ", ".join(f"{v if version_width is None else short_version(v, version_width)}: {_pct(round(w, 2))}"
                     for v, w in weights.items())


def serving_text(serving: Iterable[Any], version_width: int | None = None) -> str:
    """``text v1: 95 %, v2: 5 %`` per stage (:class:`rtaudit.schemas.control.ServingStatus`), ``;``-separated;
    with ``version_width``, each version cut to it (:func:`short_version`)."""
    return "; ".join(f"{s.stage} {weights_text(s.weights, version_width)}" for s in serving)


def live_heartbeats(beats: Iterable[Heartbeat], now_ms: int, gone_after_ms: int = GONE_AFTER_MS) -> dict[str, Heartbeat]:
    """The latest heartbeat per worker id, without workers whose latest is older than ``gone_after_ms``."""
    latest: dict[str, Heartbeat] = {}
    for b in beats:
        if b.worker_id not in latest or b.at_ms >= latest[b.worker_id].at_ms:
            latest[b.worker_id] = b
    return {w: b for w, b in latest.items() if now_ms - b.at_ms <= gone_after_ms}


@dataclass(frozen=True)
class WorkerRow:
    """One line of the fleet table."""

    worker: str
    role: str
    age_s: float
    control_offset: str
    health: str
    serving: str
    loaded: str
    rejected: int
    lag: str
    flags: list[str] = field(default_factory=list)

    def cells(self) -> list[str]:
        return [self.worker, self.role, f"{self.age_s:.1f} s ago", self.control_offset, self.health, self.serving,
                self.loaded, str(self.rejected), self.lag, "; ".join(self.flags)]


def worker_rows(beats: dict[str, Heartbeat], state: ControlState, now_ms: int) -> list[WorkerRow]:
    """The fleet table, by role then worker id: the heartbeat's age in seconds, health ``stale`` past
    :data:`STALE_AFTER_MS` (:func:`health`); the control offset reads ``N`` (caught up) or ``N/M behind``;
    versions longer than :data:`VERSION_WIDTH` are elided in the middle (:func:`short_version`)."""
    rows = []
    for b in sorted(beats.values(), key=lambda b: (b.role, b.worker_id)):
        offset = str(b.control_offset) if b.control_offset >= state.offset else f"{b.control_offset}/{state.offset}"
        loaded = "; ".join(f"{s.stage} {', '.join(short_version(v, VERSION_WIDTH) for v in s.loaded)}"
                           for s in b.serving if s.loaded)
        rows.append(WorkerRow(b.worker_id, b.role, max(0.0, (now_ms - b.at_ms) / 1000), offset, health(b, now_ms),
                              serving_text(b.serving, VERSION_WIDTH), loaded, b.rejected, "" if b.lag is None else str(b.lag),
                              flags(b, state, now_ms)))
    return rows


def fleet_table(live: dict[str, Heartbeat], state: ControlState, now_ms: int) -> Table:
    """``rtaudit control status``'s table of the workers ``live`` (:func:`live_heartbeats`): one
    :func:`worker_rows` row each, red when flagged; a version wider than its column folds onto the next
    line (its end, the cascade profile, stays in view)."""
    table = Table(title=f"fleet: {len(live)} workers with a heartbeat in the last {GONE_AFTER_MS // 1000} s; "
                        f"audit.control at offset {state.offset}")
    for header in ("worker", "role", "last seen", "control offset", "health"):
        table.add_column(header)
    for header in ("serving (version: weight)", "loaded"):  # a version wider than its column folds: its end shows
        table.add_column(header, overflow="fold")
    for header in ("rejected", "lag", "flags"):
        table.add_column(header)
    for row in worker_rows(live, state, now_ms):
        table.add_row(*map(escape, row.cells()), style="red" if row.flags else None)
    return table


# ---------------------------------------------------------------------------------------- history

#: one record of ``audit.control``: offset, Kafka timestamp ms (or None), key, value.
Record = tuple[int, "int | None", "bytes | None", "bytes | None"]


@dataclass(frozen=True)
class HistoryRow:
    """One record of ``audit.control`` as the history prints it."""

    offset: int
    time: str
    subject: str
    version: str
    expects: str
    author: str
    reason: str
    result: str
    accepted: bool

    def cells(self) -> list[str]:
        return [str(self.offset), self.time, self.subject, self.version, self.expects, self.author, self.reason, self.result]


def history_rows(records: Iterable[Record], subject: str | None = None, limit: int = 0) -> list[HistoryRow]:
    """Every record in offset order, re-applied to a fresh :class:`ControlState` to say whether it
    was accepted; only ``subject``'s when given; the last ``limit`` rows (0: all)."""
    state, rows = ControlState(), []
    for offset, ts, key, value in records:
        result = state.apply(offset, key, value)
        msg = None
        if value is not None:
            try:
                msg = parse(key, value)
            except ValueError:
                pass
        name = msg.subject if msg is not None else (key.decode("utf-8", "replace") if key is not None else "")
        if subject is not None and name != subject:
            continue
        if isinstance(result, Rejected):
            verdict = f"rejected: {result.code}: {result.message}"
        else:
            verdict = "accepted" if value is not None else "accepted: tombstone (back to rtaudit.toml)"
        at = msg.at_ms if msg is not None else ts
        rows.append(HistoryRow(offset, when(at) if at is not None else "", name,
                               str(msg.version) if msg else "", str(msg.expects) if msg else "",
                               msg.author if msg else "", (msg.reason or "") if msg else "",
                               verdict, not isinstance(result, Rejected)))
    return rows[-limit:] if limit > 0 else rows
