"""Run native code on untrusted bytes in a child process, with a time limit.

FFmpeg's demuxers and decoders (PyAV) parse whatever a producer sent; a crash there (a
segmentation fault, an abort) would kill the worker and every item of its batch, and a hang
would stall it. :class:`Isolated` runs one call per child process, started from a forkserver
whose process has the decoding modules imported already (a call costs a fork, not an
interpreter start), and waits at most ``timeout_s``: a child that dies costs its item
(``MediaUndecodable`` naming the signal), one that overruns is killed (``MediaUndecodable``
naming the limit). The worker keeps serving either way.

Sources: Python's ``multiprocessing`` forkserver start method (a clean single-threaded server:
forking the worker itself, which runs onnxruntime, CTranslate2 and librdkafka threads, could
deadlock the child).
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from rtaudit.schemas.errors import InferenceFailed, MediaUndecodable, describe

T = TypeVar("T")


def _child(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        result: tuple[bool, Any] = (True, fn(*args, **kwargs))
    except BaseException as exc:  # sent to the parent, which raises it for this item
        result = (False, exc)
    try:
        conn.send(result)
    except Exception as exc:  # an unpicklable result or exception
        conn.send((False, InferenceFailed(f"the child's answer could not be sent back: {describe(exc)}")))
    conn.close()


class Isolated:
    """Calls ``fn(*args, **kwargs)`` in a child process each (see the module docstring).

    Args:
        timeout_s: longest a call may take, seconds (child start included).
        preload: modules the forkserver imports once, so each child has them.
    """

    def __init__(self, timeout_s: float, preload: Sequence[str] = ()) -> None:
        self.timeout_s = timeout_s
        self._ctx = multiprocessing.get_context("forkserver")
        if preload:
            self._ctx.set_forkserver_preload(list(preload))

    def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``'s result, or the exception it raised, re-raised here.

        Raises:
            MediaUndecodable: the child died (a signal, an exit) or took over ``timeout_s``.
        """
        receiver, sender = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(target=_child, args=(sender, fn, args, kwargs), daemon=True)
        proc.start()
        sender.close()
        try:
            if not receiver.poll(self.timeout_s):
                proc.kill()
                raise MediaUndecodable(f"decoding took over {self.timeout_s:g} s: stopped (the worker goes on)")
            try:
                ok, value = receiver.recv()
            except EOFError:
                proc.join(5.0)
                raise MediaUndecodable(f"the decoder crashed on this item ({_exit(proc.exitcode)}); the worker goes on") from None
        finally:
            receiver.close()
            proc.join(5.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]  # the child's return value crosses a pipe untyped


def _exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
