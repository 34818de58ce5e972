"""Children die with their parent whatever ends it (Linux ``PR_SET_PDEATHSIG``), and
:func:`stop_group` ends a child's whole process group. Real processes, no broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtaudit.tools.fleet.children import popen_options, stop_group

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")

#: a parent that starts one ``sleep`` child the way the CLI does, prints its pid, and waits. It first
#: resets SIGTERM and SIGHUP to their defaults: exec keeps an ignored disposition and the blocked-signal
#: mask, and an earlier test in the same pytest process can leave either behind (the full unit suite then
#: timed out on SIGTERM while this file alone passed).
PARENT = """
import signal, subprocess, sys, time
for s in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGHUP})
from rtaudit.tools.fleet.children import popen_options
child = subprocess.Popen(["sleep", "120"], **popen_options())
print(child.pid, flush=True)
time.sleep(120)
"""


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (``/proc/<pid>/stat`` state ``Z``)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_gone(pid: int, timeout_s: float = 5.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_the_child_dies_with_its_parent(sig: int) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[2])
    child = int(parent.stdout.readline())  # type: ignore[union-attr]
    try:
        assert alive(child)
        parent.send_signal(sig)
        parent.wait(10)
        assert wait_gone(child), f"child {child} outlived its parent (signal {sig})"
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


def test_stop_group_ends_the_child_and_its_own_children() -> None:
    proc = subprocess.Popen(["sh", "-c", "sleep 120 & echo $!; wait"], stdout=subprocess.PIPE, text=True, **popen_options())
    grandchild = int(proc.stdout.readline())  # type: ignore[union-attr]
    assert alive(grandchild)
    stop_group(proc, signal.SIGTERM, timeout_s=5)
    assert proc.poll() is not None
    assert wait_gone(grandchild)
