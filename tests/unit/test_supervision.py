"""The fleet supervisor: backoff policy (pure), and restarts of real child processes
(``sh`` stand-ins for workers: no broker, no models)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from rtaudit.tools.fleet.local import Fleet, describe_exit
from rtaudit.workers.settings import Settings
from rtaudit.tools.fleet.supervision import RestartPolicy


def test_backoff_doubles_from_the_base_up_to_the_cap() -> None:
    p = RestartPolicy(base_s=0.5, factor=2.0, cap_s=30.0)
    assert [p.delay_s(n) for n in range(1, 9)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert p.delay_s(0) == 0.0


def test_a_healthy_run_resets_the_failure_count() -> None:
    p = RestartPolicy(healthy_after_s=30.0)
    assert p.failures_after_exit(0, uptime_s=1.0) == 1
    assert p.failures_after_exit(5, uptime_s=29.9) == 6
    assert p.failures_after_exit(5, uptime_s=30.0) == 1
    assert p.is_healthy(30.0) and not p.is_healthy(29.0)


@pytest.mark.parametrize("bad", [dict(base_s=-1), dict(factor=0.5), dict(cap_s=0.1, base_s=1), dict(healthy_after_s=0)])
def test_an_invalid_policy_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RestartPolicy(**bad)


def test_exit_descriptions() -> None:
    assert describe_exit(3) == "exit 3"
    assert describe_exit(-signal.SIGKILL) == "signal SIGKILL"


class ShellFleet(Fleet):
    """A fleet whose "workers" are shell commands: ``commands[role]``."""

    commands: dict[str, str] = {}

    def _popen(self, role: str, index: int, metrics_port: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(["sh", "-c", self.commands[role]], start_new_session=True)


def shell_fleet(tmp_path: Path, commands: dict[str, str], **policy: float) -> tuple[ShellFleet, list[str]]:
    events: list[str] = []
    fleet = ShellFleet(Settings(bootstrap_servers="unused:9092"), roles=(), log_dir=tmp_path, supervise=True,
                       policy=RestartPolicy(**{"base_s": 0.05, "cap_s": 0.2, "healthy_after_s": 5.0, **policy}),
                       on_event=events.append)
    fleet.commands = commands
    return fleet, events


def run_checks(fleet: Fleet, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        fleet.check()
        time.sleep(0.02)


def test_a_worker_that_dies_is_restarted_and_reported(tmp_path: Path) -> None:
    fleet, events = shell_fleet(tmp_path, {"text": "sleep 60"})
    first = fleet.spawn("text")
    first.send_signal(signal.SIGKILL)
    first.wait()
    run_checks(fleet, 0.3)
    try:
        (second,) = fleet.processes["text"]
        assert second.pid != first.pid and second.poll() is None
        assert fleet.restarts == {"text": 1}
        assert any("text-0" in e and "signal SIGKILL" in e for e in events)
        assert any(e.startswith("restarted text-0") for e in events)
        assert fleet.exited() == []
    finally:
        fleet.stop()
    assert second.poll() is not None


def test_a_crash_loop_backs_off_and_is_reported_as_exited(tmp_path: Path) -> None:
    fleet, events = shell_fleet(tmp_path, {"ocr": "exit 3"}, base_s=0.05, cap_s=0.1)
    fleet.spawn("ocr")
    run_checks(fleet, 1.0)
    fleet.stop()
    delays = [float(e.split("restarting in ")[1].split(" s")[0]) for e in events if "restarting in" in e]
    assert delays[:3] == [0.05, 0.1, 0.1] and max(delays) == 0.1
    assert fleet.restarts["ocr"] == len(delays) or fleet.restarts["ocr"] == len(delays) - 1


def test_crash_loop_detection(tmp_path: Path) -> None:
    fleet, _ = shell_fleet(tmp_path, {"ocr": "exit 3"}, base_s=0.01, cap_s=0.02)
    fleet.spawn("ocr")
    run_checks(fleet, 0.6)
    try:
        assert fleet.exited() and "exit 3" in fleet.exited()[0]
    finally:
        fleet.stop()


def test_killed_on_purpose_is_not_restarted(tmp_path: Path) -> None:
    fleet, _ = shell_fleet(tmp_path, {"fusion": "sleep 60"})
    fleet.spawn("fusion")
    fleet.kill("fusion")
    run_checks(fleet, 0.3)
    assert "fusion" not in fleet.processes and fleet.restarts == {}
    fleet.spawn("fusion")  # the failover test's own replacement: exactly one fusion
    run_checks(fleet, 0.2)
    try:
        assert len(fleet.processes["fusion"]) == 1
    finally:
        fleet.stop()


def test_unsupervised_fleet_reports_exits_and_restarts_nothing(tmp_path: Path) -> None:
    fleet, _ = shell_fleet(tmp_path, {"router": "exit 0"})
    fleet.supervise = False
    proc = fleet.spawn("router")
    proc.wait()
    run_checks(fleet, 0.2)
    assert fleet.exited() == ["router (exit 0)"] and fleet.restarts == {}
    fleet.stop()
