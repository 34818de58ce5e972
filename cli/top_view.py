"""``rtaudit top``'s model: one row per worker (role and replica) from its heartbeat on ``audit.status``
and its Prometheus ``/metrics`` (the address its heartbeat names), rates over a sliding window.

Columns: records/s consumed, consumer lag (heartbeat), mean batch size and the batcher's window
(``rtaudit_batch_size``, ``rtaudit_batch_window_seconds``), P50/P99 of the role's latency (model workers:
a batch's inference, ``rtaudit_inference_seconds``; fusion: end to end, ``rtaudit_end_to_end_latency_seconds``),
errors/s (DLQ records and error partials), the versions served, the worst semantic drift, how long ago
the heartbeat was sent, health (``stale`` once the worker stopped beating: :func:`rtaudit.cli.control_view.health`).
Percentiles are read from histogram buckets over the window, linearly interpolated inside a bucket
(Prometheus' ``histogram_quantile`` rule).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from rtaudit.schemas.control import Heartbeat
from rtaudit.cli.control_view import fit_versions, health, serving_text

#: seconds of scrapes the rates and percentiles are computed over.
WINDOW_S = 10.0
#: timeout of one /metrics scrape, s.
SCRAPE_TIMEOUT_S = 0.5

#: a scrape: metric sample name → labels (sorted tuple) → value.
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parse_metrics(text: str) -> Samples:
    """Prometheus text exposition → samples by name (``_total``, ``_bucket``... names as exposed)."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def total(samples: Samples, name: str, **match: str) -> float:
    """Sum of ``name``'s samples whose labels include ``match``."""
    return sum(v for labels, v in samples.get(name, {}).items() if all((k, val) in labels for k, val in match.items()))


def buckets(samples: Samples, name: str) -> dict[float, float]:
    """``le`` → cumulative count of the histogram ``name`` (``<name>_bucket``), summed over other labels."""
    out: dict[float, float] = {}
    for labels, v in samples.get(f"{name}_bucket", {}).items():
        le = float(dict(labels)["le"])
        out[le] = out.get(le, 0.0) + v
    return out


def quantile(q: float, cumulative: dict[float, float]) -> float | None:
    """``histogram_quantile(q, ...)`` of cumulative bucket counts (``None`` without observations)."""
    les = sorted(cumulative)
    if not les or cumulative[les[-1]] <= 0:
        return None
    rank = q * cumulative[les[-1]]
    prev_le, prev_count = 0.0, 0.0
    for le in les:
        count = cumulative[le]
        if count >= rank:
            if math.isinf(le):
                return prev_le
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return les[-1]


@dataclass
class Row:
    """One worker's line."""

    role: str
    worker: str
    records_s: float | None
    lag: int | None
    batch: float | None
    window_ms: float | None
    p50_ms: float | None
    p99_ms: float | None
    errors_s: float | None
    versions: str
    drift: float | None
    health: str
    seen_s: float | None = None  # seconds since the heartbeat was sent (None: not known)


class Scraper:
    """The workers' /metrics, scraped on each :meth:`rows` call, kept for :data:`WINDOW_S`."""

    def __init__(self, client: httpx.Client | None = None) -> None:
        self.client = client or httpx.Client(timeout=SCRAPE_TIMEOUT_S)
        self.history: dict[str, deque[tuple[float, Samples]]] = {}

    def scrape(self, addr: str) -> Samples | None:
        host, _, port = addr.rpartition(":")
        host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        try:
            r = self.client.get(f"http://{host}:{port}/metrics")
            r.raise_for_status()
        except httpx.HTTPError:
            return None
        return parse_metrics(r.text)

    def rows(self, beats: Iterable[Heartbeat], now_s: float | None = None, now_ms: int | None = None) -> list[Row]:
        """A row per heartbeat, by role then worker id (:meth:`row`), each worker's /metrics scraped now;
        ``now_s``: monotonic seconds (default: now), ``now_ms``: epoch ms the heartbeats are aged against."""
        now_s = time.monotonic() if now_s is None else now_s
        out = []
        for b in sorted(beats, key=lambda b: (b.role, b.worker_id)):
            samples = self.scrape(b.metrics) if b.metrics else None
            out.append(self.row(b, samples, now_s, now_ms))
        return out

    def row(self, b: Heartbeat, samples: Samples | None, now_s: float, now_ms: int | None = None) -> Row:
        """``b``'s row, with ``samples`` (this scrape, or ``None``) added to its window. With ``now_ms``
        (epoch ms), the heartbeat's age and, past :data:`rtaudit.cli.control_view.STALE_AFTER_MS`, health
        ``stale``; without it, neither (the health the worker reported)."""
        drift = max((d.semantic for d in b.drift if d.semantic is not None), default=None)
        row = Row(b.role, b.worker_id, None, b.lag, None, None, None, None, None, serving_text(b.serving), drift,
                  b.health if now_ms is None else health(b, now_ms), None if now_ms is None else max(0.0, (now_ms - b.at_ms) / 1000))
        if samples is None:
            return row
        hist = self.history.setdefault(b.worker_id, deque())
        hist.append((now_s, samples))
        while len(hist) > 2 and now_s - hist[1][0] >= WINDOW_S:
            hist.popleft()
        window = total(samples, "rtaudit_batch_window_seconds")
        row.window_ms = window * 1000 if "rtaudit_batch_window_seconds" in samples else None
        if len(hist) < 2:
            return row
        (t0, old), (t1, new) = hist[0], hist[-1]
        dt = max(t1 - t0, 1e-9)
        # model workers: items scored (a fetched record waits in the batcher first); the others handle what they consume
        done = "rtaudit_messages_consumed_total" if b.role in ("router", "fusion", "explain") else "rtaudit_partials_total"
        row.records_s = (total(new, done) - total(old, done)) / dt
        row.errors_s = (_errors(new) - _errors(old)) / dt
        n = total(new, "rtaudit_batch_size_count") - total(old, "rtaudit_batch_size_count")
        if n > 0:
            row.batch = (total(new, "rtaudit_batch_size_sum") - total(old, "rtaudit_batch_size_sum")) / n
        name = "rtaudit_end_to_end_latency_seconds" if b.role == "fusion" else "rtaudit_inference_seconds"
        new_b, old_b = buckets(new, name), buckets(old, name)
        delta = {le: c - old_b.get(le, 0.0) for le, c in new_b.items()}
        for q, attr in ((0.5, "p50_ms"), (0.99, "p99_ms")):
            v = quantile(q, delta)
            setattr(row, attr, None if v is None else v * 1000)
        return row


def _errors(s: Samples) -> float:
    return total(s, "rtaudit_dlq_records_total") + total(s, "rtaudit_partials_total", status="error")


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


@dataclass(frozen=True)
class Column:
    """A column of the dashboard: its header (and the short one of a narrow terminal), whether it is
    right-aligned, and its row cell."""

    header: str
    short: str
    right: bool
    cell: Callable[[Row], str]


COLUMNS: dict[str, Column] = {c.header: c for c in (
    Column("role", "role", False, lambda r: r.role),
    Column("worker", "worker", False, lambda r: r.worker),
    Column("rec/s", "rec/s", True, lambda r: _num(r.records_s, ".0f")),
    Column("lag", "lag", True, lambda r: "-" if r.lag is None else str(r.lag)),
    Column("batch", "batch", True, lambda r: _num(r.batch, ".1f")),
    Column("window ms", "win", True, lambda r: _num(r.window_ms, ".1f")),
    Column("P50 ms", "P50", True, lambda r: _num(r.p50_ms, ".1f")),
    Column("P99 ms", "P99", True, lambda r: _num(r.p99_ms, ".1f")),
    Column("err/s", "err/s", True, lambda r: _num(r.errors_s, ".2f")),
    Column("versions", "versions", False, lambda r: r.versions or "-"),
    Column("drift", "drift", True, lambda r: _num(r.drift, ".3f")),
    Column("last seen", "seen", True, lambda r: "-" if r.seen_s is None else f"{r.seen_s:.0f} s ago"),
    Column("health", "health", False, lambda r: f"stale {r.seen_s:.0f} s" if r.health == "stale" and r.seen_s is not None
           else r.health),
)}
#: terminals narrower than this get short headers, a borderless table and the unit in a caption.
NARROW_BELOW = 120
#: widest and narrowest the versions column gets, characters: longer versions are elided in the middle
#: (:func:`rtaudit.cli.control_view.fit_versions`: the cascade profile at their end stays in view).
VERSIONS_MAX, VERSIONS_MIN = 44, 12
#: what gives way, in order, when the table is wider than the terminal (as htop and k9s drop columns):
#: the role (the worker id starts with it), the heartbeat's age (a stale worker's health cell says it),
#: the versions column shrinks, then whole columns go. The worker, rec/s, lag, P99 and health columns always stay.
GIVE_WAY = ("role", "last seen", "-versions", "window ms", "batch", "versions", "drift", "P50 ms", "err/s")


def table(rows: list[Row], title: str, width: int | None = None) -> Table:
    """The dashboard as one rich table, ``width`` columns wide at most (``None``: every column, as wide
    as its content). Narrow terminals drop and shorten columns in the order of :data:`GIVE_WAY`, each
    row on one line."""
    narrow = width is not None and width < NARROW_BELOW
    shown, versions_max, dropped = list(COLUMNS), VERSIONS_MAX, []
    for step in GIVE_WAY:
        excess = 0 if width is None else _natural_width(_table(rows, title, shown, versions_max, narrow)) - width
        if excess <= 0:
            break
        if step == "-versions":
            versions_max = max(VERSIONS_MIN, versions_max - excess)
        else:
            shown.remove(step)
            dropped.append(step)
    for name in reversed(dropped):  # a column dropped early may fit beside the ones kept (batch once versions went)
        trial = [c for c in COLUMNS if c in shown or c == name]
        if width is not None and _natural_width(_table(rows, title, trial, versions_max, narrow)) <= width:
            shown = trial
    return _table(rows, title, shown, versions_max, narrow)


def _natural_width(renderable: Table) -> int:
    """Cells ``renderable`` takes when nothing limits it (rich's measurement, its maximum)."""
    wide = Console(width=10_000)
    return Measurement.get(wide, wide.options, renderable).maximum


def _ms_caption(shown: list[str]) -> str | None:
    """The narrow table's unit note, naming only the millisecond columns it still shows."""
    names = [short for col, short in (("P50 ms", "P50"), ("P99 ms", "P99"), ("window ms", "win")) if col in shown]
    if not names:
        return None
    return f"{' and '.join(names) if len(names) < 3 else ', '.join(names[:-1]) + ' and ' + names[-1]} in ms"


def _table(rows: list[Row], title: str, shown: list[str], versions_max: int, narrow: bool) -> Table:
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD,
              pad_edge=not narrow, collapse_padding=narrow,
              caption=_ms_caption(shown) if narrow else None, caption_justify="left")
    for name in shown:
        col = COLUMNS[name]
        t.add_column(col.short if narrow else col.header, justify="right" if col.right else "left", no_wrap=True,
                     overflow="ellipsis", max_width=versions_max if name == "versions" else None)
    for r in rows:
        style = None if r.health == "ok" else ("yellow" if r.health == "loading" else "red")
        t.add_row(*(fit_versions(COLUMNS[name].cell(r), versions_max, floor=8) if name == "versions"
                    else COLUMNS[name].cell(r) for name in shown), style=style)
    return t
