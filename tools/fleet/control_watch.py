"""What ``audit.control`` holds, kept by the local fleet's supervisor so that a restart of the
memory-only embedded broker can say plainly what it lost (:class:`ControlWatch`).

The embedded broker keeps every record in memory (docs/broker.md): when it dies, the rollouts,
policies and priority overrides published at run time die with it. Workers still running keep
what they applied until they restart; the supervisor restarts every worker with the broker, so
after a restart the fleet serves what ``rtaudit.toml`` says. The supervisor cannot republish the
records itself (a record's version and compare-and-set history would be forged), so it names
each subject that was in force, with its version and author, in one warning line.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Consumer, KafkaException

from rtaudit.engine.control import ControlState
from rtaudit.workers.control import apply_records, reader_consumer
from rtaudit.workers.offsets import OffsetGapGuard
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)
#: seconds between two reads of ``audit.control`` by the supervisor.
REFRESH_S = 2.0


class ControlWatch:
    """A reader of ``audit.control`` (partition 0, from its start; never joins a group) that keeps
    the subjects in force. :meth:`refresh` never blocks (``consume`` with a zero wait)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.state = ControlState()
        self._consumer: Consumer | None = None
        self._guard: OffsetGapGuard | None = None
        self._next_s = 0.0

    def refresh(self, now_s: float | None = None) -> None:
        """Apply what arrived on ``audit.control`` since the last call (at most every :data:`REFRESH_S`)."""
        now_s = time.monotonic() if now_s is None else now_s
        if now_s < self._next_s:
            return
        self._next_s = now_s + REFRESH_S
        try:
            if self._consumer is None:
                self._consumer = reader_consumer(self.settings)
                self._guard = OffsetGapGuard(self._consumer, "control-watch")
            assert self._guard is not None
            while records := self._guard.filter(self._consumer.consume(500, 0)):
                apply_records(self.state, records)
        except KafkaException as exc:  # the broker is down: what was read so far stands
            log.debug("control watch: %s", exc)

    def lost_line(self) -> str:
        """One line: the subjects in force that a memory-only broker's restart has lost."""
        subjects = sorted(self.state.messages.values(), key=lambda m: m.subject)
        if not subjects:
            return "audit.control held no run-time record: nothing lost"
        listed = "; ".join(f"{m.subject} v{m.version} by {m.author}" for m in subjects)
        return (f"audit.control lost {len(subjects)} run-time record{'s' if len(subjects) > 1 else ''} in force "
                f"({listed}): the restarted workers serve rtaudit.toml's settings; republish with `rtaudit control ...`")

    def reset(self) -> None:
        """The broker was replaced: start again from the new (empty) topic."""
        self.close()
        self.state = ControlState()
        self._next_s = 0.0

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError):
                pass
        self._consumer, self._guard = None, None
