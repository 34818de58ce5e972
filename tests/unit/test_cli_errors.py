"""`rtaudit submit` and `rtaudit verdicts` without a broker, and with bad input: one line
that says what is wrong and how to fix it, a non-zero exit, no traceback, no "submitted"."""

from __future__ import annotations

import socket

import pytest
import typer
from typer.testing import CliRunner

from rtaudit.cli.fleet import _parse_replicas
from rtaudit.cli.main import app


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
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))  # no other fleet's claim changes the hint
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


def test_a_request_id_given_twice_is_refused_before_anything_is_sent(no_broker, tmp_path):
    """Fusion makes one verdict per request id: a second request with the same id would never be judged."""
    now = 1_800_000_000_000
    (tmp_path / "dup.jsonl").write_text(
        f'{{"request_id": "u-dup-1", "tenant_id": "default", "created_at_ms": {now}, "text": "have a nice day"}}\n'
        f'{{"request_id": "u-dup-1", "tenant_id": "default", "created_at_ms": {now}, "text": "you stupid idiot"}}\n')
    result = CliRunner().invoke(app, ["submit", "dup.jsonl"])
    assert result.exit_code == 2
    assert one_line(result) == ("request_id 'u-dup-1' appears 2 times in what you submit: give each request its own id "
                                "(one verdict is made per id)")
    assert "submitted" not in result.output


@pytest.mark.parametrize("name", ["empty.txt", "empty.png", "empty.jpg", "empty.jsonl", "blank.txt", "blank.jsonl"])
def test_an_empty_file_of_any_kind_is_refused_the_same_way(no_broker, tmp_path, name):
    """A 0-byte image was published and answered `review` with two DLQ records; now every kind says the same."""
    (tmp_path / name).write_bytes(b"" if name.startswith("empty") else b"  \n\n")
    result = CliRunner().invoke(app, ["submit", name])
    assert result.exit_code == 2
    assert one_line(result) == f"{name} is empty: nothing to moderate (a request needs text or at least one media item)"
    assert "submitted" not in result.output


@pytest.mark.parametrize("name, content, shown", [
    ("zw.txt", "\u200b\u200b", "U+200B ZERO WIDTH SPACE"),
    ("zwj.txt", "\u200d\ufeff\n", "U+200D ZERO WIDTH JOINER, U+FEFF ZERO WIDTH NO-BREAK SPACE"),
    ("zw.jsonl", " \u2060\n\u200b\n", "U+2060 WORD JOINER, U+200B ZERO WIDTH SPACE"),
    ("nbsp.txt", "\u00a0\u3000\n", None),
])
def test_a_file_of_invisible_characters_is_refused_as_empty(no_broker, tmp_path, name, content, shown):
    """Zero-width characters only were published and judged `allow`; white space only was refused as empty."""
    (tmp_path / name).write_text(content, encoding="utf-8")
    result = CliRunner().invoke(app, ["submit", name])
    assert result.exit_code == 2
    why = f" (only invisible characters: {shown})" if shown else ""
    assert one_line(result) == f"{name} is empty{why}: nothing to moderate (a request needs text or at least one media item)"
    assert "submitted" not in result.output


def test_every_bad_line_of_a_jsonl_file_is_named_before_anything_is_sent(no_broker, tmp_path):
    """Only the first bad line was reported: fixing a file took one run per bad line."""
    good = '{"request_id": "r-%d", "tenant_id": "default", "created_at_ms": 1800000000000, "text": "hi"}'
    lines = [good % 1, "{not json", good % 3, '{"request_id": "r-4", "tenant_id": "default"}', "", good % 6]
    (tmp_path / "some.jsonl").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["submit", "some.jsonl"])
    assert result.exit_code == 2 and "submitted" not in result.output and "Traceback" not in result.output
    out = [ln for ln in result.output.splitlines() if ln.strip()]
    assert out[0] == "some.jsonl: 2 of 5 lines are not valid requests:"
    assert [ln.split(": ")[0] for ln in out[1:]] == ["some.jsonl:2", "some.jsonl:4"], result.output
    assert "created_at_ms" in out[2]

    (tmp_path / "many.jsonl").write_text("{not json\n" * 25)
    out = [ln for ln in CliRunner().invoke(app, ["submit", "many.jsonl"]).output.splitlines() if ln.strip()]
    assert out[0] == "many.jsonl: 25 of 25 lines are not valid requests:" and len(out) == 22
    assert out[20].startswith("many.jsonl:20: ") and out[21] == "... and 5 more"


def test_submit_by_uri_reaches_the_broker_check_and_a_bad_uri_is_one_line(no_broker, tmp_path):
    result = CliRunner().invoke(app, ["submit", "--uri", "file:///srv/uploads/cat.jpg"])
    assert result.exit_code == 1 and one_line(result).startswith("no broker at")  # built, then the broker is down
    bad = CliRunner().invoke(app, ["submit", "--uri", "ftp://example.com/cat.jpg"])
    assert bad.exit_code == 2 and one_line(bad).startswith("--uri ftp://example.com/cat.jpg: ")
    nothing = CliRunner().invoke(app, ["submit"])
    assert nothing.exit_code == 2 and "--uri" in one_line(nothing)


def test_a_too_large_image_names_the_uri_command_and_what_the_settings_must_allow(no_broker, tmp_path):
    from rtaudit.schemas.messages import MAX_INLINE_MEDIA_BYTES

    big = tmp_path / "big.png"
    big.write_bytes(b"\x89PNG" + b"\0" * MAX_INLINE_MEDIA_BYTES)
    line = one_line(CliRunner().invoke(app, ["submit", "big.png"]))
    assert f"`rtaudit submit --uri {big.resolve().as_uri()}`" in line
    assert "allowed_file_roots (now: none)" in line and f"max_bytes of at least {MAX_INLINE_MEDIA_BYTES + 4} (now 8388608)" in line
    (tmp_path / "rtaudit.toml").write_text(f'[media]\nallowed_file_roots = ["{tmp_path}"]\nmax_bytes = 16777216\n')
    line = one_line(CliRunner().invoke(app, ["submit", "big.png"]))
    assert line.endswith(f"send it by reference with `rtaudit submit --uri {big.resolve().as_uri()}`")


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
    from rtaudit.workers.roles import OPTIONAL_ROLES, ROLES

    with pytest.raises(typer.BadParameter, match=f"unknown role 'bogus' in 'bogus=2': roles are {', '.join(ROLES + OPTIONAL_ROLES)}"):
        _parse_replicas(["bogus=2"])
    assert _parse_replicas(["explain=2"]) == {"explain": 2}
    with pytest.raises(typer.BadParameter, match="N >= 1"):
        _parse_replicas(["ocr=0"])
    assert _parse_replicas(["ocr=2", "text=1"]) == {"ocr": 2, "text": 1}


def test_the_fleet_says_which_settings_file_it_runs_with(tmp_path, monkeypatch):
    from rtaudit.cli.fleet import _settings_source

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RTAUDIT_CONFIG", raising=False)
    assert "no rtaudit.toml here" in _settings_source(None) and "default policy" in _settings_source(None)
    (tmp_path / "rtaudit.toml").write_text("")
    assert _settings_source(None) == f"settings: {(tmp_path / 'rtaudit.toml').resolve()}"
    assert _settings_source(tmp_path / "other.toml") == f"settings: {(tmp_path / 'other.toml').resolve()}"


def test_up_against_a_broker_that_does_not_answer_ends_in_one_line(no_broker, monkeypatch, tmp_path):
    monkeypatch.setenv("RTAUDIT_BOOTSTRAP_SERVERS", f"127.0.0.1:{no_broker}")
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("RTAUDIT_METRICS_PORT", "0")
    result = CliRunner().invoke(app, ["up"])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert result.output.rstrip().splitlines()[-1].startswith(f"no broker at 127.0.0.1:{no_broker} (connection refused): check"), result.output


def test_up_with_its_metrics_port_taken_names_the_port_and_the_setting(no_broker, monkeypatch, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path / "state"))
        monkeypatch.setenv("RTAUDIT_METRICS_HOST", "127.0.0.1")
        monkeypatch.setenv("RTAUDIT_METRICS_PORT", str(port))
        result = CliRunner().invoke(app, ["up"])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    last = result.output.rstrip().splitlines()[-1]
    assert f"127.0.0.1:{port}" in last and "RTAUDIT_METRICS_PORT" in last, result.output


@pytest.mark.parametrize("env, source", [
    ({"RTAUDIT_EMBEDDED_PORT": "{port}"}, "the address is the embedded broker's, port from RTAUDIT_EMBEDDED_PORT: start one "
                                         "with `rtaudit broker` (or the whole fleet with `rtaudit up`)"),
    ({"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:{port}"}, "the address is from KAFKA_BOOTSTRAP_SERVERS: check that address"),
    ({"RTAUDIT_CONFIG": "{tmp}/fleet.toml"}, "the address is the embedded broker's, port from embedded_port in {tmp}/fleet.toml"),
])
def test_worker_with_no_broker_is_one_line_naming_the_address_and_its_setting(tmp_path, env, source):
    """A real `rtaudit worker` process (it execs Faust once a broker answers): before, librdkafka's and
    aiokafka's tracebacks for a minute; now one line, exit 1, within the check's 5 s."""
    import os
    import subprocess
    import sys
    import time

    port = closed_port()
    (tmp_path / "fleet.toml").write_text(f"embedded_port = {port}\n")
    clean = {k: v for k, v in os.environ.items() if k.upper() not in
             ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS", "RTAUDIT_EMBEDDED_PORT", "RTAUDIT_CONFIG")}
    extra = {k: v.format(port=port, tmp=tmp_path) for k, v in env.items()}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rtaudit.cli.main", "worker", "text"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={**clean, **extra, "XDG_RUNTIME_DIR": str(tmp_path / "run")})
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stdout + proc.stderr
    assert lines[0].startswith(f"no broker at 127.0.0.1:{port} (connection refused); "), lines[0]
    assert source.format(tmp=tmp_path) in lines[0], lines[0]
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("args, says", [
    (["--slo", "-5"], "--slo -5: an SLO is 1 to 3600000 ms (1 h), the request schema's bounds"),
    (["--slo", "0"], "--slo 0: an SLO is 1 to 3600000 ms"),
    (["--slo", "86400000"], "--slo 86400000: an SLO is 1 to 3600000 ms"),
    (["--deadline", "2020-01-01T00:00:00Z"], "s in the past: give a time after now"),
    (["--deadline", "2999-01-01T00:00:00Z"], "s ahead: at most 3600 s (1 h), like --slo"),
    (["--deadline", "2026-12-05T16:00:00"], "--deadline 2026-12-05T16:00:00: give a time zone (Z or +01:00)"),
    (["--deadline", "tomorrow"], "--deadline 'tomorrow': not a time; give ISO 8601 with a time zone"),
    (["--deadline", "1"], "s in the past"),
    (["--slo", "500", "--deadline", "2999-01-01T00:00:00Z"], "give --slo or --deadline, not both"),
])
def test_a_bad_slo_or_deadline_is_one_line_before_anything_is_sent(no_broker, args, says):
    result = CliRunner().invoke(app, ["submit", *args, "hello.txt"])
    assert result.exit_code == 2
    line = one_line(result)
    assert says in line, line
    assert "submitted" not in result.output and "no broker" not in result.output


def test_reasons_are_printed_whole_and_wrapped_to_the_width():
    from rtaudit.cli.client import reason_lines
    from rtaudit.schemas.messages import Verdict

    reasons = ["image/media:0: media_fetch_failed: " + "x" * 150 + " could not be read", "incomplete: policy on_incomplete=review"]
    v = Verdict(request_id="r-1", tenant_id="acme", decision="review", complete=False, categories={}, reasons=reasons,
                policy_version="p1", created_at_ms=1, deadline_ms=2, decided_at_ms=2, latency_ms=1)
    lines = reason_lines(v, width=60)
    assert max(len(line) for line in lines) <= 60 and len(lines) >= 4
    assert [line for line in lines if line.startswith("  reason: ")] == [
        lines[0], "  reason: incomplete: policy on_incomplete=review"]
    assert "".join(line[10:] for line in lines[:-1]).replace(" ", "") == reasons[0].replace(" ", "")


def test_submit_says_when_the_verdict_is_an_earlier_requests():
    """Re-using a decided request_id returns its first verdict (replay protection): submit says so instead of
    showing the old verdict as the judgement of the new content."""
    from rtaudit.cli.client import earlier_verdict_lines
    from rtaudit.schemas.messages import Verdict

    def verdict(decided: int) -> Verdict:
        return Verdict(request_id="edit-1", tenant_id="acme", decision="allow", complete=True, categories={}, reasons=[],
                       policy_version="p1", created_at_ms=decided - 5, deadline_ms=decided + 100, decided_at_ms=decided,
                       latency_ms=5)

    sent = {"edit-1": 1_700_000_000_000}
    (note,) = earlier_verdict_lines(verdict(sent["edit-1"] - 60_000), sent)
    assert "earlier request" in note and "'edit-1'" in note and "new request_id" in note
    assert earlier_verdict_lines(verdict(sent["edit-1"] + 80), sent) == []
    assert earlier_verdict_lines(verdict(sent["edit-1"] - 60_000), {}) == []
