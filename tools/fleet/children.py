"""Child processes that never outlive the process that started them (Linux).

Every process the CLI starts (the embedded broker, the workers, the bench's naive
consumer) is started with :func:`popen_options`:

* ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` in the child before ``exec``: the kernel kills
  the child when its parent dies, whatever ended the parent (SIGTERM, SIGHUP, SIGKILL,
  a crash). The signal fires when the *thread* that forked the child exits, so a
  supervisor thread must outlive the children it starts (``Fleet.stop`` stops the
  children before it joins its thread).
* its own session and process group (``setsid``): a Ctrl-C in the terminal reaches the
  parent only, which then stops its children in order; :func:`stop_group` signals the
  whole group, so a child's own children go too.

Elsewhere than Linux only the process group is used (no parent-death signal).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)
#: ``<linux/prctl.h>``
PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - every Linux libc has prctl
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


#: resolved once, in the parent: the child only calls it (nothing is loaded after ``fork``).
_PRCTL = _load_prctl()


def die_with_parent_preexec(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks the kernel to send ``sig`` to the child when this process
    (the thread calling ``Popen``) dies; ``None`` where the platform has no ``prctl``.

    If the parent died between ``fork`` and ``prctl`` (the child's parent is no longer
    the one that forked it), the child kills itself."""
    if _PRCTL is None:
        return None
    prctl, parent = _PRCTL, os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def popen_options() -> dict[str, Any]:
    """``subprocess.Popen`` keyword arguments for a child that dies with its parent and
    leads its own process group."""
    return {"preexec_fn": die_with_parent_preexec(), "start_new_session": True}


def stop_group(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, timeout_s: float = 15.0) -> int | None:
    """Send ``sig`` to ``proc``'s process group, then :func:`reap_group`. Returns the exit code."""
    if proc.poll() is None:
        signal_group(proc, sig)
    return reap_group(proc, timeout_s)


def reap_group(proc: subprocess.Popen[Any], timeout_s: float = 15.0) -> int | None:
    """Wait up to ``timeout_s`` for ``proc`` to exit, then SIGKILL what is left of its process
    group (the child itself if it lingers, and any process it started). Returns the exit
    code (``None`` if it could not be reaped)."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        log.warning("pid %s did not stop within %.0f s: SIGKILL", proc.pid, timeout_s)
    signal_group(proc, signal.SIGKILL)
    try:
        return proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process in uninterruptible sleep
        return None


def signal_group(proc: subprocess.Popen[Any], sig: int) -> None:
    """Send ``sig`` to the process group ``proc`` leads (to ``proc`` alone if there is none)."""
    try:
        os.killpg(proc.pid, sig)  # the child leads its group: pgid == pid
    except (ProcessLookupError, PermissionError):
        if proc.poll() is None:
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass


def raise_keyboard_interrupt_on(*signals: int) -> None:
    """Make ``signals`` (default SIGTERM and SIGHUP) unwind the main thread like Ctrl-C, so
    ``finally`` blocks stop the children in order. Call from the main thread."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    for sig in signals or (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)
