"""The supervised fleet on a real embedded broker (only the router: no model to load).

* a worker killed with SIGKILL is restarted and joins its group again;
* a killed embedded broker is restarted, its topics recreated and the workers restarted, and
  the control records it lost (memory-only) named in one line;
* a supervisor killed with ``kill -9`` leaves no child behind (broker, workers, and a
  worker its supervisor thread restarted).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from rtaudit.schemas.control import PriorityPayload
from rtaudit.topics.admin import ensure_topics
from rtaudit.topics.catalog import catalog
from rtaudit.workers.control import publish
from rtaudit.tools.fleet.broker import port_is_free
from rtaudit.tools.fleet.local import Fleet
from rtaudit.workers.settings import Settings
from rtaudit.tools.fleet.supervision import RestartPolicy

from ..unit.test_supervision import ports_in_a_row
from .conftest import free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_for(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def ready_count(log: Path) -> int:
    """How many times the worker logged Faust's ``[^Worker]: Ready`` (it joined its group)."""
    return log.read_text(errors="replace").count("[^Worker]: Ready") if log.exists() else 0


def router_fleet(tmp_path: Path) -> tuple[Fleet, list[str]]:
    events: list[str] = []
    settings = Settings(embedded_port=free_port(), state_dir=tmp_path / "state")
    fleet = Fleet(settings, roles=("router",), log_dir=tmp_path / "logs", env={"RTAUDIT_STATE_DIR": str(tmp_path / "state")},
                  supervise=True, policy=RestartPolicy(base_s=0.2, cap_s=2.0), on_event=events.append)
    return fleet, events


def test_a_killed_worker_and_a_killed_broker_are_restarted(tmp_path: Path) -> None:
    fleet, events = router_fleet(tmp_path)
    log = tmp_path / "logs" / "router-0.log"
    fleet.launch()
    try:
        wait_for(lambda: ready_count(log) == 1, 60, "the router to join its group")
        (first,) = fleet.processes["router"]
        killed_at = time.monotonic()
        first.send_signal(signal.SIGKILL)
        wait_for(lambda: fleet.restarts.get("router") == 1, 10, "the supervisor to restart the router")
        restarted_s = time.monotonic() - killed_at
        (second,) = fleet.processes["router"]
        assert second.pid != first.pid and alive(second.pid)
        wait_for(lambda: ready_count(log) == 2, 60, "the restarted router to join its group")
        print(f"router SIGKILLed: restarted after {restarted_s:.2f} s, in its group again after "
              f"{time.monotonic() - killed_at:.1f} s")
        assert any("router-0" in e and "signal SIGKILL" in e for e in events), events

        publish(fleet.settings, "priority:acme", PriorityPayload(lane="hi"), author="itest")  # a run-time record
        wait_for(lambda: "priority:acme" in fleet.control_watch.state.messages, 10,  # type: ignore[union-attr]
                 "the supervisor to read the control record")
        broker = fleet.broker.process  # type: ignore[union-attr]
        killed_at = time.monotonic()
        broker.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        wait_for(lambda: fleet.restarts.get("broker") == 1 and fleet.restarts.get("router") == 2, 30,
                 "the supervisor to restart the broker and the router")
        assert fleet.broker.process.pid != broker.pid  # type: ignore[union-attr]
        checks = ensure_topics(fleet.settings.bootstrap, catalog(fleet.settings.partitions), create=False)
        assert all(c.state == "exists" for c in checks), checks
        wait_for(lambda: ready_count(log) == 3, 60, "the router to join the new broker's group")
        print(f"broker SIGKILLed: topics back and router in its group after {time.monotonic() - killed_at:.1f} s")
        assert fleet.exited() == []
        # memory-only: what audit.control lost is said in one line
        assert any("audit.control lost 1 run-time record" in e and "priority:acme v1 by itest" in e for e in events), events
    finally:
        fleet.stop()
    assert not alive(second.pid)


#: a supervisor in its own process: a supervised router-only fleet that prints its events.
SUPERVISOR = """
import sys, time
from pathlib import Path
from rtaudit.tools.fleet.local import Fleet
from rtaudit.workers.settings import Settings
from rtaudit.tools.fleet.supervision import RestartPolicy
tmp = Path(sys.argv[2])
fleet = Fleet(Settings(embedded_port=int(sys.argv[1]), state_dir=tmp / "state"), roles=("router",), log_dir=tmp / "logs",
              env={"RTAUDIT_STATE_DIR": str(tmp / "state")}, supervise=True, policy=RestartPolicy(base_s=0.2),
              on_event=lambda m: print(m, flush=True))
fleet.launch()
time.sleep(600)
"""


def test_no_child_outlives_a_supervisor_killed_with_sigkill(tmp_path: Path) -> None:
    sup = subprocess.Popen([sys.executable, "-c", SUPERVISOR, str(free_port()), str(tmp_path)], cwd=ROOT,
                           stdout=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    pids: dict[str, int] = {}
    try:
        for line in sup.stdout:  # type: ignore[union-attr]
            m = re.search(r"(embedded broker|started router-0|restarted router-0).*?pid (\d+)", line)
            if not m:
                continue
            pids[m.group(1)] = int(m.group(2))
            # the group, not a substring test: "restarted router-0" contains "started router-0"
            if m.group(1) == "started router-0":  # kill the worker: the supervisor thread starts the next one
                os.kill(int(m.group(2)), signal.SIGKILL)
            if m.group(1) == "restarted router-0":
                break
        assert set(pids) == {"embedded broker", "started router-0", "restarted router-0"}, pids
        children = [pids["embedded broker"], pids["restarted router-0"]]
        assert all(alive(p) for p in children), {p: alive(p) for p in children}
        sup.send_signal(signal.SIGKILL)
        sup.wait(10)
        wait_for(lambda: not any(alive(p) for p in children), 10, f"children {children} to die with their supervisor")
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()
        for p in pids.values():
            if alive(p):
                os.kill(p, signal.SIGKILL)


def metrics_answer(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_taken_metrics_port_is_skipped_then_a_worker_that_loses_its_own_moves_to_a_free_one(tmp_path: Path) -> None:
    """`rtaudit up` with metrics on: a port another process holds is never assigned; a worker whose port
    is taken while it is down (a restart) says so in one line, exits 78 and comes back on the next free port."""
    base = ports_in_a_row(4)
    events: list[str] = []
    settings = Settings(embedded_port=free_port(), state_dir=tmp_path / "state", metrics_port=base)
    fleet = Fleet(settings, roles=("router",), log_dir=tmp_path / "logs", env={"RTAUDIT_STATE_DIR": str(tmp_path / "state")},
                  supervise=True, policy=RestartPolicy(base_s=1.0, cap_s=2.0), on_event=events.append)
    log = tmp_path / "logs" / "router-0.log"
    with socket.socket() as held, socket.socket() as stolen:
        held.bind(("127.0.0.1", base + 1))
        held.listen()
        fleet.launch()
        try:
            (slot,) = fleet.slots
            assert slot.metrics_port == base + 2, events
            wait_for(lambda: metrics_answer(base + 2), 60, f"the router's /metrics on {base + 2}")
            slot.proc.send_signal(signal.SIGKILL)
            stolen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            wait_for(lambda: port_is_free("127.0.0.1", base + 2) is True, 5, "the killed router's port to be free")
            stolen.bind(("127.0.0.1", base + 2))  # taken before the supervisor restarts the router on it
            stolen.listen()
            wait_for(lambda: slot.metrics_port == base + 3, 30, "the router to exit 78 and get a new port")
            wait_for(lambda: metrics_answer(base + 3), 60, f"the router's /metrics on {base + 3}")
            (line,) = [e for e in events if "exit 78" in e]
            assert (f"(the router worker cannot serve its metrics on 127.0.0.1:{base + 2} (Address already in use): "
                    "set metrics_port (RTAUDIT_METRICS_PORT) to a free port, or 0 for no metrics); restarting it now "
                    f"with metrics on 127.0.0.1:{base + 3} instead of {base + 2}") in line, line
            assert "Traceback" not in log.read_text(errors="replace")
            assert fleet.exited() == []
        finally:
            fleet.stop()
