"""The batch loop: one thread that runs a role's :class:`rtaudit.workers.runtime.handler.Handler`
between an :class:`rtaudit.workers.runtime.intake.Intake` (the consumer) and an
:class:`rtaudit.workers.runtime.emitter.Emitter` (the producer). The router, fusion and explain
roles run on it.

Each turn: fetch up to ``batch_size`` records (the first waits up to ``poll_timeout_s``), hand
them to ``handler.handle``, then ``handler.tick``, and send what they return to the producer
without awaiting each delivery. Every ``commit_interval_s`` a checkpoint commits, in this order
(:meth:`BatchLoop.checkpoint`):

1. ``producer.flush()`` — wait until the broker acknowledged every output produced so far;
2. raise :class:`rtaudit.workers.runtime.emitter.DeliveryFailed` if any delivery failed (the
   worker crashes, nothing is committed past the failed output, its input is consumed again);
3. commit the offsets the handler says are safe (``handler.commit_offsets``).

So an offset is never committed before its outputs are on the broker (at-least-once). A revoke
checkpoints the revoked partitions synchronously (unless the loop failed) before the handler
drops them; a lost partition is dropped without a commit (another member owns it).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rtaudit.engine.clock import now_ms
from rtaudit.engine.policy import PolicyBook
from rtaudit.workers.control import ControlPlane
from rtaudit.workers.runtime.emitter import Emitter
from rtaudit.workers.runtime.handler import Handler, HandlerContext
from rtaudit.workers.runtime.intake import Intake
from rtaudit.workers.runtime.records import TP
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)
#: how long a loop waits at start for the control topic to be read to its end, s.
CONTROL_CATCH_UP_S = 15.0


class BatchLoop:
    """One consumer-group member, one producer and a handler, run in one thread (module doc).

    Args:
        settings: client profile and bootstrap.
        group_id: consumer group.
        topics: topics to subscribe to.
        make_handler: builds the handler (called once, in the constructor).
        role: log, DLQ and metric label.
        batch_size: most records per fetch.
        poll_timeout_s: longest wait for the first record of a batch, s (also the
            granularity of ``handler.tick``).
        commit_interval_s: seconds between checkpoints.
        control_role: when set, the loop runs a :class:`rtaudit.workers.control.ControlPlane` for that
            role (reader of ``audit.control``, heartbeats with the handler's ``status()``) from
            :meth:`run` until it ends, and the handler's ``policies()`` follow its changes.
    """

    def __init__(
        self, settings: Settings, group_id: str, topics: list[str], make_handler: Callable[[HandlerContext], Handler], *,
        role: str, batch_size: int = 2000, poll_timeout_s: float = 0.02, commit_interval_s: float = 0.5,
        control_role: str | None = None, **consumer_extra: Any,
    ) -> None:
        self.settings, self.group_id, self.role = settings, group_id, role
        self.batch_size, self.poll_timeout_s, self.commit_interval_s = batch_size, poll_timeout_s, commit_interval_s
        self.emitter = Emitter(settings, role, name=group_id)
        self.intake = Intake(settings, group_id, topics, group_id, **consumer_extra)
        #: set by :meth:`stop` (any thread), read by the loop thread.
        self._stop = threading.Event()
        #: loop thread only: after a failure nothing is committed (the input is consumed again).
        self._failed = False
        #: the settings' tenant policies, built once (``Settings.policies`` builds a new book per call).
        self._base_policies = settings.policies
        self.control: ControlPlane | None = None
        if control_role is not None:
            self.control = ControlPlane(settings, control_role, dead_letters=control_role == "router", status=self._status)
        self.handler = make_handler(HandlerContext(self.policies, self.intake.consumer))

    def policies(self) -> PolicyBook:
        """The settings' tenant policies with the control topic's ``policy:`` and unexpired
        ``priority:`` records applied (the same object until something changes)."""
        if self.control is None:
            return self._base_policies
        return self.control.policy_book(self._base_policies)

    def _status(self) -> dict[str, Any]:
        return self.handler.status()

    def checkpoint(self, tps: list[TP] | None = None) -> None:
        """Flush the producer, fail on any lost output, then commit (order in the module doc);
        ``tps``: only those partitions, synchronously (a revoke)."""
        self.emitter.flush_or_raise()
        self.intake.commit(self.handler.commit_offsets(tps), sync=tps is not None)

    def _on_assign(self, tps: list[TP]) -> None:
        self.handler.assigned(tps)

    def _on_revoke(self, tps: list[TP]) -> None:
        try:
            if not self._failed:
                self.checkpoint(tps)
        finally:
            self.handler.revoked(tps)

    def _on_lost(self, tps: list[TP]) -> None:
        self.handler.revoked(tps)

    def run(self) -> None:
        """Fetch, handle, tick, emit and checkpoint until :meth:`stop`. Raises
        :class:`rtaudit.workers.runtime.emitter.DeliveryFailed` (and whatever the handler
        raises): the caller crashes the worker."""
        if self.control is not None:
            self.control.start()
            if not self.control.wait_caught_up(CONTROL_CATCH_UP_S):
                log.warning("%s: audit.control not read to its end within %.0f s; starting with what was applied",
                            self.group_id, CONTROL_CATCH_UP_S)
        self.intake.subscribe(self._on_assign, self._on_revoke, self._on_lost)
        next_checkpoint = time.monotonic() + self.commit_interval_s
        handler, emitter = self.handler, self.emitter
        try:
            while not self._stop.is_set():
                records = self.intake.fetch(self.batch_size, self.poll_timeout_s)
                if records:
                    emitter.emit(handler.handle(records, now_ms()))
                emitter.emit(handler.tick(now_ms()))
                emitter.poll(0)
                if time.monotonic() >= next_checkpoint:
                    self.checkpoint()
                    next_checkpoint = time.monotonic() + self.commit_interval_s
            self.checkpoint()
        except BaseException:
            self._failed = True
            raise
        finally:
            self.intake.close()  # leaves the group (revoke → final checkpoint, unless it failed)
            if self.control is not None:
                self.control.stop()

    def stop(self) -> None:
        """Ask :meth:`run` to finish its batch, checkpoint and leave the group (any thread)."""
        self._stop.set()


def run_in_faust(app: Any, make_loop: Callable[[], BatchLoop]) -> None:
    """Run the loop ``make_loop()`` builds as a task of the Faust ``app``, in its own thread.
    Faust's shutdown stops it (final checkpoint, group leave); a failure crashes the app."""

    @app.task  # type: ignore[untyped-decorator]  # faust's App.task is not annotated
    async def _run_batch_loop() -> None:
        loop = asyncio.get_running_loop()
        batch_loop = await loop.run_in_executor(None, make_loop)
        done = loop.run_in_executor(None, batch_loop.run)
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            batch_loop.stop()
            await asyncio.wait({done}, timeout=30)
            raise
        except Exception as exc:
            log.exception("%s batch loop failed; crashing the worker (uncommitted input is consumed again)", batch_loop.group_id)
            await app.crash(exc)
