"""The CLI against a real embedded broker: ``rtaudit verdicts`` says at once that it is waiting
and where; with the broker up but the topics missing, each command answers in one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtaudit.tools.fleet.broker import EmbeddedBroker
from rtaudit.cli.main import app
from rtaudit.workers.settings import Settings

from .conftest import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def cli_env(settings: Settings, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.upper().startswith("RTAUDIT_") and k.upper() != "KAFKA_BOOTSTRAP_SERVERS"}
    return {**env, "RTAUDIT_EMBEDDED_PORT": str(settings.embedded_port), "RTAUDIT_STATE_DIR": str(tmp_path / "state")}


def test_verdicts_says_it_is_waiting_and_where(broker_settings: Settings, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "rtaudit.cli.main", "verdicts"], cwd=tmp_path,
                            env=cli_env(broker_settings, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # before any verdict: there is none on this broker
        assert f"waiting for verdicts on audit.verdicts at {broker_settings.bootstrap}" in line, line
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    # Ctrl-C ends it: 0 when it lands in the read loop, 130 (click's "Aborted!") just before it
    assert proc.returncode in (0, 130) and out == "" and "Traceback" not in err, err


@pytest.fixture()
def bare_broker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A broker with no topic at all (nothing ran `rtaudit topics create`)."""
    port = free_port()
    monkeypatch.chdir(tmp_path)
    for name in ("RTAUDIT_CONFIG", "KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", str(port))
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "hello.txt").write_text("hello")
    with EmbeddedBroker(port):
        yield port


@pytest.mark.parametrize(("args", "code", "says"), [
    (["topics", "verify"], 1, "topics not as declared"),
    (["dlq"], 2, "topic audit.dlq missing"),
    (["verdicts"], 1, "topic audit.verdicts missing"),
    (["submit", "hello.txt"], 1, "topic audit.requests missing"),
    (["control", "status"], 2, "missing"),
])
def test_with_the_topics_missing_each_command_answers_in_one_line(bare_broker: int, args: list[str], code: int,
                                                                  says: str) -> None:
    result = CliRunner().invoke(app, args)
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert result.exit_code == code and says in lines[0], (result.exit_code, lines[0])
    assert "rtaudit topics create" in lines[0]
