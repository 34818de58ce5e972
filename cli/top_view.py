"""``rtaudit top``'s model: one row per worker (role and replica) from its heartbeat on ``audit.status``
and its Prometheus ``/metrics`` (the address its heartbeat names), rates over a sliding window.

Columns: records/s consumed, consumer lag (heartbeat), mean batch size and the batcher's window
(``rtaudit_batch_size``, ``rtaudit_batch_window_seconds``), P50/P99 of the role's latency (model workers:
a batch's inference, ``rtaudit_inference_seconds``; fusion: end to end, ``rtaudit_end_to_end_latency_seconds``),
errors/s (DLQ records and error partials), the versions served, the worst semantic drift, health.
Percentiles are read from histogram buckets over the window, linearly interpolated inside a bucket
(Prometheus' ``histogram_quantile`` rule).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families
from rich.table import Table

from rtaudit.schemas.control import Heartbeat
from rtaudit.cli.control_view import serving_text

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

    def rows(self, beats: Iterable[Heartbeat], now_s: float | None = None) -> list[Row]:
        now_s = time.monotonic() if now_s is None else now_s
        out = []
        for b in sorted(beats, key=lambda b: (b.role, b.worker_id)):
            samples = self.scrape(b.metrics) if b.metrics else None
            out.append(self.row(b, samples, now_s))
        return out

    def row(self, b: Heartbeat, samples: Samples | None, now_s: float) -> Row:
        """``b``'s row, with ``samples`` (this scrape, or ``None``) added to its window."""
        drift = max((d.semantic for d in b.drift if d.semantic is not None), default=None)
        row = Row(b.role, b.worker_id, None, b.lag, None, None, None, None, None, serving_text(b.serving), drift, b.health)
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
        row.records_s = (total(new, "rtaudit_messages_consumed_total") - total(old, "rtaudit_messages_consumed_total")) / dt
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


def table(rows: list[Row], title: str) -> Table:
    """The dashboard as one rich table."""
    t = Table(title=title, title_justify="left")
    for name in ("role", "worker", "rec/s", "lag", "batch", "window ms", "P50 ms", "P99 ms", "err/s"):
        t.add_column(name, justify="left" if name in ("role", "worker") else "right", no_wrap=True)
    t.add_column("versions", max_width=44, no_wrap=True, overflow="ellipsis")  # version strings are long
    t.add_column("drift", justify="right", no_wrap=True)
    t.add_column("health", no_wrap=True)
    for r in rows:
        style = None if r.health == "ok" else ("yellow" if r.health == "loading" else "red")
        t.add_row(r.role, r.worker, _num(r.records_s, ".0f"), "-" if r.lag is None else str(r.lag), _num(r.batch, ".1f"),
                  _num(r.window_ms, ".1f"), _num(r.p50_ms, ".1f"), _num(r.p99_ms, ".1f"), _num(r.errors_s, ".2f"),
                  r.versions or "-", _num(r.drift, ".3f"), r.health, style=style)
    return t
