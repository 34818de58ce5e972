"""Records held beside a modality worker's batcher, and the record type of the intake.

* :class:`Work` — a consumed record and its decoded task;
* :class:`HeldRecords` — what both holders share: records held in arrival order, moved into the
  batcher as their lane makes room, dropped when their partition is revoked;
* :class:`LowLaneOverflow` — low-lane records waiting while the batcher's low lane is full (the
  low lane's partitions are paused from :data:`LO_OVERFLOW_PAUSE` held on);
* :class:`HighLaneHold` — high-lane records waiting while the batcher's high lane is full, so that
  the low-lane records consumed with them still reach the batcher and the low lane keeps its
  share under saturation (the high lane's partitions are paused while any are held).

Both run on the event loop; :class:`rtaudit.workers.runtime.lane_intake.LaneIntake` owns them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rtaudit.engine.batcher import Batcher
from rtaudit.engine.lane_queue import LaneName
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.messages import ModalityTask
from rtaudit.workers.runtime.records import TP, Record, raw_value, tp_of

if TYPE_CHECKING:
    from rtaudit.workers.runtime.lane_intake import LaneControl

#: most records one ``consume`` call returns.
INTAKE_BATCH = 1000
#: held low-lane records (beyond the batcher's full low lane) at which the low lane's
#: partitions are paused, or held bytes (record values), whichever comes first. A pause
#: makes librdkafka drop what it prefetched for them, re-fetched on resume: pausing at 2,000
#: held (resuming at 500) cycled every ~1,500 records and cost a null-model text worker a
#: third of its throughput (60,000 tasks at once, A/B in one sitting: 10.3-10.8k vs
#: 15.4-22.0k records/s with these bounds; broker CPU per 1,000 records 0.033 vs 0.014-0.020 s).
LO_OVERFLOW_PAUSE = 20 * INTAKE_BATCH
LO_OVERFLOW_PAUSE_BYTES = 32 * 1024 * 1024
#: ...and at or below which (records and bytes) they are resumed: what is held and batched
#: then covers the re-fetch many times over.
LO_OVERFLOW_RESUME = 5 * INTAKE_BATCH
LO_OVERFLOW_RESUME_BYTES = 8 * 1024 * 1024
#: held records or bytes past which the intake stops fetching (both lanes) until the held
#: backlog shrinks: the bound of the worker's memory for records held beside the batcher.
#: At most one consumed batch arrives after the pause, so it is rarely reached.
LO_OVERFLOW_MAX = 2 * LO_OVERFLOW_PAUSE
LO_OVERFLOW_MAX_BYTES = 2 * LO_OVERFLOW_PAUSE_BYTES


#: characters of text per batch slot: about one 64-word-piece encoder window of English
#: (engine/text/windows.py), so a 32,000-character text takes ~125 slots (a batch of its own).
TEXT_CHARS_PER_SLOT = 256


def task_cost(task: ModalityTask) -> float:
    """Batch slots a task takes (:meth:`rtaudit.engine.batcher.Batcher.put`'s ``cost``): its text's
    length in :data:`TEXT_CHARS_PER_SLOT`, at least 1 (media tasks: 1)."""
    return max(1.0, len(task.text or "") / TEXT_CHARS_PER_SLOT)



@dataclass(eq=False, slots=True)
class Work:
    """A consumed record of a lane topic, decided once at intake: its ``lane`` (from its topic),
    its decoded ``task`` (whose ``deadline_ms`` the router decided) or the ``error`` that sends
    it to the DLQ (then ``task`` is ``None``). ``tp`` (its partition) and ``nbytes`` (its
    value's size, bytes) are read once, at construction. Identity is the object's: a record
    consumed again after a rebalance is a new :class:`Work`."""

    message: Record
    lane: LaneName
    task: ModalityTask | None
    error: AuditError | None = None
    tp: TP = field(init=False)
    nbytes: int = field(init=False)
    #: the Kafka headers of its output (trace context), set by :func:`rtaudit.workers.tracing.batch_spans`.
    trace_headers: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.tp = tp_of(self.message)
        self.nbytes = len(raw_value(self.message))

    @property
    def live_task(self) -> ModalityTask:
        """The decoded task. Raises ``ValueError`` for a record bound for the DLQ (only decoded
        records enter the batcher)."""
        if self.task is None:
            raise ValueError(f"{self.tp} offset {self.message.offset()} did not decode: {self.error}")
        return self.task


async def put_work(batcher: Batcher[Work], work: Work, lane: LaneName) -> None:
    """Put a decoded record in the batcher on ``lane`` with its task's deadline, tenant and cost
    (waits while the lane is full). Raises ``ValueError`` for a record that did not decode."""
    task = work.live_task
    await batcher.put(work, lane, task.deadline_ms, tenant=task.tenant_id, cost=task_cost(task))


class HeldRecords:
    """Decoded records of one lane (:attr:`lane`) held in arrival order beside the batcher and moved
    into it as the lane makes room (event loop side). The subclasses decide when a record is held
    and report the held count to the :class:`LaneControl` (:meth:`_report`)."""

    lane: LaneName

    def __init__(self, batcher: Batcher[Any], control: LaneControl | None = None) -> None:
        self.batcher, self.control = batcher, control
        self.held: deque[Work] = deque()
        #: bytes of the held records' values.
        self.held_bytes = 0
        self._drain: asyncio.Future[None] | None = None
        #: the held record :meth:`_drain_held` is putting in the batcher (it gets there, revoked or not).
        self._putting: Work | None = None

    def __len__(self) -> int:
        return len(self.held)

    def _hold(self, work: Work) -> None:
        self.held.append(work)
        self.held_bytes += work.nbytes

    def _start_drain(self) -> None:
        if self.held and (self._drain is None or self._drain.done()):
            self._drain = asyncio.ensure_future(self._drain_held())

    def forget(self, partitions: set[TP]) -> list[Work]:
        """Partitions revoked: their held records are another member's now. Returns them (dropped)."""
        dropped = [w for w in self.held if w.tp in partitions and w is not self._putting]  # that one enters the batcher
        self.held = deque(w for w in self.held if w.tp not in partitions)
        self.held_bytes = sum(w.nbytes for w in self.held)
        self._report()
        return dropped

    def cancel(self) -> None:
        if self._drain is not None:
            self._drain.cancel()

    async def _drain_held(self) -> None:
        while self.held:
            work = self.held[0]
            self._putting = work
            try:
                await put_work(self.batcher, work, self.lane)
            finally:
                self._putting = None
            if self.held and self.held[0] is work:  # else its partition was revoked meanwhile
                self.held.popleft()
                self.held_bytes -= work.nbytes
            self._report()

    def _report(self) -> None:
        raise NotImplementedError


class LowLaneOverflow(HeldRecords):
    """Where a decoded record waits when the batcher's low lane is full (event loop side).

    A high-lane record waits for room in its lane (back-pressure). A low-lane record that
    finds its lane full, or older low-lane records already held, is held here in arrival
    order and moved into the batcher as the lane makes room; from ``LO_OVERFLOW_PAUSE`` held
    (or ``LO_OVERFLOW_PAUSE_BYTES``) the :class:`LaneControl` pauses the low lane's partitions
    (until ``LO_OVERFLOW_RESUME``). Before, the intake awaited room
    record by record, so a full low lane held every high-lane record behind it (bench
    --isolation, ``lower_lane``: a quiet tenant's P99 ×100 beside a flooding one). Past
    ``max_held`` records or ``max_held_bytes`` (record values), :meth:`settle` waits for the
    backlog to shrink (the intake stops).
    """

    lane: LaneName = "lo"

    def __init__(self, batcher: Batcher[Any], control: LaneControl | None = None, max_held: int = LO_OVERFLOW_MAX,
                 max_held_bytes: int = LO_OVERFLOW_MAX_BYTES) -> None:
        super().__init__(batcher, control)
        self.max_held, self.max_held_bytes = max_held, max_held_bytes
        self._below_max = asyncio.Event()

    async def put(self, work: Work) -> None:
        """Queue a decoded record on its lane: the batcher, or held (see the class docstring)."""
        lane = work.lane
        if lane == "lo" and (self.held or self.batcher.queued("lo") >= self.batcher.config.queue_limit):
            self._hold(work)
            return
        await put_work(self.batcher, work, lane)

    async def settle(self) -> None:
        """After a consumed batch: start moving held records, report the count to the lane
        control, and wait while more than ``max_held`` are held."""
        self._report()
        self._start_drain()
        while self._over_max():  # until back under the bound, not until drained
            self._below_max.clear()
            await self._below_max.wait()

    def _over_max(self) -> bool:
        return len(self.held) > self.max_held or self.held_bytes > self.max_held_bytes

    def _report(self) -> None:
        if self.control is not None:
            self.control.lo_overflow = len(self.held)
            self.control.lo_overflow_bytes = self.held_bytes
        if not self._over_max():
            self._below_max.set()


class HighLaneHold(HeldRecords):
    """Where a decoded high-lane record waits when the batcher's high lane is full (event loop side).

    Before, the intake awaited room for it, so every low-lane record consumed after it waited too
    and the intake stopped fetching: with the high lane saturated, the low lane got no record into
    the batcher and its share (``lo_share``) was never served (issue 34: 5 low-lane texts with a
    10 s SLO all expired behind 900 high-lane ones). Now the record is held here, in arrival
    order, and moved into the batcher as the lane makes room; while any is held the
    :class:`rtaudit.workers.runtime.lane_intake.LaneControl` pauses the high lane's partitions
    (``want_hi_paused``), so at most one consumed batch of high-lane records is held, and the
    low lane keeps being fetched. Held records count as the high lane's lag.
    """

    lane: LaneName = "hi"

    async def put(self, work: Work) -> None:
        """Queue a decoded high-lane record: into the batcher when its lane has room and nothing
        is held (no wait), else held (see the class docstring). Never waits for room."""
        if self.held or self.batcher.queued("hi") >= self.batcher.config.queue_limit:
            self._hold(work)
            self._report()
            self._start_drain()
            return
        await put_work(self.batcher, work, "hi")

    def _report(self) -> None:
        if self.control is not None:
            self.control.hi_held = len(self.held)
            self.control.want_hi_paused = bool(self.held)
