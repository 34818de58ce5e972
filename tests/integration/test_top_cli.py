"""`rtaudit top --once` against a real embedded broker, at 80 and 160 terminal columns: heartbeats on
audit.status from three control planes (text, ocr, fusion), rates scraped from a real Prometheus
exporter in this process while its counters move. Every line fits the terminal; one line per worker."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from prometheus_client import start_http_server
from rich.cells import cell_len

from rtaudit.schemas.control import DriftStatus, ServingStatus
from rtaudit.workers import metrics
from rtaudit.workers.control import ControlPlane
from rtaudit.workers.settings import Settings

from .conftest import free_port

pytestmark = pytest.mark.integration
LONG_VERSION = "2026-12-04-e7082391+minilm-53aa51172d14-ft4f21344890b3-op17-int8-matmulgather-s8pc7-v2"


def run_top(s: Settings, tmp_path: Path, columns: int, *extra: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k.upper() not in ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS",
                                                                  "RTAUDIT_CONFIG")}
    env.update(RTAUDIT_EMBEDDED_PORT=str(s.embedded_port), RTAUDIT_STATE_DIR=str(s.state_dir), COLUMNS=str(columns),
               LINES="60", XDG_RUNTIME_DIR=str(tmp_path / "run"))
    proc = subprocess.run([sys.executable, "-m", "rtaudit.cli.main", "top", "--once", "--interval", "1.5", *extra], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


def svg_text(svg: str) -> str:
    """The SVG with rich's non-breaking spaces (``&#160;``) read as spaces."""
    return svg.replace("&#160;", " ")


def test_top_fits_80_and_160_columns_with_one_line_per_worker(broker_settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    start_http_server(port, addr="127.0.0.1")  # this process's registry: the fleet's metrics
    s = broker_settings.model_copy(update={"metrics_port": port})
    planes = [ControlPlane(s, role, heartbeat_s=0.5, status=lambda role=role: {
        "serving": [ServingStatus(stage=role, loaded=[LONG_VERSION], weights={LONG_VERSION: 100.0})],
        "lag": 7411 if role == "text" else 0,
        "drift": [DriftStatus(stage=role, tenant="acme", semantic=0.0139, psi={"offensive": 1.01}, windows=53)]}).start()
        for role in ("text", "ocr", "fusion")]
    stop = threading.Event()

    def traffic() -> None:  # records and batches while top scrapes twice
        rng = random.Random(7)
        while not stop.wait(0.01):
            metrics.MESSAGES_CONSUMED.labels("text", "audit.text.lo").inc(32)
            metrics.PARTIALS.labels("text", "ok").inc(32)  # a model worker's rec/s: items scored
            metrics.BATCH_SIZE.labels("text").observe(32)
            metrics.INFERENCE_SECONDS.labels("text", "minilm").observe(rng.uniform(0.02, 0.04))

    feeder = threading.Thread(target=traffic, daemon=True)
    feeder.start()
    try:
        workers = [p.worker_id for p in planes]
        svg = tmp_path / "top.svg"
        for columns, headers in ((80, ("worker", "rec/s", "lag", "P99", "err/s", "health")),
                                 (160, ("worker", "rec/s", "lag", "batch", "window ms", "P50 ms", "P99 ms", "err/s",
                                        "versions", "drift", "last seen", "health"))):  # role: the worker id's prefix
            lines = run_top(s, tmp_path, columns, "--svg", str(svg))
            shot = svg.read_text(encoding="utf-8")  # the screenshot holds the same table
            assert shot.startswith("<svg") and "rtaudit top" in svg_text(shot), shot[:200]
            assert all(p.worker_id in svg_text(shot) for p in planes), shot
            assert max(cell_len(line) for line in lines) <= columns, "\n".join(lines)
            header = next(line for line in lines if " worker " in line and "rec/s" in line)
            assert header.split() == [w for h in headers for w in h.split()] or all(h in header for h in headers), header
            fleet = lines[:next(i for i, line in enumerate(lines) if "drift: semantic alert above" in line)]
            for worker in workers:  # one line per worker, its id whole, with its lag and rate
                (line,) = [line for line in fleet if worker in line]
                assert ("7411" in line) == worker.startswith("text-"), line
            text_line = next(line for line in fleet if workers[0] in line)
            rate = float(text_line.split(workers[0])[1].replace("│", " ").split()[0])
            assert rate > 100, text_line  # ~3200 records/s in the feeder's loop on an idle machine
            assert ("drift: semantic alert above" in "\n".join(lines)) and any("offensive 1.010" in line for line in lines)
            assert "serve no /metrics" not in " ".join(" ".join(lines).split())  # every worker here serves them
            print(f"--- {columns} columns ---\n" + "\n".join(lines))
    finally:
        stop.set()
        feeder.join()
        for p in planes:
            p.stop()


def test_top_says_how_to_get_rates_when_no_worker_serves_metrics(broker_settings: Settings, tmp_path: Path) -> None:
    s = broker_settings.model_copy(update={"metrics_port": 0})  # `rtaudit up`'s default
    plane = ControlPlane(s, "text", heartbeat_s=0.5, status=lambda: {"lag": 3}).start()
    try:
        out = " ".join(" ".join(run_top(s, tmp_path, 200)).split())
        assert plane.worker_id in out
        assert "workers serve no /metrics, so their rates and percentiles read '-': start the fleet with metrics_port set" in out
    finally:
        plane.stop()
