"""`rtaudit control breaker ...` and the `drift` section of `rtaudit control status` against a real
embedded broker: the breaker's action and trips go through audit.control by compare-and-swap, a
worker's policy book sees them, and a heartbeat's drift readings show in the status."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from rtaudit.engine.policy import Breaker
from rtaudit.schemas.control import DriftStatus
from rtaudit.cli import control as cli_control
from rtaudit.cli.main import app
from rtaudit.workers.control import ControlPlane, read_state
from rtaudit.workers.settings import Settings

pytestmark = pytest.mark.integration


def cli(*args: str):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, ["control", *args])
    assert "Traceback" not in result.output, result.output
    return result


def test_breaker_trip_reset_and_the_drift_section(broker_settings: Settings, monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s = broker_settings
    monkeypatch.chdir(tmp_path)
    for name in ("RTAUDIT_CONFIG", "KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", str(s.embedded_port))
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(s.state_dir))
    monkeypatch.setattr(cli_control, "console", Console(width=400))

    r = cli("breaker", "set", "acme", "--action", "fail_closed")
    assert r.exit_code == 0 and "breaker:acme version 1 accepted" in r.output and "armed: fail closed" in r.output
    r = cli("breaker", "trip", "acme", "--reason", "page: drift 0.52 with P99 2.4 s")
    assert r.exit_code == 0 and "TRIPPED: fail closed" in r.output
    r = cli("breaker", "set", "acme", "--action", "fail_sideways")
    assert r.exit_code == 2 and "bad breaker" in r.output
    r = cli("breaker", "reset", "acme", "--expect-version", "1")  # version 2 is in force
    assert r.exit_code == 1 and "cas_conflict" in r.output
    book = read_state(s).policy_book(s.policies, now_ms=0)
    assert book.breakers["acme"] == Breaker(action="fail_closed", tripped=True, version=2)

    plane = ControlPlane(s, "text", heartbeat_s=0.5, status=lambda: {
        "drift": [DriftStatus(stage="text", tenant="acme", semantic=0.4821, psi={"offensive": 0.31}, windows=7)]}).start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            r = cli("status")
            if "0.4821" in r.output:
                break
            time.sleep(0.5)
        assert r.exit_code == 0
        line = next(line for line in r.output.splitlines() if "0.4821" in line)
        assert "acme" in line and "offensive 0.310" in line and "page" in line
        assert "TRIPPED: fail closed" in r.output
    finally:
        plane.stop()
    assert cli("breaker", "reset", "acme").exit_code == 0
    assert read_state(s).policy_book(s.policies, now_ms=0).breakers["acme"].tripped is False
    assert cli("breaker", "clear", "acme").exit_code == 0
    assert "acme" not in read_state(s).policy_book(s.policies, now_ms=0).breakers
