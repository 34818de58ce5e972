"""`rtaudit submit` and `rtaudit verdicts` without a broker, and with bad input: one line
that says what is wrong and how to fix it, a non-zero exit, no traceback, no "submitted"."""

from __future__ import annotations

import socket

import pytest
import typer
from typer.testing import CliRunner

from rtaudit.workers.cli import _parse_replicas, app


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def no_broker(monkeypatch, tmp_path):
    port = closed_port()
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RTAUDIT_CONFIG", raising=False)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", str(port))
    (tmp_path / "hello.txt").write_text("hello there")
    return port


def one_line(result) -> str:  # type: ignore[no-untyped-def]
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("args", [["submit", "hello.txt"], ["submit", "--wait", "5", "hello.txt"], ["verdicts"]])
def test_no_broker_is_one_line_with_the_fix(no_broker, args):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    line = one_line(result)
    assert line == f"no broker at 127.0.0.1:{no_broker} (connection refused): start one with `rtaudit up`"
    assert "submitted" not in result.output


def test_a_file_that_is_not_text_is_an_error_before_anything_is_sent(no_broker, tmp_path):
    (tmp_path / "x.bin").write_bytes(b"\xff\xfe\x00\x01" * 100)
    result = CliRunner().invoke(app, ["submit", "x.bin"])
    assert result.exit_code == 2
    assert "x.bin is not UTF-8 text" in one_line(result)


def test_an_empty_file_is_one_line_not_a_validation_dump(no_broker, tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    result = CliRunner().invoke(app, ["submit", "empty.txt"])
    assert result.exit_code == 2
    assert one_line(result) == "empty.txt: <root>: a request needs text or at least one media item"


def test_a_bad_environment_setting_names_its_variable(no_broker, monkeypatch):
    monkeypatch.setenv("RTAUDIT_PARTITIONS", "abc")
    result = CliRunner().invoke(app, ["verdicts"])
    assert result.exit_code == 2
    assert "partitions (from environment variable RTAUDIT_PARTITIONS='abc')" in one_line(result)


def test_a_misspelt_variable_is_an_error(no_broker, monkeypatch):
    monkeypatch.setenv("RTAUDIT_EMBEDED_PORT", "1")
    result = CliRunner().invoke(app, ["verdicts"])
    assert result.exit_code == 2
    assert "unknown environment variable RTAUDIT_EMBEDED_PORT: did you mean RTAUDIT_EMBEDDED_PORT?" in one_line(result)


def test_replicas_of_an_unknown_role_list_the_valid_roles():
    from rtaudit.workers.fleet import OPTIONAL_ROLES, ROLES

    with pytest.raises(typer.BadParameter, match=f"unknown role 'bogus' in 'bogus=2': roles are {', '.join(ROLES + OPTIONAL_ROLES)}"):
        _parse_replicas(["bogus=2"])
    assert _parse_replicas(["explain=2"]) == {"explain": 2}
    with pytest.raises(typer.BadParameter, match="N >= 1"):
        _parse_replicas(["ocr=0"])
    assert _parse_replicas(["ocr=2", "text=1"]) == {"ocr": 2, "text": 1}


def test_the_fleet_says_which_settings_file_it_runs_with(tmp_path, monkeypatch):
    from rtaudit.workers.cli import _settings_source

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RTAUDIT_CONFIG", raising=False)
    assert "no rtaudit.toml here" in _settings_source(None) and "default policy" in _settings_source(None)
    (tmp_path / "rtaudit.toml").write_text("")
    assert _settings_source(None) == f"settings: {(tmp_path / 'rtaudit.toml').resolve()}"
    assert _settings_source(tmp_path / "other.toml") == f"settings: {(tmp_path / 'other.toml').resolve()}"
