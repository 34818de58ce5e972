"""``rtaudit top``'s model (cli/top_view.py): rates and percentiles from two scrapes of a real
prometheus_client registry, and the row of a worker whose metrics cannot be read."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from rtaudit.schemas.control import DriftStatus, Heartbeat, ServingStatus
from rtaudit.cli.top_view import Scraper, buckets, parse_metrics, quantile, table

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


def beat(role: str = "text", metrics: str | None = "127.0.0.1:1") -> Heartbeat:
    return Heartbeat(worker_id=f"{role}-host-1", role=role, at_ms=1_700_000_000_000, control_offset=3, lag=12,
                     serving=[ServingStatus(stage=role, loaded=["v1"], weights={"v1": 100.0})],
                     drift=[DriftStatus(stage=role, tenant="acme", semantic=0.42, windows=3)], metrics=metrics)


def test_rates_batch_size_and_percentiles_over_the_window() -> None:
    reg = CollectorRegistry()
    scored = Counter("rtaudit_partials", "", ["stage", "status"], registry=reg)
    sizes = Histogram("rtaudit_batch_size", "", ["stage"], buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=reg)
    infer = Histogram("rtaudit_inference_seconds", "", ["stage", "model"], buckets=BUCKETS, registry=reg)
    dlq = Counter("rtaudit_dlq_records", "", ["role", "error_code"], registry=reg)
    window = Gauge("rtaudit_batch_window_seconds", "", ["stage"], registry=reg)
    window.labels("text").set(0.015)
    infer.labels("text", "m").observe(9.0)  # before the window: must not count
    scraper = Scraper()
    scraper.row(beat(), parse_metrics(generate_latest(reg).decode()), now_s=100.0)
    rng = random.Random(3)
    for _ in range(1000):
        scored.labels("text", "ok").inc(32)
        sizes.labels("text").observe(32)
        infer.labels("text", "m").observe(rng.uniform(0.02, 0.04))
    dlq.labels("text", "bad_input").inc(20)
    row = scraper.row(beat(), parse_metrics(generate_latest(reg).decode()), now_s=110.0)
    assert row.records_s == pytest.approx(3200.0)
    assert row.batch == pytest.approx(32.0)
    assert row.errors_s == pytest.approx(2.0)
    assert row.window_ms == pytest.approx(15.0)
    assert 25.0 <= row.p50_ms <= 50.0 and 25.0 <= row.p99_ms <= 50.0  # bucket (0.025, 0.05]
    assert row.p99_ms < 1000.0  # the 9 s observation before the window is not in it
    assert (row.lag, row.drift, row.health, row.versions) == (12, 0.42, "ok", "text v1: 100 %")
    rendered = table([row], "t")
    assert rendered.row_count == 1


def test_a_model_worker_s_rate_is_items_scored_not_records_fetched_into_its_batcher() -> None:
    """A burst is fetched at once (consumed jumps, then stays flat) while the model works through it: the rate
    must follow the partials it publishes, or a busy worker reads 0 rec/s."""
    reg = CollectorRegistry()
    consumed = Counter("rtaudit_messages_consumed", "", ["role", "topic"], registry=reg)
    partials = Counter("rtaudit_partials", "", ["stage", "status"], registry=reg)
    consumed.labels("text", "audit.text.lo").inc(2000)
    scraper = Scraper()
    scraper.row(beat(), parse_metrics(generate_latest(reg).decode()), now_s=100.0)
    partials.labels("text", "ok").inc(900)
    partials.labels("text", "expired").inc(100)
    row = scraper.row(beat(), parse_metrics(generate_latest(reg).decode()), now_s=110.0)
    assert row.records_s == pytest.approx(100.0)


def test_quantile_follows_histogram_quantile() -> None:
    cum = {0.1: 50.0, 0.5: 90.0, 1.0: 100.0, float("inf"): 100.0}
    assert quantile(0.5, cum) == pytest.approx(0.1)
    assert quantile(0.7, cum) == pytest.approx(0.3)
    assert quantile(0.99, cum) == pytest.approx(0.95)
    assert quantile(0.5, {}) is None and quantile(0.5, {1.0: 0.0}) is None
    assert buckets({"x_bucket": {(("le", "1.0"), ("stage", "a")): 2.0, (("le", "1.0"), ("stage", "b")): 3.0}}, "x") == {1.0: 5.0}


def test_a_worker_without_metrics_still_has_a_row() -> None:
    scraper = Scraper()
    (row,) = scraper.rows([beat(metrics="127.0.0.1:9")])  # nothing listens on port 9
    assert row.records_s is None and row.lag == 12 and row.health == "ok"
    (row,) = scraper.rows([beat(metrics=None)])
    assert row.p99_ms is None


def render(t, width: int) -> list[str]:  # type: ignore[no-untyped-def]
    import io

    from rich.console import Console

    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(t)
    return console.export_text().splitlines()


@pytest.mark.parametrize("width, kept, gone", [
    (80, ("worker", "rec/s", "lag", "P99", "err/s", "health"), ("role", "window ms", "versions")),
    (100, ("worker", "batch", "P50", "P99", "versions", "drift", "health"), ("role", "win")),
    (160, ("worker", "batch", "window ms", "P50 ms", "P99 ms", "versions", "drift", "health"), ("role",)),
    (200, ("role", "worker", "batch", "window ms", "P50 ms", "P99 ms", "versions", "drift", "health"), ()),
])
def test_the_table_fits_the_terminal_dropping_columns_in_order(width: int, kept: tuple[str, ...], gone: tuple[str, ...]) -> None:
    rows = [Scraper().row(beat(role, None), None, 0.0) for role in ("audio", "fusion", "ocr", "router", "text", "video")]
    for r in rows:
        r.worker = f"{r.role}-ip-10-0-12-34-16898"
        r.versions = "text 2026-12-04-e7082391+minilm-53aa51172d14-ft4f21344890b3-op17-int8: 100 %"
        r.lag, r.p99_ms, r.records_s = 7411, 59700.0, 185.0
    lines = render(table(rows, "rtaudit top — 127.0.0.1:58475 — 6 workers", width), width)
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    header = next(line for line in lines if "worker" in line and "rec/s" in line).replace("┃", " ")
    assert all(f" {h} " in header for h in kept) and not any(f" {h} " in header for h in gone), header
    for r in rows:  # one line per worker: its id whole, its lag and P99 beside it
        (line,) = [line for line in lines if r.worker in line]
        assert "7411" in line and "59700.0" in line, line


def test_the_narrow_caption_names_only_the_millisecond_columns_shown() -> None:
    from rtaudit.cli.top_view import _ms_caption

    assert _ms_caption(["worker", "P50 ms", "P99 ms", "window ms"]) == "P50, P99 and win in ms"
    assert _ms_caption(["worker", "rec/s", "P99 ms"]) == "P99 in ms"
    assert _ms_caption(["worker", "P50 ms", "P99 ms"]) == "P50 and P99 in ms"
    assert _ms_caption(["worker", "lag"]) is None


def test_a_long_text_model_version_keeps_its_cascade_profile_in_view() -> None:
    """The versions column cut the text model's version at its end, where its cascade profile is."""
    version = ("2026-12-04-e7082391+minilm-53aa51172d14-ft4f21344890b3-op17-int8+apc-0.2.14+ml-3c1f0e2a"
               "+e5-small-q4-9d8e7f6a+cascade-balanced")
    b = beat().model_copy(update={"serving": [ServingStatus(stage="text", loaded=[version], weights={version: 100.0})]})
    row = Scraper().row(b, None, 0.0)
    (line,) = [line for line in render(table([row], "t", 200), 200) if "text-host-1" in line]
    assert "+cascade-balanced: 100 %" in line and "text 2026-12-04-e" in line, line


def test_a_worker_that_stopped_beating_reads_stale_with_its_age() -> None:
    """A worker killed with kill -9 read "ok" until its heartbeat expired (30 s)."""
    now = 1_700_000_000_000 + 12_000  # beat() was sent 12 s before
    stale = Scraper().row(beat(), None, 0.0, now_ms=now)
    fresh = Scraper().row(beat("ocr"), None, 0.0, now_ms=now - 11_000)
    assert (stale.health, stale.seen_s, fresh.health, fresh.seen_s) == ("stale", 12.0, "ok", 1.0)
    assert Scraper().row(beat(), None, 0.0).health == "ok"  # not aged without a clock
    wide = render(table([fresh, stale], "t", 200), 200)
    assert "last seen" in wide[2] and "1 s ago" in next(line for line in wide if "ocr-host-1" in line)
    for width in (80, 200):  # the health column always stays: at 80 columns it says how long
        (line,) = [line for line in render(table([fresh, stale], "t", width), width) if "text-host-1" in line]
        assert "stale 12 s" in line, line


@pytest.mark.parametrize("worker_chars", [15, 26, 40])
def test_at_80_columns_the_caption_names_the_millisecond_columns_the_header_shows(worker_chars: int) -> None:
    """The narrow caption once said "P50, P99 and win in ms" with no win column in sight."""
    rows = [Scraper().row(beat(role, None), None, 0.0) for role in ("fusion", "ocr", "router", "text")]
    for r in rows:
        r.worker = (r.role + "-" + "h" * 60)[:worker_chars]
        r.window_ms, r.p50_ms, r.p99_ms, r.records_s, r.errors_s = 15.0, 1234.5, 59700.0, 185.0, 0.25
    lines = render(table(rows, "rtaudit top", 80), 80)
    header = next(line for line in lines if " worker " in line and " lag " in line)
    caption = lines[-1] if lines[-1].strip() else lines[-2]
    named = [short for short in ("P50", "P99", "win") if f" {short} " in f" {caption.strip()} "]
    assert named == [short for short in ("P50", "P99", "win") if f" {short} " in f"{header} "], (header, caption)
