"""`rtaudit submit` against a real router and fusion on the embedded broker: the verdict's reasons are
printed whole, wrapped to the terminal (an 80-column one here), and ``--slo`` / ``--deadline`` travel in
the published requests (read back from audit.requests)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtaudit.cli.main import app
from rtaudit.schemas.messages import AuditRequest
from rtaudit.tools.fleet.local import Fleet
from rtaudit.topics.catalog import REQUESTS
from rtaudit.workers.client import RecordReader, verdict_reader
from rtaudit.workers.settings import Settings

from .conftest import free_port

pytestmark = pytest.mark.integration
#: a media URI outside every allowed file root: the router rejects it with a reason that quotes it (long).
URI = "file:///srv/uploads/" + "/".join(["tenant-acme-2026-12-05-batch-0042"] * 4) + "/holiday-photo-with-a-long-name.png"


def submitted_ids(output: str) -> list[str]:
    return [line.split()[1] for line in output.splitlines() if line.startswith("submitted ")]


def test_submit_prints_whole_reasons_and_sends_its_slo_and_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings(embedded_port=free_port(), state_dir=tmp_path / "state")
    fleet = Fleet(s, roles=("router", "fusion"), log_dir=tmp_path / "logs", env={"RTAUDIT_STATE_DIR": str(s.state_dir)})
    monkeypatch.chdir(tmp_path)
    for name in ("RTAUDIT_CONFIG", "KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", str(s.embedded_port))
    monkeypatch.setenv("COLUMNS", "80")
    fleet.launch()
    try:
        r = CliRunner().invoke(app, ["submit", "--uri", URI, "--slo", "20000", "--wait", "90"])
        assert r.exit_code == 0, r.output
        (rid,) = submitted_ids(r.output)
        with verdict_reader(s) as reader:
            verdict, _ = reader.wait_all({rid}, 10)[rid]
        assert any(URI in reason for reason in verdict.reasons) and max(map(len, verdict.reasons)) > 200, verdict.reasons
        reason_block = [line for line in r.output.splitlines() if line.startswith("  ")]  # the verdict line stays one line
        assert len(reason_block) >= 3 and max(len(line) for line in reason_block) <= 80, r.output
        assert sum(line.startswith("  reason: ") for line in reason_block) == len(verdict.reasons), r.output
        printed = "".join(line.strip().removeprefix("reason: ") for line in reason_block)
        assert "".join(printed.split()) == "".join("".join(verdict.reasons).split()), r.output  # every reason, whole, in order

        at = datetime.fromtimestamp(time.time() + 45, tz=timezone.utc).replace(microsecond=0)
        r = CliRunner().invoke(app, ["submit", "--uri", URI, "--deadline", at.isoformat().replace("+00:00", "Z"), "--wait", "90"])
        assert r.exit_code == 0, r.output
        (rid2,) = submitted_ids(r.output)
        with RecordReader(s, REQUESTS, AuditRequest) as requests:
            sent = requests.wait_all({rid, rid2}, 10)
        assert (sent[rid][0].slo_ms, sent[rid][0].deadline_ms) == (20_000, None)
        assert (sent[rid2][0].slo_ms, sent[rid2][0].deadline_ms) == (None, int(at.timestamp() * 1000))
    finally:
        fleet.stop()
