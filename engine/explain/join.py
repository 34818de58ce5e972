"""The explain role's join: image tasks (from the image lanes) meet verdicts and on-demand
requests by request id, in memory, with offsets that are safe to commit. No Kafka here:
positions are plain ``(topic, partition, offset)`` tuples.

* A **task** (one image part of a request, its raw ``ModalityTask`` bytes) is **resolved** when
  its verdict comes (whatever the decision) and is held for on-demand requests until
  ``retention_ms`` after it arrived, or until the byte budget needs its room (the oldest goes
  first). A task evicted unresolved is counted (:attr:`ExplainJoin.evicted_unresolved`):
  its verdict then gets an ``unavailable`` explanation.
* A **verdict** that needs explanations (its decision is in ``decisions``) and names image
  parts the join has not seen yet waits up to ``wait_ms`` for them (the explain consumer reads
  the lanes and ``audit.verdicts`` independently, so a verdict may come first).
* An **on-demand request** for a request id with nothing held waits up to ``wait_ms`` too (the
  request may be read before the lanes' record, e.g. while a restarted member replays), then
  gets one ``unavailable`` job.
* **Offsets**: per input partition, the offset of the oldest record still needed (an
  unresolved task, a waiting verdict or on-demand request), else one past the last record seen. Replay after a
  crash re-reads what was held in memory.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

Position = tuple[str, int, int]  # (topic, partition, offset)


@dataclass
class HeldTask:
    """One image part's raw task record."""

    request_id: str
    part: str
    raw: bytes
    position: Position
    arrived_ms: int
    resolved: bool = False


@dataclass
class WaitingVerdict:
    """A verdict whose image parts have not all arrived. ``parts``: the image parts still missing."""

    request_id: str
    decision: str
    parts: set[str]
    position: Position
    until_ms: int
    found: list[HeldTask] = field(default_factory=list)


@dataclass
class WaitingAsk:
    """An on-demand request with nothing held yet: ``part`` ``None`` means any image part."""

    request_id: str
    part: str | None
    position: Position
    until_ms: int


@dataclass(frozen=True)
class Job:
    """One explanation to compute (``task`` is ``None`` when the image is no longer held:
    ``reason`` says why)."""

    request_id: str
    part: str
    trigger: str  # "verdict" | "on_demand"
    decision: str | None
    task: HeldTask | None
    reason: str = ""


class ExplainJoin:
    """The join table.

    Args:
        decisions: verdict decisions that get explanations (e.g. ``{"review", "block"}``).
        retention_ms: how long a task stays held after it arrived, ms.
        budget_bytes: most raw task bytes held at once.
        wait_ms: how long a verdict waits for image parts not seen yet, ms.
    """

    def __init__(self, decisions: set[str], *, retention_ms: int, budget_bytes: int, wait_ms: int) -> None:
        self.decisions = decisions
        self.retention_ms = retention_ms
        self.budget_bytes = budget_bytes
        self.wait_ms = wait_ms
        self.tasks: OrderedDict[tuple[str, str], HeldTask] = OrderedDict()  # arrival order
        self.waiting: dict[str, WaitingVerdict] = {}
        self.asks: list[WaitingAsk] = []
        self.held_bytes = 0
        self.evicted_unresolved = 0
        self.expired_unresolved = 0
        self._next: dict[tuple[str, int], int] = {}  # one past the last offset seen per partition

    # -- inputs ----------------------------------------------------------------------
    def seen(self, position: Position) -> None:
        """Record that the record at ``position`` was read (whatever it was)."""
        topic, partition, offset = position
        self._next[(topic, partition)] = max(self._next.get((topic, partition), 0), offset + 1)

    def add_task(self, request_id: str, part: str, raw: bytes, position: Position, now_ms: int) -> list[Job]:
        """Hold one image task; returns the jobs of a verdict that was waiting for it."""
        self.seen(position)
        key = (request_id, part)
        old = self.tasks.pop(key, None)
        if old is not None:  # a replayed or duplicated task: keep the newest copy, and its state
            self.held_bytes -= len(old.raw)
        task = HeldTask(request_id, part, raw, position, now_ms, resolved=old.resolved if old else False)
        self.tasks[key] = task
        self.held_bytes += len(raw)
        self._evict_over_budget()
        jobs = []
        for ask in [a for a in self.asks if a.request_id == request_id and a.part in (None, part)]:
            self.asks.remove(ask)
            jobs.append(Job(request_id, part, "on_demand", None, task))
        waiting = self.waiting.get(request_id)
        if waiting is None or part not in waiting.parts:
            return jobs
        waiting.parts.discard(part)
        waiting.found.append(task)
        task.resolved = True
        if waiting.parts:
            return jobs
        del self.waiting[request_id]
        return jobs + [Job(request_id, t.part, "verdict", waiting.decision, t) for t in waiting.found]

    def add_verdict(self, request_id: str, decision: str, image_parts: list[str], position: Position, now_ms: int) -> list[Job]:
        """A verdict with its image parts (``"image:0"``...; router-skipped parts excluded).
        Resolves the held tasks; returns the jobs to compute now (none when the decision needs
        no explanation or a part has not arrived yet: the verdict then waits)."""
        self.seen(position)
        found = [self.tasks[(request_id, p)] for p in image_parts if (request_id, p) in self.tasks]
        for t in found:
            t.resolved = True
        if decision not in self.decisions or not image_parts:
            return []
        missing = {p for p in image_parts if (request_id, p) not in self.tasks}
        if missing:
            self.waiting[request_id] = WaitingVerdict(request_id, decision, missing, position, now_ms + self.wait_ms, found)
            return []
        return [Job(request_id, t.part, "verdict", decision, t) for t in found]

    def on_demand(self, request_id: str, part: str | None, position: Position, now_ms: int) -> list[Job]:
        """Jobs for an on-demand request: every held image part of ``request_id`` (or ``part``);
        when none is held, the request waits (module doc) and none is returned now."""
        self.seen(position)
        found = [t for (rid, p), t in self.tasks.items() if rid == request_id and (part is None or p == part)]
        if not found:
            self.asks.append(WaitingAsk(request_id, part, position, now_ms + self.wait_ms))
            return []
        return [Job(request_id, t.part, "on_demand", None, t) for t in found]

    # -- time ------------------------------------------------------------------------
    def expire(self, now_ms: int) -> list[Job]:
        """Drop tasks past their retention (an unresolved one too: after a restart, replayed tasks
        whose verdicts were handled before it never resolve; counted in :attr:`expired_unresolved`);
        returns the jobs of verdicts that waited longer than ``wait_ms``: their found parts, and an
        ``unavailable`` job per missing part."""
        while self.tasks:
            task = next(iter(self.tasks.values()))
            if now_ms - task.arrived_ms < self.retention_ms:
                break
            if not task.resolved:
                self.expired_unresolved += 1
            self._drop(task)
        jobs = []
        for ask in [a for a in self.asks if now_ms >= a.until_ms]:
            self.asks.remove(ask)
            jobs.append(Job(ask.request_id, ask.part or "", "on_demand", None, None,
                            f"no image task of this request is held (held for {self.retention_ms} ms after routing, "
                            f"{self.budget_bytes} bytes at most)"))
        for rid, w in list(self.waiting.items()):
            if now_ms >= w.until_ms:
                del self.waiting[rid]
                jobs += [Job(rid, t.part, "verdict", w.decision, t) for t in w.found]
                jobs += [Job(rid, p, "verdict", w.decision, None, f"the image task did not arrive within {self.wait_ms} ms "
                                                                 "of the verdict") for p in sorted(w.parts)]
        return jobs

    def _drop(self, task: HeldTask) -> None:
        del self.tasks[(task.request_id, task.part)]
        self.held_bytes -= len(task.raw)

    def _evict_over_budget(self) -> None:
        while self.held_bytes > self.budget_bytes and len(self.tasks) > 1:
            oldest = next(iter(self.tasks.values()))
            if not oldest.resolved:
                self.evicted_unresolved += 1
            self._drop(oldest)

    # -- partitions and offsets ------------------------------------------------------
    def forget(self, topic_partitions: set[tuple[str, int]]) -> None:
        """Drop everything read from these partitions (revoked: the next owner replays them)."""
        for task in [t for t in self.tasks.values() if t.position[:2] in topic_partitions]:
            self._drop(task)
        for rid in [r for r, w in self.waiting.items() if w.position[:2] in topic_partitions]:
            del self.waiting[rid]
        self.asks = [a for a in self.asks if a.position[:2] not in topic_partitions]
        for tp in topic_partitions:
            self._next.pop(tp, None)

    def commit_offsets(self) -> dict[tuple[str, int], int]:
        """Per ``(topic, partition)`` read so far, the offset safe to commit."""
        out = dict(self._next)
        needed = ([t.position for t in self.tasks.values() if not t.resolved] + [w.position for w in self.waiting.values()]
                  + [a.position for a in self.asks])
        for topic, partition, offset in needed:
            out[(topic, partition)] = min(out.get((topic, partition), offset), offset)
        return out
