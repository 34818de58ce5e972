"""Fleet claims: one fleet per broker address, a refusal that names the owner and how to
stop it, stale claims taken over, unclaimed listeners refused."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rtaudit.tools.fleet.record import Claim, FleetConflict, FleetRecord, listener_pid, read_claim, settings_hash
from rtaudit.workers.settings import Settings


@pytest.fixture(autouse=True)
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def settings(port: int, **kw: object) -> Settings:
    return Settings(embedded_port=port, **kw)  # type: ignore[arg-type]


def record(s: Settings, **kw: object) -> FleetRecord:
    r = FleetRecord.ours(s, "fleet", "run-1", Path("/tmp/logs"))
    return FleetRecord(**{**r.__dict__, **kw})  # type: ignore[arg-type]


def test_a_second_fleet_on_the_port_is_refused_with_the_owner_and_how_to_stop_it() -> None:
    s = settings(free_port())
    first = Claim(s, record(s)).acquire()
    try:
        with pytest.raises(FleetConflict) as err:
            Claim(s, record(s)).acquire()
        msg = str(err.value)
        assert f"pid {os.getpid()}" in msg and str(Path(__file__).resolve().parents[2]) in msg
        assert f"kill {os.getpid()}" in msg and f"rtaudit down --port {s.embedded_port}" in msg
        assert err.value.record is not None and err.value.record.same_fleet(record(s))
        assert read_claim(s) == record(s) or read_claim(s).pid == os.getpid()  # type: ignore[union-attr]
    finally:
        first.release()
    assert read_claim(s) is None
    Claim(s, record(s)).acquire().release()  # free again


def test_other_code_or_settings_is_not_the_same_fleet() -> None:
    s = settings(free_port())
    mine = record(s)
    assert not mine.same_fleet(record(s, checkout="/elsewhere/rtaudit"))
    assert not mine.same_fleet(record(s, commit="0123456789ab"))
    assert not mine.same_fleet(record(s, settings_hash=settings_hash(settings(1234))))
    assert not mine.same_fleet(record(s, kind="broker"))


def test_a_dead_owners_claim_is_stale_and_taken_over(runtime: Path) -> None:
    s = settings(free_port())
    holder = subprocess.Popen(
        [sys.executable, "-c", f"""
import time
from rtaudit.tools.fleet.record import Claim, FleetRecord
from rtaudit.workers.settings import Settings
s = Settings(embedded_port={s.embedded_port})
claim = Claim(s, FleetRecord.ours(s, "fleet", "run-x", None)).acquire()  # held while referenced
print("held", flush=True)
time.sleep(120)
"""], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2], env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})
    assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
    owner = read_claim(s)
    assert owner is not None and owner.pid == holder.pid and owner.run_id == "run-x"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert read_claim(s) is None  # the kernel dropped the lock: stale
    claim = Claim(s, record(s)).acquire()
    assert json.loads(claim.path.read_text())["pid"] == os.getpid()
    claim.release()


def test_down_finds_an_embedded_fleet_by_the_loopback_bootstrap_address_a_user_exported(
        runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from rtaudit.cli.main import app

    s = settings(free_port())
    holder = subprocess.Popen(
        [sys.executable, "-c", f"""
import time
from rtaudit.tools.fleet.record import Claim, FleetRecord
from rtaudit.workers.settings import Settings
s = Settings(embedded_port={s.embedded_port})
claim = Claim(s, FleetRecord.ours(s, "fleet", "run-y", None)).acquire()
print("held", flush=True)
time.sleep(120)
"""], stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2], env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})
    try:
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", f"127.0.0.1:{s.embedded_port}")
        result = CliRunner().invoke(app, ["down", "--timeout", "20"])
        assert result.exit_code == 0, result.output
        assert f"pid {holder.pid}" in result.output and "stopped" in result.output
        assert holder.wait(timeout=10) == -signal.SIGTERM
    finally:
        holder.kill()


def test_an_unclaimed_listener_on_the_port_is_refused_by_pid() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        assert listener_pid(port) == os.getpid()
        s = settings(port)
        with pytest.raises(FleetConflict, match=f"port {port} is in use by pid {os.getpid()}"):
            Claim(s, record(s)).acquire()
        assert read_claim(s) is None  # refused: not claimed


def test_an_external_cluster_is_claimed_by_its_bootstrap_servers() -> None:
    s = Settings(bootstrap_servers="kafka-1:9092")
    claim = Claim(s, record(s)).acquire()
    try:
        with pytest.raises(FleetConflict, match="kafka-1:9092 is in use by the rtaudit fleet"):
            Claim(s, record(s)).acquire()
        other = Settings(bootstrap_servers="kafka-2:9092")
        Claim(other, record(other)).acquire().release()
    finally:
        claim.release()
