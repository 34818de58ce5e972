"""The prepared GPU device check (benchmarks/gpu/): its CPU dry run end to end, and its table."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_check():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("device_check", ROOT / "benchmarks" / "gpu" / "device_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.integration
@pytest.mark.timeout(720)  # the fleet section's bench may take its whole 120 s budget, start-up included, on a loaded machine
def test_cpu_dry_run_exercises_every_section(tmp_path: Path) -> None:
    """``run.sh --cpu``: every model timed on CPU, the text worker fed through the real fleet on the
    embedded broker, the table and the JSON written under $OUT."""
    env = {**os.environ, "OUT": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu" / "run.sh"), "--cpu", "--batches", "1,2",
                           "--min-seconds", "0.05", "--fleet-seconds", "120"],
                          env=env, capture_output=True, text=True, timeout=700, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "device_check.json").read_text())
    table = (tmp_path / "device_check.md").read_text()
    assert result["mode"] == "cpu dry run" and result["failures"] == []
    names = {r["model"] for r in result["models"]}
    assert names == {"text MiniLM fp32", "text MiniLM fp16", "text MiniLM int8", "image NudeNet 320n",
                     "OCR det PP-OCRv4", "OCR rec PP-OCRv4"}
    for row in result["models"]:
        assert "error" not in row, row
        assert row["provider"] == "CPUExecutionProvider" and row["best_items_per_s"] > 0
        assert set(row["items_per_s"]) <= {"1", "2"} and "1" in row["items_per_s"]
        assert f"| {row['model']} | CPU |" in table
    (fleet,) = result["fleet"]
    assert fleet["device"] == "cpu", fleet
    # the bench's budget counts the fleet's start-up too: on a loaded machine a 45 s budget left no step
    log = tmp_path / "fleet-cpu.log"
    assert "text" in fleet["stages"], (fleet, log.read_text()[-3000:] if log.exists() else "no fleet log")
    text = fleet["stages"]["text"]
    assert text["items_per_s"] > 0 and text["p99_ms"] >= text["p50_ms"] > 0 and text["batch_hist"]
    assert "| cpu | text |" in table


def test_table_shows_gpu_columns_and_failures() -> None:
    check = load_check()
    cuda = "CUDAExecutionProvider"
    result = {
        "started_at": "2026-12-04 19:00 UTC", "mode": "gpu", "batches": [1, 16],
        "host": {"gpu": "NVIDIA H200, 143771 MiB", "onnxruntime": "1.31.1", "cpu_count": 16},
        "placement": [{"model": "image NudeNet 320n", "cuda_share": 0.97}, {"model": "OCR rec PP-OCRv4", "cuda_share": 0.0}],
        "models": [
            {"model": "image NudeNet 320n", "provider": cuda, "items_per_s": {1: 410.0, 16: 3900.0}, "best_batch": 16,
             "best_items_per_s": 3900.0, "iobinding_items_per_s": 5200.0, "gpu_mem_peak_mib": 812.0},
            {"model": "image NudeNet 320n", "provider": "CPUExecutionProvider", "items_per_s": {1: 90.0, 16: 150.0},
             "best_batch": 16, "best_items_per_s": 150.0},
            {"model": "OCR rec PP-OCRv4", "provider": cuda, "error": "RuntimeError: boom"},
        ],
        "fleet": [{"device": "cuda", "stages": {"image": {"items_per_s": 900.0, "p50_ms": 30.0, "p99_ms": 80.0,
                                                          "batch_hist": {"64": 10.0}, "limit_items_per_s": 3900.0}}},
                  {"device": "cpu", "stages": {"image": {"items_per_s": 100.0, "p50_ms": 60.0, "p99_ms": 300.0,
                                                         "batch_hist": {"8": 40.0}, "limit_items_per_s": 150.0}}}],
        "failures": ["OCR rec PP-OCRv4: no kernel ran on CUDA (silently CPU)"],
    }
    table = check.table(result, [1, 16])
    assert "| image NudeNet 320n | CUDA | 410 | 3900 | 3900 @ 16 | 5200 | 812.0 | 97% |" in table
    assert "| image NudeNet 320n | CPU | 90 | 150 | 150 @ 16 | - | - | - |" in table
    assert "| OCR rec PP-OCRv4 | CUDA | error: RuntimeError: boom |" in table
    assert "fleet image: CUDA / CPU items/s = 9.00" in table
    assert "FAILED: OCR rec PP-OCRv4: no kernel ran on CUDA (silently CPU)" in table


def test_time_point_counts_items_per_second() -> None:
    check = load_check()
    calls: list[int] = []
    rate, one = check.time_point(lambda: calls.append(1), 8, 0.01)
    assert len(calls) >= 2 and rate > 0 and one >= 0
