"""Why a supervised worker exited: how its exit status reads, and the reason its log gives."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

#: the last line of a Python traceback (``OSError: [Errno 98] ...``, ``pkg.FooError: ...``).
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?$")
#: a log line at ERROR or CRITICAL (Faust's format ``[time] [pid] [LEVEL] message``, or ``... LEVEL message``).
_LEVEL_LINE = re.compile(r"(?:\[(?:ERROR|CRITICAL)\]|\s(?:ERROR|CRITICAL)\s)\s*(.*)$")
#: Faust's own last words, which name no reason.
_FAUST_CRASH = "We experienced a crash"


def exit_reason(log_path: Path, since: int = 0, max_bytes: int = 65536, max_chars: int = 240) -> str | None:
    """Why a worker ended, from its log past byte ``since`` (at most its last ``max_bytes``): the last
    line that ends a traceback or is logged at ERROR or CRITICAL (Faust's "We experienced a crash"
    excepted), cut to ``max_chars``. ``None`` when the log names no reason or cannot be read."""
    try:
        with open(log_path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(since, size - max_bytes))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    reason = next((r for ln in reversed(lines) if (r := _reason(ln))), None)
    if reason is None or len(reason) <= max_chars:
        return reason
    return reason[: max_chars - 1] + "…"


def _reason(line: str) -> str | None:
    """``line`` when it ends a traceback, its message when it is an ERROR or CRITICAL log line, else ``None``."""
    line = line.strip()
    if _EXCEPTION_LINE.match(line):
        return line
    m = _LEVEL_LINE.search(line)
    return m.group(1).strip() or None if m and _FAUST_CRASH not in line else None


def describe_exit(code: int | None) -> str:
    """``exit 1`` or ``signal SIGKILL`` (Popen's negative return codes)."""
    if code is not None and code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit {code}"
