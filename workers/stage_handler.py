"""A modality stage's handler: lane records → partial scores on ``audit.scores`` (and, for a
splitting stage, the tasks it split an item into, and DLQ records). It knows nothing of Kafka;
the modality worker (:mod:`rtaudit.workers.modality`) runs its parts on the threads that own
them, the broker-free driver (:mod:`rtaudit.workers.runtime.driver`) runs it whole.

What is decided, once, and travels with the item:

* at intake (:meth:`StageHandler.decode`): the record's **lane** (from its topic) and its task
  (with the **deadline** the router decided) or the error that sends it to the DLQ — a
  :class:`rtaudit.workers.runtime.lane_overflow.Work`;
* when the batch closes (the batcher, or :meth:`StageHandler.handle` for the driver): which
  items are **expired** (:func:`rtaudit.engine.clock.past_deadline`); the inference thread
  scores the others and gives those ``expired`` partials without deciding again
  (:func:`rtaudit.engine.stage.process_batch`'s ``expired``);
* after scoring (:meth:`StageHandler.infer`): one :class:`Scored` per item, holding its
  :class:`Work` — the batch's identity from then on (emit, SLO metrics by lane, acks).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from rtaudit.engine.lane_queue import LaneName
from rtaudit.engine.clock import past_deadline
from rtaudit.engine.stage import BatchResult
from rtaudit.schemas.codec import decode, encode
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.messages import ModalityTask, PartialScore
from rtaudit.topics.catalog import SCORES, lane_topic
from rtaudit.workers import metrics, tracing
from rtaudit.workers.runtime.handler import HandlerBase
from rtaudit.workers.runtime.lane_overflow import Work
from rtaudit.workers.runtime.records import TP, DeadLetter, Emit, Output, Record, raw_value, tp_of

#: scores a batch: ``(tasks, indices of the expired ones) -> BatchResult``
#: (:meth:`rtaudit.workers.serving.ServingSet.score`).
Scorer = Callable[[list[ModalityTask], Collection[int]], BatchResult]


@dataclass(frozen=True, slots=True)
class Scored:
    """One item of a scored batch: its record, its partial (and the partial's encoded value),
    the tasks a splitting stage made of it (produced before the partial), and the error that
    also sends its record to the DLQ."""

    work: Work
    partial: PartialScore
    value: bytes
    subtasks: tuple[ModalityTask, ...] = ()
    error: AuditError | None = None


class StageHandler(HandlerBase):
    """See the module doc.

    Args:
        role: the stage (``text``, ``image``, ``ocr``, ``audio``, ``video``): metric and DLQ label.
        lanes: lane topic → its lane.
        score: scores a batch (:data:`Scorer`); runs in the inference thread.
        known_tenants: tenants named in metrics (others are ``other``).
    """

    def __init__(self, role: str, lanes: dict[str, LaneName], score: Scorer, known_tenants: Collection[str] = ()) -> None:
        self.role, self.lanes, self._score = role, lanes, score
        self.known_tenants = set(known_tenants)
        #: driver only (:meth:`handle`): partition -> offset after the last record handled.
        self.next_offset: dict[TP, int] = {}

    # -- the parts the worker runs on its threads ------------------------------------------
    def decode(self, record: Record) -> Work:
        """Intake thread: the record as a :class:`Work` (lane and task, or the decode error).
        Raises ``KeyError`` for a record of a topic that is not one of :attr:`lanes`."""
        lane = self.lanes[record.topic() or ""]
        try:
            return Work(record, lane, decode(raw_value(record), ModalityTask))
        except AuditError as exc:
            return Work(record, lane, None, exc)

    def infer(self, live: list[Work], expired: list[Work]) -> tuple[list[Scored], BatchResult]:
        """Inference thread: score ``live``, give ``expired`` their ``expired`` partials (no
        inference), encode every partial. Returns one :class:`Scored` per item, ``live`` then
        ``expired``, and the batch's :class:`BatchResult` (timings, model). Raises
        ``ValueError`` for an item that did not decode (they never enter a batch)."""
        works = live + expired
        tasks = [w.live_task for w in works]
        result = self._score(tasks, range(len(live), len(works)))
        failures = dict(result.failures)
        subtasks = dict(result.subtasks)
        scored = [Scored(w, p, encode(p), tuple(subtasks.get(i, ())), failures.get(i))
                  for i, (w, p) in enumerate(zip(works, result.partials, strict=True))]
        return scored, result

    def outputs(self, scored: list[Scored]) -> list[Emit]:
        """What a scored batch produces, in order: per item, the tasks it was split into (on their
        lanes), its partial (``audit.scores``, keyed by request id), its DLQ record when it failed
        that way. Counts partials by status and expired items as SLO misses by lane."""
        out: list[Emit] = []
        statuses: Counter[str] = Counter()
        for s in scored:
            p = s.partial
            for sub in s.subtasks:
                out.append(Output(lane_topic(sub.modality, sub.lane), sub.request_id.encode(), encode(sub)))
            out.append(Output(SCORES, p.request_id.encode(), s.value, headers=tracing.headers_of(s.work)))
            statuses[p.status] += 1
            if p.status == "expired":
                tenant = metrics.tenant_label(p.tenant_id, self.known_tenants)
                metrics.SLO_MISSES.labels(self.role, tenant, s.work.lane, "expired").inc()
            if s.error is not None:
                s.error.request_id = s.error.request_id or p.request_id
                out.append(DeadLetter(s.work.message, s.error))
        for status, n in statuses.items():
            metrics.PARTIALS.labels(self.role, status).inc(n)
        return out

    # -- the whole path at once (the driver) -----------------------------------------------
    def handle(self, records: Sequence[Record], now_ms: int) -> list[Emit]:
        """Decode ``records``, send the undecodable ones to the DLQ, score the rest as one batch
        closed at ``now_ms`` (what is past its deadline then is expired); outputs as the worker
        produces them (DLQ records of undecodable records, then live items, then expired ones)."""
        works = [self.decode(m) for m in records]
        out: list[Emit] = [DeadLetter(w.message, w.error) for w in works if w.error is not None]
        decoded = [w for w in works if w.task is not None]
        expired = [w for w in decoded if past_deadline(w.live_task.deadline_ms, now_ms)]
        live = [w for w in decoded if not past_deadline(w.live_task.deadline_ms, now_ms)]
        if decoded:
            out += self.outputs(self.infer(live, expired)[0])
        for m in records:
            self.next_offset[tp_of(m)] = (m.offset() or 0) + 1
        return out

    def commit_offsets(self, tps: Collection[TP] | None = None) -> dict[TP, int]:
        return {tp: o for tp, o in self.next_offset.items() if tps is None or tp in tps}

    def revoked(self, tps: list[TP]) -> None:
        for tp in tps:
            self.next_offset.pop(tp, None)

