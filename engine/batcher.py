"""Micro-batcher with two priority lanes, a lag-adaptive window and deadline-aware closing.

Pure asyncio, no Kafka: the worker puts decoded items in (with their lane and
deadline) and takes batches out. Time comes from an injected clock (epoch ms),
so tests drive it explicitly.

When a batch closes
    A batch closes at whichever comes first (reason in :attr:`Batch.reason`):

    * ``size``: the selected items reach the size limit (see *lag* below);
    * ``window``: the window has passed since the oldest queued item arrived;
    * ``deadline``: ``earliest deadline in the batch − expected duration of the
      batch − deadline_margin_ms`` has come, so that the batch is answered in time.
      The expected duration comes from :class:`CostModel` (``a·n + b``, fitted
      online from observed batches of this model).

    Items already past their deadline are not inferred: they are swept out of the
    queue (without taking a slot) into :attr:`Batch.expired`, and the caller emits
    ``expired`` partials for them (:func:`rtaudit.engine.stage.process_batch` does, given
    the tasks). When only expired items are due, a batch with no live items is
    returned at once, so fusion hears about them without waiting for a window.

Lag adaptation (window and size grow with consumer lag)
    ``lag`` = consumer lag reported by the worker (broker high watermark minus
    position, summed over this batcher's partitions) + items queued here.
    ``pressure = clamp((lag − lag_low) / (lag_high − lag_low), 0, 1)``;
    ``window = window_ms + pressure·(max_window_ms − window_ms)``;
    ``size limit = min_size + round(pressure·(max_size − min_size))``.
    Near-zero lag: short window and small batches (latency); lag at or above
    ``lag_high``: the longest window and full batches (throughput).

Occupancy adaptation (window and size also grow when the model is busy)
    Lag grows only once the worker already falls behind. The model's occupancy, the
    share of the last ``busy_horizon_ms`` it spent inferring (from
    :meth:`Batcher.observe_duration`), says so earlier: with ``busy_low`` set,
    ``busy pressure = clamp((occupancy − busy_low) / (busy_high − busy_low), 0, 1)``
    and the window and size limit follow ``max(lag pressure, busy pressure)``. Near
    capacity the model's idle gaps then gather larger batches (each item pays less of
    the batch's fixed cost ``b``) instead of running batches of two or three back to back;
    below ``busy_low`` nothing changes. This is how a take-everything-then-wait batcher
    such as Faust's ``Stream.take`` gets its throughput at saturation, without paying its
    latency when the model has room.

What a batch takes
    The size limit decides *when* a batch closes, not how many items it takes: a
    ``size`` or ``window`` close takes every queued item up to ``max_size`` (the
    lane split below still applies). Items queued behind the model while it ran
    would otherwise wait one more whole batch; taking them now costs ``a`` per item
    instead (Triton's dynamic batcher and Clipper's adaptive batching do the same).
    Measured with the MiniLM text stage on one core: batches stuck at the size limit
    (~20) held the worker at ~110 texts/s while batches of 64 run at ~130/s. Two
    exceptions: a ``deadline`` close takes only the items its expected duration was
    computed for, and a batch that carries high-lane items takes at most the size
    limit computed from the *high lane's* lag alone — a low-lane backlog must not
    make high-lane items ride in full batches (measured, MiniLM on one core with the
    low lane saturated: high-lane P99 1347 ms against a 1000 ms SLO with full
    batches of 64).

    An item may cost more than one slot (:meth:`Batcher.put`'s ``cost``: a text of
    32,000 characters is scored as ~125 encoder windows). A batch takes items in the
    order above only while their summed cost fits the number of slots it takes (at
    least one item), so a few huge items make short batches instead of one that runs
    for minutes with the high lane waiting behind it (measured by a newcomer: 44 such
    texts in one batch, 2 minutes, a high-lane request past its deadline).

Lanes
    ``hi`` is served first. When both lanes have more queued than one batch holds,
    the low lane is owed ``lo_share`` of the slots: each such batch gives it
    ``floor(lo_share·size + credit)`` slots, the fractional rest carrying over as
    credit (deficit round robin), so over k contended batches of size s the low lane
    gets at least ``floor(k·s·lo_share)`` items, whatever s is (even s = 1).
    :meth:`Batcher.update_lo_pause`
    tells the worker when to pause fetching the low lane (high lane lagging and
    enough low-lane items held here to honour the share) and when to resume.

Tenants (fair sharing inside a lane)
    Each item may name its tenant (:meth:`Batcher.put`'s ``tenant``). Within a lane, each
    tenant's items leave in arrival order, and the lane's slots in a batch are dealt
    round-robin across the tenants holding items (deficit round robin with a quantum of one
    item: every item costs one slot), the turn carrying over from batch to batch. So a
    tenant with a backlog of thousands takes one slot per round like a tenant with one item
    queued: a quiet tenant's item waits at most one round of the active tenants, not behind
    the backlog (:class:`LaneQueue`). Items without a tenant share one queue (plain FIFO).
    Deadline closes keep their rule: the earliest deadline among the items the batch would
    take (round-robin) sets the close, and that close takes exactly those items.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from rtaudit.engine.batcher_config import BatcherConfig as BatcherConfig  # part of the batcher's API
from rtaudit.engine.clock import now_ms as wall_now_ms
from rtaudit.engine.cost_model import CostModel  # noqa: F401  (re-exported: part of the batcher's API)
from rtaudit.engine.lane_queue import LaneName as LaneName, LaneQueue as LaneQueue, Pending as Pending  # the batcher's API

T = TypeVar("T")
LANE_NAMES: tuple[LaneName, LaneName] = ("hi", "lo")
CloseReason = Literal["size", "window", "deadline", "expired"]


class BatcherFull(RuntimeError):
    """:meth:`Batcher.put_nowait` on a lane already holding ``max_queued`` items."""


@dataclass(frozen=True)
class Batch(Generic[T]):
    """What :meth:`Batcher.next_batch` returns.

    Attributes:
        items: live items to infer, high lane first, each lane round-robin across tenants and
            each tenant in arrival order (may be empty when only expired items were due).
        expired: items past their deadline at ``formed_ms``; not to be inferred.
        formed_ms: when the batch formed (epoch ms).
        reason: why it closed: ``size``, ``window``, ``deadline`` or ``expired``.
        window_ms: the window in force. size_limit: the size limit in force.
        lag: the lag (messages) the window and size limit were computed from.
    """

    items: list[Pending[T]]
    expired: list[Pending[T]]
    formed_ms: float
    reason: CloseReason
    window_ms: float
    size_limit: int
    lag: int

    @property
    def lanes(self) -> dict[str, int]:
        """Live items per lane."""
        return {lane: sum(1 for p in self.items if p.lane == lane) for lane in LANE_NAMES}


@dataclass(frozen=True)
class BatcherStats:
    """Gauge values: current window (ms), size limit, lag (messages), queue per lane,
    the last batch's live size, the cost fit ``a`` (s/item), ``b`` (s/batch), and the
    model's occupancy (share of the last ``busy_horizon_ms`` spent inferring, 0..1)."""

    window_ms: float
    size_limit: int
    lag: int
    queued_hi: int
    queued_lo: int
    last_batch_size: int
    lo_paused: bool
    cost_a_s: float
    cost_b_s: float
    occupancy: float = 0.0


def split_slots(hi: int, lo: int, capacity: int, lo_share: float, credit: float) -> tuple[int, int, float]:
    """How many high- and low-lane items the next batch takes. Pure.

    Args:
        hi, lo: live items queued per lane. capacity: the size limit (>= 1).
        lo_share: share owed to the low lane under contention. credit: carried fraction, in [0, 1).

    Returns:
        ``(n_hi, n_lo, new_credit)``: high lane first; when both lanes cannot fit
        (``hi + lo > capacity``) and the high lane would crowd the low one out, the
        low lane gets ``floor(lo_share·capacity + credit)`` slots and the fraction
        carries. Without contention the credit resets to 0.
    """
    if hi + lo <= capacity or lo == 0 or hi == 0:
        n_hi = min(hi, capacity)
        return n_hi, min(lo, capacity - n_hi), 0.0
    owed = lo_share * capacity + credit
    quota = min(capacity, math.floor(owed + 1e-9))
    n_lo = min(lo, quota)
    n_hi = min(hi, capacity - n_lo)
    n_lo = min(lo, capacity - n_hi)  # the high lane may not need all the rest
    new_credit = owed - quota if n_lo >= quota else 0.0
    return n_hi, n_lo, min(max(new_credit, 0.0), 1.0 - 1e-9)


Clock = Callable[[], float]
Waiter = Callable[[asyncio.Event, float], Awaitable[None]]


async def wait_event(event: asyncio.Event, timeout_s: float) -> None:
    """Wait for ``event`` at most ``timeout_s`` seconds (the default waiter)."""
    try:
        await asyncio.wait_for(event.wait(), timeout=max(timeout_s, 0.0))
    except TimeoutError:
        pass


class Batcher(Generic[T]):
    """Two-lane micro-batcher for one model stage; see the module docstring for the rules.

    One consumer calls :meth:`next_batch` in a loop and, after running a batch,
    :meth:`observe_duration`; producers call :meth:`put` / :meth:`put_nowait`.

    Args:
        config: limits and policy.
        clock: epoch ms now (default :func:`rtaudit.engine.clock.now_ms`); tests pass a fake.
        waiter: ``await waiter(event, timeout_s)`` returns when ``event`` is set or the timeout
            passed (default :func:`wait_event`); tests pass one that advances their fake clock.
    """

    def __init__(self, config: BatcherConfig, *, clock: Clock = wall_now_ms, waiter: Waiter = wait_event) -> None:
        self.config = config
        self.cost = CostModel(config.fit_points, config.min_fit_points, config.prior_a_s, config.prior_b_s)
        self._clock = clock
        self._waiter = waiter
        self._lanes: dict[str, LaneQueue[T]] = {lane: LaneQueue() for lane in LANE_NAMES}
        self._external_lag: dict[str, int] = {lane: 0 for lane in LANE_NAMES}
        self._credit = 0.0
        self._changed = asyncio.Event()
        self._room = asyncio.Event()
        self._last_size = 0
        self._lo_paused = False
        self._closed = False
        #: items queued with a cost above 1 (while 0, a batch's take is never trimmed by cost).
        self._heavy = 0
        #: ``(end_ms, duration_ms)`` of the batches inferred within the occupancy horizon.
        self._busy: deque[tuple[float, float]] = deque()

    # -- input ------------------------------------------------------------------------
    def put_nowait(self, payload: T, lane: LaneName, deadline_ms: float, tenant: str | None = None,
                   cost: float = 1.0) -> Pending[T]:
        """Queue ``payload`` on ``lane`` for ``tenant`` (``None``: the shared no-tenant queue); ``cost``:
        batch slots it takes (>= 1; see "What a batch takes").
        Raises :class:`BatcherFull` when that lane holds ``max_queued`` items, ``ValueError``
        for an unknown lane or a cost below 1."""
        if lane not in self._lanes:
            raise ValueError(f"unknown lane {lane!r}; expected one of {LANE_NAMES}")
        queue = self._lanes[lane]
        if len(queue) >= self.config.queue_limit:
            raise BatcherFull(f"lane {lane} holds {len(queue)} items (max_queued={self.config.queue_limit})")
        if not cost >= 1.0:  # also rejects NaN
            raise ValueError(f"cost must be >= 1 batch slot, got {cost!r}")
        item = Pending(payload, lane, float(deadline_ms), float(self._clock()), tenant or "", float(cost))
        if cost > 1.0:
            self._heavy += 1
        queue.append(item)
        self._changed.set()
        return item

    async def put(self, payload: T, lane: LaneName, deadline_ms: float, tenant: str | None = None,
                  cost: float = 1.0) -> Pending[T]:
        """Queue ``payload``, waiting while ``lane`` is full (back-pressure on that lane only)."""
        while len(self._lanes.get(lane, ())) >= self.config.queue_limit and not self._closed:
            self._room.clear()
            await self._room.wait()
        return self.put_nowait(payload, lane, deadline_ms, tenant, cost)

    def set_lag(self, lane: LaneName, messages: int) -> None:
        """Consumer lag of ``lane`` outside this batcher (high watermark − position, summed
        over its partitions), messages; negative values are clamped to 0."""
        value = max(0, int(messages))
        if value != self._external_lag[lane]:  # lag moves the window and size limit: re-check the close
            self._external_lag[lane] = value
            self._changed.set()

    def observe_duration(self, n: int, seconds: float) -> None:
        """Feed the cost model and the occupancy: a batch of ``n`` live items took ``seconds``
        of model time, ending now."""
        self.cost.observe(n, seconds)
        if math.isfinite(seconds) and seconds > 0:
            self._busy.append((float(self._clock()), seconds * 1000.0))
            self._changed.set()

    def occupancy(self, now: float | None = None) -> float:
        """Share of the last ``busy_horizon_ms`` the model spent inferring, in [0, 1]."""
        now = float(self._clock()) if now is None else now
        start = now - self.config.busy_horizon_ms
        while self._busy and self._busy[0][0] <= start:
            self._busy.popleft()
        busy = sum(min(duration, end - start) for end, duration in self._busy)
        return min(1.0, max(0.0, busy / self.config.busy_horizon_ms))

    def close(self) -> None:
        """Stop: wakes waiting callers; :meth:`next_batch` raises ``EOFError`` once nothing is due."""
        self._closed = True
        self._changed.set()
        self._room.set()

    # -- state ------------------------------------------------------------------------
    def queued(self, lane: LaneName | None = None) -> int:
        """Items held (one lane, or both)."""
        return sum(len(q) for name, q in self._lanes.items() if lane is None or name == lane)

    def lane_lag(self, lane: LaneName) -> int:
        """Lag of one lane: external lag + items held here."""
        return self._external_lag[lane] + len(self._lanes[lane])

    @property
    def lag(self) -> int:
        """Total lag, messages: both lanes' external lag + items held here."""
        return sum(self.lane_lag(lane) for lane in LANE_NAMES)

    def pressure(self, lane: LaneName | None = None) -> float:
        """``clamp((lag − lag_low) / (lag_high − lag_low), 0, 1)``, or the busy pressure when
        larger (see *Occupancy adaptation*); with ``lane``, from that lane's lag only (the
        high-lane cap: a busy model must not put high-lane items in full batches either)."""
        c = self.config
        lag = self.lag if lane is None else self.lane_lag(lane)
        by_lag = min(1.0, max(0.0, (lag - c.lag_low) / (c.lag_high - c.lag_low)))
        if lane is not None or c.busy_low is None or by_lag >= 1.0:
            return by_lag
        by_busy = (self.occupancy() - c.busy_low) / (c.busy_high - c.busy_low)
        return max(by_lag, min(1.0, max(0.0, by_busy)))

    def window_ms(self) -> float:
        """The window in force, ms."""
        c = self.config
        return c.window_ms + self.pressure() * (c.window_ceiling_ms - c.window_ms)

    def size_limit(self, lane: LaneName | None = None) -> int:
        """The size limit in force, items; with ``lane``, from that lane's lag only."""
        c = self.config
        return c.size_floor + round(self.pressure(lane) * (c.max_size - c.size_floor))

    def stats(self) -> BatcherStats:
        """Current gauge values (see :class:`BatcherStats`)."""
        a, b = self.cost.coefficients
        return BatcherStats(
            window_ms=self.window_ms(), size_limit=self.size_limit(), lag=self.lag,
            queued_hi=self.queued("hi"), queued_lo=self.queued("lo"), last_batch_size=self._last_size,
            lo_paused=self._lo_paused, cost_a_s=a, cost_b_s=b, occupancy=self.occupancy(),
        )

    def update_lo_pause(self) -> bool:
        """Whether the worker should keep the low lane's partitions paused now (with hysteresis).

        Pause when the high lane's lag exceeds ``pause_hi_lag`` and at least
        ``lo_reserve`` low-lane items are held here (enough for the share of two
        batches); resume when the high lane's lag falls to ``resume_hi_lag`` or the
        held low-lane items fall below the reserve (so the share can be served).
        """
        c = self.config
        hi_lag, held_lo = self.lane_lag("hi"), len(self._lanes["lo"])
        if self._lo_paused:
            self._lo_paused = hi_lag > c.resume_hi_lag and held_lo >= c.lo_reserve
        else:
            self._lo_paused = hi_lag > c.pause_hi_lag and held_lo >= c.lo_reserve
        return self._lo_paused

    # -- output -----------------------------------------------------------------------
    def _sweep_expired(self, now: float) -> list[Pending[T]]:
        return [p for queue in self._lanes.values() for p in queue.sweep(now)]

    def _candidates(self, size: int) -> tuple[int, int, float]:
        return split_slots(len(self._lanes["hi"]), len(self._lanes["lo"]), size, self.config.lo_share, self._credit)

    def close_at_ms(self, now: float | None = None) -> tuple[float, CloseReason] | None:
        """When the live batch would close if nothing else arrived, and why; ``None`` when empty."""
        if not self.queued():
            return None
        now = self._clock() if now is None else now
        size = self.size_limit()
        n_hi, n_lo, _ = self._candidates(size)
        if n_hi + n_lo >= size:
            return now, "size"
        oldest = min(q.oldest_ms() for q in self._lanes.values())
        window_close = oldest + self.window_ms()
        chosen = itertools.chain(self._lanes["hi"].peek(n_hi), self._lanes["lo"].peek(n_lo))
        earliest = min(p.deadline_ms for p in chosen)
        deadline_close = earliest - self.cost.predict_s(n_hi + n_lo) * 1000.0 - self.config.deadline_margin_ms
        if deadline_close < window_close:
            return deadline_close, "deadline"
        return window_close, "window"

    def poll(self) -> Batch[T] | None:
        """Form a batch if one is due now (expired items always are); else ``None``. Never waits."""
        now = float(self._clock())
        expired = self._sweep_expired(now)
        due = self.close_at_ms(now)
        window, size, lag = self.window_ms(), self.size_limit(), self.lag
        if due is None or due[0] > now:
            self._heavy -= sum(1 for p in expired if p.cost > 1.0)
            if expired:
                self._wake_putters()
                return Batch([], expired, now, "expired", window, size, lag)
            return None
        # see "What a batch takes"
        if due[1] == "deadline":
            take = size
        elif self._lanes["hi"]:
            take = self.size_limit("hi")
        else:
            take = self.config.max_size
        n_hi, n_lo, self._credit = self._candidates(take)
        if self._heavy:
            n_hi, n_lo = self._within_cost(n_hi, n_lo, take)
        items = self._lanes["hi"].take(n_hi) + self._lanes["lo"].take(n_lo)
        self._heavy -= sum(1 for p in itertools.chain(items, expired) if p.cost > 1.0)
        self._last_size = len(items)
        self._wake_putters()
        return Batch(items, expired, now, due[1], window, size, lag)

    def _within_cost(self, n_hi: int, n_lo: int, slots: int) -> tuple[int, int]:
        """The first items of the ``n_hi`` + ``n_lo`` candidates (high lane first) whose summed cost
        fits ``slots``; at least one."""
        spent, kept = 0.0, {"hi": 0, "lo": 0}
        for lane, n in (("hi", n_hi), ("lo", n_lo)):
            for p in self._lanes[lane].peek(n):
                if spent + p.cost > slots and spent > 0:
                    return kept["hi"], kept["lo"]
                spent += p.cost
                kept[lane] += 1
        return kept["hi"], kept["lo"]

    def _wake_putters(self) -> None:
        self._room.set()

    async def next_batch(self) -> Batch[T]:
        """Wait for the next batch (see the module docstring for when one closes).
        Raises ``EOFError`` once :meth:`close` was called and nothing is left."""
        while True:
            batch = self.poll()
            if batch is not None:
                return batch
            if self._closed:
                raise EOFError("batcher closed")
            due = self.close_at_ms()
            timeout_s = 3600.0 if due is None else max(0.0, (due[0] - self._clock()) / 1000.0)
            self._changed.clear()
            await self._waiter(self._changed, timeout_s)
