"""The fleet supervisor: backoff policy (pure), and restarts of real child processes
(``sh`` stand-ins for workers: no broker, no models)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtaudit.tools.fleet.broker import port_is_free
from rtaudit.tools.fleet.exits import exit_reason
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


class LoggingShellFleet(ShellFleet):
    """A shell fleet whose "workers" write to their log file and see their metrics port
    (``$RTAUDIT_METRICS_PORT``), as ``faust`` workers do."""

    def _popen(self, role: str, index: int, metrics_port: int) -> subprocess.Popen[bytes]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path(role, index), "ab") as logf:
            return subprocess.Popen(["sh", "-c", self.commands[role]], env=self.worker_env(metrics_port),
                                    stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)


def ports_in_a_row(n: int) -> int:
    """A port ``p`` such that ``p + 1`` ... ``p + n`` can all be bound now (``p`` itself is the supervisor's)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n <= 65535 and all(port_is_free("127.0.0.1", base + i) for i in range(1, n + 1)):
            return base
    raise AssertionError(f"no {n} free ports in a row")


def logging_fleet(tmp_path: Path, commands: dict[str, str], metrics_port: int) -> tuple[LoggingShellFleet, list[str]]:
    events: list[str] = []
    fleet = LoggingShellFleet(Settings(bootstrap_servers="unused:9092", metrics_port=metrics_port), roles=(),
                              log_dir=tmp_path, supervise=True, on_event=events.append,
                              policy=RestartPolicy(base_s=0.05, cap_s=0.2, healthy_after_s=5.0, crash_loop_after=3))
    fleet.commands = commands
    return fleet, events


def test_worker_metrics_ports_skip_a_port_another_process_holds(tmp_path: Path) -> None:
    base = ports_in_a_row(3)
    fleet, events = logging_fleet(tmp_path, {"text": "sleep 60", "ocr": "sleep 60"}, base)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", base + 1))
        taken.listen()
        try:
            fleet.spawn("text")
            fleet.spawn("ocr")
            assert [s.metrics_port for s in fleet.slots] == [base + 2, base + 3]
            assert any(f"127.0.0.1:{base + 1} is taken by another process: skipped" in e for e in events), events
        finally:
            fleet.stop()


#: a worker that cannot bind the port its ``taken`` file names logs what a real one does, and exits 78.
PORT_WORKER = (
    'if [ "$RTAUDIT_METRICS_PORT" = "$(cat {taken})" ]; then echo "[2026-12-05 10:00:00,000] [42] [CRITICAL] '
    'the text worker cannot serve its metrics on 127.0.0.1:$RTAUDIT_METRICS_PORT (Address already in use): set '
    'metrics_port (RTAUDIT_METRICS_PORT) to a free port, or 0 for no metrics"; exit 78; fi; sleep 60'
)


def test_a_worker_whose_metrics_port_was_taken_is_restarted_at_once_on_the_next_free_port(tmp_path: Path) -> None:
    base = ports_in_a_row(3)
    (tmp_path / "taken").write_text(str(base + 1))
    fleet, events = logging_fleet(tmp_path, {"text": PORT_WORKER.format(taken=tmp_path / "taken")}, base)
    with socket.socket() as taken:  # taken after the fleet chose it: the worker itself finds out
        fleet._next_metrics_port = lambda: base + 1  # type: ignore[method-assign]  # the choice before the port was taken
        fleet.spawn("text")
        del fleet._next_metrics_port
        taken.bind(("127.0.0.1", base + 1))
        taken.listen()
        try:
            run_checks(fleet, 0.5)
            (slot,) = fleet.slots
            assert slot.metrics_port == base + 2 and slot.proc.poll() is None and fleet.restarts == {"text": 1}
            (line,) = [e for e in events if "exit 78" in e]
            assert f"cannot serve its metrics on 127.0.0.1:{base + 1} (Address already in use)" in line, line
            assert f"restarting it now with metrics on 127.0.0.1:{base + 2} instead of {base + 1}" in line, line
            assert fleet.exited() == []
        finally:
            fleet.stop()


def test_a_worker_that_never_binds_its_metrics_port_is_given_up_and_named(tmp_path: Path) -> None:
    base = ports_in_a_row(6)
    fleet, events = logging_fleet(tmp_path, {"text": 'echo "[CRITICAL] the text worker cannot serve its metrics on '
                                             '127.0.0.1:$RTAUDIT_METRICS_PORT (Cannot assign requested address)"; exit 78'}, base)
    fleet.spawn("text")
    run_checks(fleet, 1.0)
    try:
        (slot,) = fleet.slots
        assert slot.gave_up and fleet.restarts == {"text": 2}
        assert fleet.exited() == [f"text (exit 78, 3 failures in a row: the text worker cannot serve its metrics on "
                                  f"127.0.0.1:{base + 3} (Cannot assign requested address))"]
        assert "not restarted: 3 metrics ports in a row could not be bound on 127.0.0.1" in events[-1], events
    finally:
        fleet.stop()


def test_an_exit_is_reported_with_the_reason_from_this_run_of_the_log(tmp_path: Path) -> None:
    crash = f"{sys.executable} -c \"raise RuntimeError('model file missing: /models/text.onnx')\""
    (tmp_path / "text-0.log").write_text("ValueError: an old run's reason\n")
    fleet, events = logging_fleet(tmp_path, {"text": crash}, 0)
    fleet.spawn("text")
    run_checks(fleet, 0.5)
    fleet.stop()
    exits = [e for e in events if "exited with exit 1" in e]
    assert exits and all(e.endswith("(RuntimeError: model file missing: /models/text.onnx); restarting in "
                                     f"{e.split('restarting in ')[1]}") for e in exits), exits
    assert not any("an old run's reason" in e for e in events)


@pytest.mark.parametrize("log, reason", [
    ("[2026-12-05 10:00:00,1] [7] [INFO] ready\n[2026-12-05 10:00:01,1] [7] [ERROR] [^Worker]: Error: KafkaError\n"
     "[2026-12-05 10:00:02,1] [7] [CRITICAL] [^Worker]: We experienced a crash! Reraising original exception...\n",
     "[^Worker]: Error: KafkaError"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 1\naiokafka.errors.KafkaConnectionError: Unable to bootstrap\n"
     "[2026-12-05 10:00:02,1] [7] [INFO] [^Worker]: Stopping...\n", "aiokafka.errors.KafkaConnectionError: Unable to bootstrap"),
    ("[2026-12-05 10:00:00,1] [7] [INFO] all good\n", None),
])
def test_the_reason_is_the_last_traceback_or_error_line(tmp_path: Path, log: str, reason: str | None) -> None:
    (tmp_path / "w.log").write_text(log)
    assert exit_reason(tmp_path / "w.log") == reason
    assert exit_reason(tmp_path / "missing.log") is None
