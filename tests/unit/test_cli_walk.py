"""Every ``rtaudit`` subcommand answers in one line when it cannot do its job: with no broker on
the configured port (a free port nothing listens on), or with a misspelt RTAUDIT_* variable (the
harnesses, which start brokers of their own). No traceback, no librdkafka log line (those need
``-v``), and a documented exit status. The walk covers every leaf command of the app: a new
command fails :func:`test_the_walk_covers_every_command` until it is added here."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtaudit.cli.main import app

POLICY = "[thresholds.hate]\nreview = 0.5\nblock = 0.8\n[thresholds.sexual]\nreview = 0.45\nblock = 0.7\n"

#: command → (arguments after it, exit status, text the one line holds); ``{tmp}`` is the test's folder.
NO_BROKER: dict[str, tuple[list[str], int, str]] = {
    "topics create": ([], 1, "no broker at"),
    "topics verify": ([], 1, "no broker at"),
    "dlq": ([], 2, "no broker at"),
    "verdicts": ([], 1, "no broker at"),
    "submit": (["{tmp}/hello.txt"], 1, "no broker at"),
    "explain": (["req-1"], 2, "no broker at"),
    "control status": ([], 2, "no broker at"),
    "top": ([], 2, "no broker at"),
    "control history": ([], 2, "no broker at"),
    "control rollout start": (["text", "--candidate", "v2"], 2, "no text bundle v2 in the store"),
    "control rollout promote": (["text"], 2, "no broker at"),
    "control rollout rollback": (["text"], 2, "no broker at"),
    "control rollout abort": (["text"], 2, "no broker at"),
    "control policy set": (["acme", "{tmp}/policy.toml"], 2, "no broker at"),
    "control policy clear": (["acme"], 2, "no broker at"),
    "control priority set": (["acme", "--lane", "hi"], 2, "no broker at"),
    "control priority clear": (["acme"], 2, "no broker at"),
    "control breaker set": (["acme", "--action", "fail_closed"], 2, "no broker at"),
    "control breaker trip": (["acme"], 2, "no broker at"),
    "control breaker reset": (["acme"], 2, "no broker at"),
    "control breaker clear": (["acme"], 2, "no broker at"),
    "model publish": (["{tmp}/no-bundle"], 2, "no-bundle"),
    "model verify": (["{tmp}/no-bundle"], 2, "no-bundle"),
    "down": ([], 0, "no rtaudit fleet holds"),
}
#: commands that start a broker of their own (or need none): a misspelt variable is their one line
BAD_SETTINGS: dict[str, list[str]] = {
    "bench": ["--quick"], "chaos": ["--quick"], "fuzz": ["--quick"], "eval": ["--functional"], "demo": [], "up": [],
    "broker": [], "worker": ["text"], "model list": [], "model package": ["--stage", "text", "--version", "v9"],
    "text build-encoder": [], "text build-e5": [], "text train-e5": [], "text train-cascade": [], "text train": [], "text finetune": [], "text train-multilingual": [],
}
#: commands that read no settings and need no broker (they only write local files or print)
LOCAL_ONLY = {"schemas export"}


def leaves(group, prefix: str = "") -> list[str]:  # type: ignore[no-untyped-def]
    out = []
    for name, cmd in getattr(group, "commands", {}).items():
        path = f"{prefix}{name}"
        out += leaves(cmd, path + " ") if hasattr(cmd, "commands") else [path]
    return out


def test_the_walk_covers_every_command() -> None:
    import typer

    every = set(leaves(typer.main.get_command(app)))
    walked = set(NO_BROKER) | set(BAD_SETTINGS) | LOCAL_ONLY
    assert every - walked == set(), f"add these commands to the walk: {sorted(every - walked)}"
    assert walked - every == set(), f"the walk names commands that no longer exist: {sorted(walked - every)}"


@pytest.fixture()
def no_broker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.chdir(tmp_path)
    for name in ("RTAUDIT_CONFIG", "KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", str(port))
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))  # no other fleet's claim in sight
    (tmp_path / "hello.txt").write_text("hello")
    (tmp_path / "policy.toml").write_text(POLICY)
    return port


def one_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output and "librdkafka" not in output and "rdkafka#" not in output, output
    return lines[0]


@pytest.mark.parametrize("command", sorted(NO_BROKER))
def test_with_no_broker_every_command_answers_in_one_line(command: str, no_broker: int, tmp_path: Path) -> None:
    args, code, says = NO_BROKER[command]
    started = time.monotonic()
    result = CliRunner().invoke(app, [*command.split(), *(a.format(tmp=tmp_path) for a in args)])
    line = one_line(result.output)
    assert (result.exit_code, says in line) == (code, True), f"{command}: exit {result.exit_code}: {line}"
    if says == "no broker at":
        assert f"127.0.0.1:{no_broker}" in line and "rtaudit up" in line
    assert time.monotonic() - started < 8, f"{command} took {time.monotonic() - started:.1f} s to say so"


@pytest.mark.parametrize("command", sorted(BAD_SETTINGS))
def test_with_a_misspelt_variable_every_command_answers_in_one_line(command: str, no_broker: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTAUDIT_PARTITONS", "4")
    result = CliRunner().invoke(app, [*command.split(), *BAD_SETTINGS[command]])
    line = one_line(result.output)
    assert result.exit_code == 2 and "did you mean RTAUDIT_PARTITIONS" in line, f"{command}: exit {result.exit_code}: {line}"


def test_the_wrong_port_names_the_fleet_that_runs_elsewhere(no_broker: int, tmp_path: Path) -> None:
    """A fleet holds another port (its claim is live): the hint points there instead of `rtaudit up`."""
    from rtaudit.tools.fleet.record import Claim, FleetRecord
    from rtaudit.workers.settings import Settings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        other = Settings(embedded_port=s.getsockname()[1])
    with Claim(other, FleetRecord.ours(other, "fleet", "run-1", None)):
        result = CliRunner().invoke(app, ["control", "status"])
    line = one_line(result.output)
    assert f"no broker at 127.0.0.1:{no_broker}" in line
    assert f"listens on {other.bootstrap}" in line and f"RTAUDIT_EMBEDDED_PORT={other.embedded_port}" in line


def test_verbose_shows_librdkafka_lines(no_broker: int) -> None:
    import logging

    result = CliRunner().invoke(app, ["-v", "dlq"])
    try:
        assert result.exit_code == 2 and "no broker at" in result.output
        assert logging.getLogger("rtaudit.workers.kafka.librdkafka").level == logging.NOTSET  # not silenced
    finally:
        CliRunner().invoke(app, ["down"])  # back to the quiet default for the tests after this one
