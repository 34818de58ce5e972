"""The pending table of one ``audit.scores`` partition: fusion state indexed by deadline
and by first offset, so fusion can be rebuilt by replay instead of from a changelog.

Pure (no Kafka): the worker feeds it records with their offsets and the clock, and asks
it three things:

* :meth:`PendingTable.apply` — the verdict a record completes, if any;
* :meth:`PendingTable.due` — verdicts whose deadline (+ grace) passed, popped from a
  heap (O(log n) per due request, never a scan of the table), and decided entries whose
  retention ended, popped from the head of a queue;
* :meth:`PendingTable.commit_offset` — the offset fusion may commit: the first offset of
  the oldest request still waiting for its verdict (or, with none waiting, the offset after
  the last record applied). A fusion that restarts from that offset replays every record
  of every undecided request, so nothing is lost whatever the broker's changelog or
  end-offset behaviour (docs/broker.md: tansu's end offset breaks Faust's table recovery).

One verdict per request, however late its records come back. A decided request's id is
remembered until ``max(decided_at, deadline + grace) + retention_ms`` (its deadline is known
when it is decided; :meth:`PendingTable.mark_decided` is told it when the caller knows it).
Records of a decided request come back in two ways, and each is bounded by a committed offset:

1. fusion's own replay after a restart or a rebalance starts at fusion's committed offset,
   which never passes the first record of an undecided request (:meth:`commit_offset`);
   requests decided before the restart whose records lie past it would be decided again,
   so the worker first reads the keys of the verdicts it already produced (``audit.verdicts``,
   same partition) and calls :meth:`mark_decided`;
2. an upstream worker that consumes its input again after a crash or a rebalance replays what
   its group had not committed (its committed offset bounds the replay). A modality worker's
   replayed partial can come at any time, even long after the deadline (a finished record stays
   uncommitted behind an older unfinished one of its partition, which may have a longer SLO):
   until ``deadline + grace + retention_ms`` it finds the id remembered, and after that it is
   dropped as ``late``, because a request unknown past ``deadline + grace`` was decided then
   and forgotten since. The router replays manifests within its commit interval (0.5 s) and a
   restart: seconds, inside the retention.

A record of a request remembered as decided is dropped and counted (``decided``), as is a late
partial (``late``); :meth:`PendingTable.take_dropped` hands the counts to the worker's metrics.
A partial therefore never decides a request twice; only a manifest replayed more than
``retention_ms`` after ``deadline + grace`` (a router down that long with uncommitted requests)
could.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass

from rtaudit.engine.fusion import Fusion, FusionState
from rtaudit.schemas.messages import FusionTick, Manifest, PartialScore, Verdict


@dataclass(frozen=True)
class DecidedRequest:
    """A request fusion has just decided: its verdict, and the lane it rode (``None`` when the manifest never
    came). (Not :data:`rtaudit.schemas.messages.Decision`, the verdict's allow/review/block.)"""

    verdict: Verdict
    lane: str | None


class PendingTable:
    """Fusion state of one partition.

    Args:
        fusion: the fusion rules (grace and retention come from it, ms).
    """

    def __init__(self, fusion: Fusion) -> None:
        self.fusion = fusion
        #: request id → state; decided requests keep a stripped state for ``retention_ms``.
        self.states: dict[str, FusionState] = {}
        #: request id → offset of its first record, for undecided requests only.
        self._first_offset: dict[str, int] = {}
        #: (first offset, request id) of undecided requests; stale entries skipped lazily.
        self._by_offset: list[tuple[int, str]] = []
        #: (deadline + grace ms, request id); stale entries skipped or re-pushed lazily.
        self._by_deadline: list[tuple[int, str]] = []
        #: (when a decided id may be forgotten, ms: see the module doc; request id), a min-heap.
        self._expiry: list[tuple[int, str]] = []
        #: records dropped since :meth:`take_dropped`, by reason (``decided``, ``late``).
        self._dropped: Counter[str] = Counter()
        #: offset after the last record applied (``None`` before the first).
        self.next_offset: int | None = None

    def __len__(self) -> int:
        return len(self.states)

    @property
    def undecided(self) -> int:
        """Requests still waiting for their verdict."""
        return len(self._first_offset)

    def mark_decided(self, request_id: str, now_ms: int, deadline_ms: int | None = None) -> None:
        """Record that ``request_id`` already has a verdict (read back from ``audit.verdicts``):
        its records are dropped and decide nothing until ``max(now_ms, deadline_ms + grace) +
        retention_ms`` (``deadline_ms``: the verdict's, when the caller read it; ms)."""
        state = self.states.get(request_id)
        if state is not None and state.decided_at_ms is not None:
            return
        self._forget_undecided(request_id)
        self.states[request_id] = FusionState(request_id=request_id, first_seen_ms=now_ms, decided_at_ms=now_ms)
        self._remember(request_id, now_ms, deadline_ms)

    def _remember(self, request_id: str, now_ms: int, deadline_ms: int | None) -> None:
        keep_from = now_ms if deadline_ms is None else max(now_ms, deadline_ms + self.fusion.grace_ms)
        heapq.heappush(self._expiry, (keep_from + self.fusion.retention_ms, request_id))

    def take_dropped(self) -> Counter[str]:
        """Records dropped since the last call, by reason: ``decided`` (its request has its
        verdict) or ``late`` (a partial past ``deadline + grace + retention`` of a request not
        known). Resets the counts."""
        out, self._dropped = self._dropped, Counter()
        return out

    def skip(self, offset: int) -> None:
        """Move past a record that carries no state (a DLQ-bound record): only the position moves."""
        self.next_offset = max(self.next_offset or 0, offset + 1)

    def apply(self, record: Manifest | PartialScore | FusionTick, offset: int, now_ms: int) -> DecidedRequest | None:
        """Apply the record at ``offset``. Returns the request's decision when this record
        completes it (at most once per request). A :class:`FusionTick` on the topic (written
        by fusion before the replay design) carries nothing: it only moves the position."""
        self.skip(offset)
        if isinstance(record, FusionTick):
            return None
        rid = record.request_id
        state = self.states.get(rid)
        if state is not None and state.decided_at_ms is not None:
            self._dropped["decided"] += 1  # duplicate or replayed: the verdict is out already
            return None
        if state is None and isinstance(record, PartialScore) and now_ms >= self.late_after_ms(record.deadline_ms):
            # its request was decided (by its deadline + grace at the latest) and forgotten after
            # the retention: a new entry would give it a second, different verdict ("manifest
            # missing"). A manifest is never dropped, so a request still gets its verdict.
            self._dropped["late"] += 1
            return None
        if state is None:
            self._first_offset[rid] = offset
            heapq.heappush(self._by_offset, (offset, rid))
        old_deadline = state.deadline_ms if state is not None else None
        new_state, verdict = self.fusion.apply(state, record, now_ms)
        assert new_state is not None  # apply deletes only on ticks
        self.states[rid] = new_state
        if verdict is not None:
            return self._decided(new_state, verdict, now_ms)
        if new_state.deadline_ms is not None and new_state.deadline_ms != old_deadline:
            heapq.heappush(self._by_deadline, (new_state.deadline_ms + self.fusion.grace_ms, rid))
        return None

    def late_after_ms(self, deadline_ms: int) -> int:
        """From this time on, a partial of a request the table does not know is absorbed:
        its request was decided at ``deadline_ms`` + grace at the latest, and forgotten
        ``retention_ms`` later."""
        return deadline_ms + self.fusion.grace_ms + self.fusion.retention_ms

    def due(self, now_ms: int) -> list[DecidedRequest]:
        """Decisions for requests whose deadline + grace passed by ``now_ms`` (incomplete
        verdicts), and removal of decided entries whose retention ended."""
        out: list[DecidedRequest] = []
        heap = self._by_deadline
        while heap and heap[0][0] <= now_ms:
            due_at, rid = heapq.heappop(heap)
            state = self.states.get(rid)
            if state is None or state.decided_at_ms is not None or state.deadline_ms is None:
                continue
            if state.deadline_ms + self.fusion.grace_ms != due_at:
                continue  # the manifest moved the deadline: the entry for the new one decides
            new_state, verdict = self.fusion.apply(state, FusionTick(request_id=rid, reason="deadline", at_ms=now_ms), now_ms)
            if verdict is not None and new_state is not None:
                out.append(self._decided(new_state, verdict, now_ms))
        while self._expiry and self._expiry[0][0] <= now_ms:
            _, rid = heapq.heappop(self._expiry)
            state = self.states.get(rid)
            if state is not None and state.decided_at_ms is not None:
                del self.states[rid]
        return out

    def commit_offset(self) -> int | None:
        """The offset that is safe to commit: the first offset of the oldest undecided
        request, else the offset after the last record applied (``None`` before any)."""
        heap = self._by_offset
        while heap and self._first_offset.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        if heap:
            return heap[0][0]
        return self.next_offset

    def _decided(self, state: FusionState, verdict: Verdict, now_ms: int) -> DecidedRequest:
        lane = state.manifest.lane if state.manifest is not None else None
        self._forget_undecided(state.request_id)
        # keep only what deduplication needs: the evidence and partials are in the verdict
        self.states[state.request_id] = FusionState(
            request_id=state.request_id, first_seen_ms=state.first_seen_ms, decided_at_ms=now_ms
        )
        self._remember(state.request_id, now_ms, verdict.deadline_ms)
        return DecidedRequest(verdict, lane)

    def _forget_undecided(self, request_id: str) -> None:
        self._first_offset.pop(request_id, None)  # heap entries go stale and are skipped
