"""The fleet-event scenarios of ``rtaudit chaos`` (issue 34): scale a role, a stage slower than the poll
interval, a saturated high lane, broker restarts under a long-running client.

They run on a supervised fleet of their own (router, text, fusion) on a private embedded broker,
whose text stage is the ``null`` model slowed to ``ms_per_item`` per item in micro-batches of at most
``max_batch`` (a stage as slow as a real one without its CPU; its lane holds 8 batches) and whose
consumers have ``max.poll.interval.ms = max_poll_ms`` (the mechanics of
``tests/integration/test_rebalance.py``). One long-running :class:`rtaudit.workers.client.AuditClient`
sends every request of every scenario (:class:`rtaudit.tools.chaos.watch.Watch`), so the broker
scenario's client is the one that has been submitting all along.

=========  ==================================================================================
scale      a backlog on the low lane plus steady load; a second text worker joins, both serve
           ``scale_hold_s``, then the second leaves with SIGTERM (two rebalances with records
           in inference).
slow       ``slow_backlog_batches`` batches on the high lane at once: the lane is full for about
           twice ``max.poll.interval.ms``; the worker must stay in its group (no ``MAXPOLL``).
saturate   the high lane fed above the stage's capacity for ``saturate_s`` while a low-lane
           request (``lo_slo_ms`` SLO) comes every ``lo_every_s``: each must be answered, complete,
           within its SLO (the batcher's ``lo_share``).
broker     steady load; the embedded broker is stopped with SIGTERM, later with SIGKILL; the
           supervisor restarts it and every worker. Per restart: how long after the broker's return
           the client is acknowledged again (first delivery report, and every request submitted
           during the outage), target :data:`rtaudit.tools.chaos.rows.RECOVERY_TARGET_S`.
=========  ==================================================================================

The broker is memory-only: a restart wipes every topic. Requests it had acknowledged and whose
verdict had not reached the harness's reader are counted as ``wiped`` (a property of the embedded
broker, stated in the row), not as lost; every request acknowledged by the broker that runs at
the end must have its verdict.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rtaudit.tools.chaos.rows import RECOVERY_TARGET_S, ScenarioRow, fmt_ms, unexplained_exits
from rtaudit.tools.chaos.tally import p99, tally
from rtaudit.tools.chaos.watch import CRASH_MARKS, GROUP_EXIT_MARKS, ExitLog, LogMarks, Watch, wait_until

if TYPE_CHECKING:
    from rtaudit.schemas.messages import Priority
    from rtaudit.tools.fleet.local import Fleet
    from rtaudit.workers.settings import Settings

#: the scenarios of this module, in the order a run plays them.
FLEET_SCENARIOS = ("scale", "slow", "saturate", "broker")
#: a delivery report served this long after the new broker listened may still be the old broker's, ms
#: (the load's client polls at each submit: every 0.5-0.7 s at the scenario's rates).
LATE_REPORT_MS = 1500
#: batches a modality lane holds (:mod:`rtaudit.workers.runtime.lane_intake`).
LANE_BATCHES = 8


@dataclass(frozen=True)
class ScenarioOptions:
    """Options of the fleet-event scenarios (see the module doc). Times in s, SLOs in ms."""

    scenarios: tuple[str, ...] = FLEET_SCENARIOS
    seed: int = 1
    ms_per_item: float = 400.0
    max_batch: int = 4
    max_poll_ms: int = 6000
    #: SLO of every request but the saturate scenario's low lane.
    slo_ms: int = 120_000
    scale_backlog: int = 60
    scale_rate: float = 1.5
    scale_hold_s: float = 15.0
    scale_tail_s: float = 10.0
    slow_backlog_batches: int = 2 * LANE_BATCHES
    slow_tail_s: float = 10.0
    saturate_s: float = 40.0
    hi_rate: float = 4.0
    lo_every_s: float = 4.0
    lo_slo_ms: int = 10_000
    saturate_tail_s: float = 5.0
    broker_rate: float = 2.0
    broker_gap_s: float = 10.0
    broker_signals: tuple[str, ...] = ("SIGTERM", "SIGKILL")
    #: after the load, the wait for verdicts ends when none came for this long...
    settle_idle_s: float = 20.0
    #: ... or after this long in all.
    settle_cap_s: float = 300.0
    out_dir: Path = Path(".rtaudit/chaos")
    config: Path | None = None

    @classmethod
    def quick(cls, **kw: object) -> "ScenarioOptions":
        """Each scenario in well under a minute of load."""
        base: dict[str, object] = dict(scale_backlog=30, scale_rate=1.0, scale_hold_s=8.0, scale_tail_s=4.0, slow_tail_s=4.0,
                                       saturate_s=15.0, saturate_tail_s=3.0, broker_rate=1.5, broker_gap_s=5.0, settle_idle_s=12.0)
        return cls(**{**base, **kw})  # type: ignore[arg-type]  # field values keyed by name, checked by the dataclass

    def capacity_per_s(self) -> float:
        """Items/s one text worker serves (``1000 / ms_per_item``)."""
        return 1000.0 / self.ms_per_item


def _any_answered(watch: Watch, rids: set[str]) -> bool:
    return bool(watch.answered(rids))


@dataclass
class Disturbance:
    """When a scenario's disturbance began and ended (wall ms), the pids it signalled, what it measured."""

    start_ms: int = 0
    end_ms: int = 0
    caused_pids: set[int] = field(default_factory=set)
    figures: dict[str, str] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)
    #: request ids acknowledged by a broker that was then restarted, with no verdict seen (broker scenario).
    wiped: set[str] = field(default_factory=set)


class Scenarios:
    """Runs :attr:`ScenarioOptions.scenarios` on one fleet; :meth:`run` returns one row each."""

    def __init__(self, options: ScenarioOptions, base_settings: Settings, run_id: str, say: Callable[[str], None] = print) -> None:
        from rtaudit.tools.chaos.run import free_port

        unknown = sorted(set(options.scenarios) - set(FLEET_SCENARIOS))
        if unknown:
            raise ValueError(f"unknown scenarios {unknown}: they are {', '.join(FLEET_SCENARIOS)}")
        self.opts, self.say, self.run_id = options, say, run_id
        self.root = Path(options.out_dir).resolve() / run_id / "scenarios"
        self.log_dir = self.root / "logs"
        self.settings = base_settings.model_copy(update=dict(
            bootstrap_servers=None, kafka_profile="local", embedded_port=free_port(), metrics_port=0, state_dir=self.root / "state"))
        self.exits = ExitLog(say)
        self.marks = LogMarks(self.log_dir)
        self.rng = random.Random(options.seed)
        from rtaudit.tools.demo.corpus import demo_texts

        self.texts = [t for _, t in demo_texts()] or ["hello"]
        self.fleet: Fleet | None = None
        self.watch: Watch | None = None

    @property
    def live(self) -> Watch:
        """The running fleet's :class:`Watch`.

        Raises:
            RuntimeError: no scenario fleet is running (:meth:`run` starts one).
        """
        if self.watch is None:
            raise RuntimeError("no scenario fleet is running")
        return self.watch

    @property
    def live_fleet(self) -> Fleet:
        """The running :class:`~rtaudit.tools.fleet.local.Fleet`.

        Raises:
            RuntimeError: no scenario fleet is running.
        """
        if self.fleet is None:
            raise RuntimeError("no scenario fleet is running")
        return self.fleet

    # -- fleet ---------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        o = self.opts
        return {"RTAUDIT_STATE_DIR": str(self.root / "state"), "RTAUDIT_TEXT_MODEL": "null", "RTAUDIT_METRICS_PORT": "0",
                "RTAUDIT_KAFKA_PROFILE": "local", "RTAUDIT_NULL_MODEL_MS_PER_ITEM": f"{o.ms_per_item:g}",
                "RTAUDIT_MAX_POLL_INTERVAL_MS": str(o.max_poll_ms), "RTAUDIT_BATCH__MAX_SIZE": f'{{"text": {o.max_batch}}}'}

    def _start(self) -> None:
        from rtaudit.tools.fleet.local import Fleet, FleetNotReady

        o = self.opts
        fleet = self.fleet = Fleet(self.settings, config=o.config, roles=("router", "text", "fusion"), log_dir=self.log_dir,
                           env=self._env(), supervise=True, on_event=self.exits.on_event)
        started = time.monotonic()
        fleet.launch()
        watch = self.watch = Watch(self.settings)
        probe = f"{self.run_id}-probe"
        for i in range(30):  # a text-only probe: this fleet has no image stage for the fleet's own probe
            watch.submit(f"{probe}-{i}", "probe", "hello", "high", 30_000)
            watch.flush(30)
            if wait_until(partial(_any_answered, watch, {f"{probe}-{i}"}), 10):
                self.say(f"  scenario fleet (router, text null model at {o.ms_per_item:g} ms/item, batches of {o.max_batch}, "
                         f"max.poll.interval.ms {o.max_poll_ms}) ready after {time.monotonic() - started:.0f} s; logs in {self.log_dir}")
                return
        raise FleetNotReady(f"the scenario fleet answered no probe within {time.monotonic() - started:.0f} s; logs in {self.log_dir}")

    # -- load ----------------------------------------------------------------------------
    def _load(self, prefix: str, events: Iterator[tuple[float, str, Priority | None, int]], stop: threading.Event) -> threading.Thread:
        """Open-loop load in a thread: ``events`` yields ``(at_s from now, kind, priority, slo_ms)`` in time order."""
        watch, t0 = self.live, time.time()

        def go() -> None:
            for i, (at_s, kind, priority, slo_ms) in enumerate(events):
                wait = t0 + at_s - time.time()
                if (wait > 0 and stop.wait(wait)) or stop.is_set():
                    return
                watch.submit(f"{prefix}-{i:05d}-{kind}", kind, self.rng.choice(self.texts), priority, slo_ms)

        thread = threading.Thread(target=go, name=f"chaos-load-{prefix}", daemon=True)
        thread.start()
        return thread

    @staticmethod
    def _steady(rate: float, until_s: float, kind: str, priority: Priority | None, slo_ms: int, start_s: float = 0.0) -> list[tuple[float, str, Priority | None, int]]:
        n = int((until_s - start_s) * rate)
        return [(start_s + i / rate, kind, priority, slo_ms) for i in range(max(0, n))]

    def _settle(self, prefix: str, exclude: frozenset[str] | set[str] = frozenset()) -> None:
        """Wait for every acknowledged request of ``prefix`` (less ``exclude``) to have its verdict, or
        until none arrived for ``settle_idle_s``, or ``settle_cap_s`` in all (a lost one never comes)."""
        w, o = self.live, self.opts
        if err := w.flush(30):
            self.say(f"  {err}")
        end = time.monotonic() + o.settle_cap_s
        while time.monotonic() < end:
            want = {rid for rid in list(w.acked_ms) if rid.startswith(prefix)} - exclude
            if w.answered(want) == want:
                return
            last = max(w.last_arrival_ms(prefix), max((w.acked_ms[r] for r in want), default=0))
            if time.time() * 1000 - last > o.settle_idle_s * 1000:
                return
            time.sleep(0.5)

    def _row(self, name: str, prefix: str, d: Disturbance, slo_ms: int) -> ScenarioRow:
        w = self.live
        sent = {rid: s for rid, s in list(w.sent.items()) if rid.startswith(prefix)}
        acked_all = {rid for rid in list(w.acked_ms) if rid in sent}
        acked = acked_all - d.wiped
        raw = [v for rid in sent for v in w.raw.get(rid, [])]
        r = tally(sent, acked, raw, {rid: n for rid, n in w.client_yields.items() if rid in sent}, 0,
                  {rid: t for rid, t in list(w.arrived_ms.items()) if rid in sent}, [(d.start_ms, "-"), (d.end_ms, "-")], slo_ms)
        crashes = unexplained_exits(self.exits.lines, d.caused_pids, d.start_ms)
        crash_lines = self.marks.since(CRASH_MARKS)
        misses = list(d.misses)
        if crash_lines:
            misses.append(f"{len(crash_lines)} crash lines in worker logs ({crash_lines[0]})")
        row = ScenarioRow(name, len(acked), len(sent) - len(acked_all), r.verdicts, list(r.lost),
                          sum(n - 1 for n in r.raw_duplicates.values()), list(r.conflicting_duplicates), sorted(r.client_duplicates),
                          crashes, r.p99_during_ms, r.p99_after_ms, figures=dict(d.figures), misses=misses)
        if d.wiped:  # requests a restarted memory-only broker forgot, not the fleet: counted apart from "lost"
            row.figures["wiped"] = f"{len(d.wiped)} (acknowledged by the broker before its restart, no verdict seen)"
        if r.incomplete:
            row.figures["incomplete"] = str(r.incomplete)
        return row

    # -- scenarios -----------------------------------------------------------------------
    def scale(self, prefix: str) -> Disturbance:
        """Backlog + steady low-lane load; a second text worker joins, serves, leaves with SIGTERM."""
        from rtaudit.engine.clock import now_ms

        o, d, stop = self.opts, Disturbance(), threading.Event()
        load_s = 2.0 + 60.0 + o.scale_hold_s + o.scale_tail_s  # the load is stopped once the tail has run
        backlog: list[tuple[float, str, Priority | None, int]] = [(0.0, "backlog", "low", o.slo_ms)] * o.scale_backlog
        events = backlog + self._steady(o.scale_rate, load_s, "text", "low", o.slo_ms)
        thread = self._load(prefix, iter(sorted(events, key=lambda e: e[0])), stop)
        time.sleep(2.0)  # the backlog is in the first worker's batcher and inference thread
        d.start_ms = now_ms()
        second = self.live_fleet.spawn("text")
        d.caused_pids.add(second.pid)
        log = self.log_dir / f"text-{self.live_fleet.spawned['text']}.log"
        joined = wait_until(lambda: log.exists() and " assigned [(" in log.read_text(errors="replace"), 60)
        joined_s = (now_ms() - d.start_ms) / 1000
        if not joined:
            d.misses.append("the second text worker never joined its group within 60 s")
        time.sleep(o.scale_hold_s)
        left_at = time.monotonic()
        code = self.live_fleet.retire(second, signal.SIGTERM)
        d.end_ms = now_ms()
        d.figures["scaled"] = (f"2nd text worker joined after {joined_s:.1f} s, served {o.scale_hold_s:g} s, "
                               f"left on SIGTERM in {time.monotonic() - left_at:.1f} s (exit {code})")
        stop.wait(o.scale_tail_s)
        stop.set()
        thread.join(10)
        return d

    def slow(self, prefix: str) -> Disturbance:
        """A high-lane backlog that keeps the lane full for about twice the poll interval."""
        from rtaudit.engine.clock import now_ms

        o, d, stop = self.opts, Disturbance(), threading.Event()
        n = o.slow_backlog_batches * o.max_batch
        blocked_s = (n - LANE_BATCHES * o.max_batch) * o.ms_per_item / 1000  # how long the intake holds records it cannot hand over
        d.start_ms = now_ms()
        thread = self._load(prefix, iter([(0.0, "backlog", "high", o.slo_ms)] * n), stop)
        thread.join(30)
        w = self.live
        backlog = {rid for rid in list(w.sent) if rid.startswith(prefix)}
        drained = wait_until(lambda: w.answered(backlog) == backlog, n * o.ms_per_item / 1000 * 3 + 60, 0.5)
        d.end_ms = now_ms()
        exits = self.marks.since(GROUP_EXIT_MARKS)
        d.figures["slow stage"] = (f"{n} high-lane items, the lane full for about {blocked_s:.0f} s "
                                   f"({blocked_s * 1000 / o.max_poll_ms:.1f}x max.poll.interval.ms {o.max_poll_ms}); "
                                   f"drained in {(d.end_ms - d.start_ms) / 1000:.0f} s; left its group {len(exits)} times")
        if exits:
            d.misses.append(f"a consumer left its group: {exits[0]}")
        if not drained:
            d.misses.append("the backlog did not drain")
        tail = self._load(f"{prefix}-tail", iter(self._steady(1.0, o.slow_tail_s, "tail", "high", o.slo_ms)), stop)
        tail.join(o.slow_tail_s + 10)
        return d

    def saturate(self, prefix: str) -> Disturbance:
        """The high lane fed above capacity while low-lane requests with a short SLO arrive."""
        from rtaudit.engine.clock import now_ms

        o, d, stop = self.opts, Disturbance(), threading.Event()
        hi = self._steady(o.hi_rate, o.saturate_s, "hi", "high", o.slo_ms)
        lo = self._steady(1.0 / o.lo_every_s, o.saturate_s, "lo", "low", o.lo_slo_ms, start_s=3.0)  # once the high lane is full
        tail = self._steady(1.0, o.saturate_s + o.saturate_tail_s, "tail", "high", o.slo_ms, start_s=o.saturate_s)
        d.start_ms = now_ms()
        thread = self._load(prefix, iter(sorted(hi + lo + tail, key=lambda e: e[0])), stop)
        d.end_ms = d.start_ms + int(o.saturate_s * 1000) - 1  # the tail (created after it) is "after"
        time.sleep(o.saturate_s)
        thread.join(o.saturate_tail_s + 30)
        self._settle(prefix)
        w = self.live
        lows = [rid for rid in list(w.sent) if rid.startswith(prefix) and rid.endswith("-lo") and rid in w.acked_ms]
        lat = {rid: w.arrived_ms[rid] - w.sent[rid].created_ms for rid in lows if rid in w.arrived_ms}
        complete = {rid for rid in lows if rid in w.raw and w.raw[rid][0].complete}
        within = [rid for rid in lows if rid in complete and lat.get(rid, o.lo_slo_ms + 1) <= o.lo_slo_ms]
        his = [w.arrived_ms[r] - w.sent[r].created_ms for r in list(w.sent) if r.startswith(prefix) and r.endswith("-hi") and r in w.arrived_ms]
        share = self.settings.batch.config("text").lo_share
        d.figures["low lane"] = (f"{len(within)}/{len(lows)} within the {o.lo_slo_ms / 1000:g} s SLO, complete (P99 "
                                 f"{fmt_ms(p99([float(x) for x in lat.values()]))}; lo_share {share:g}); high lane "
                                 f"{o.hi_rate:g}/s on {o.capacity_per_s():g}/s capacity, P99 {fmt_ms(p99([float(x) for x in his]))}")
        if not lows or len(within) < len(lows):
            d.misses.append(f"low lane within its SLO: {len(within)}/{len(lows)}")
        return d

    def _restart_broker(self, sig_name: str, prefix: str, d: Disturbance) -> tuple[int, int, int]:
        """Signal the embedded broker; wait for its return (the supervisor restarts it, recreates the
        topics and restarts every worker), reopen the readers, and wait until the fleet answers a request
        sent after the return. Returns ``(signal ms, exit ms, return ms)``."""
        from rtaudit.engine.clock import now_ms
        from rtaudit.tools.fleet.broker import is_listening

        w, fleet, port = self.live, self.live_fleet, self.settings.embedded_port
        if fleet.broker is None or fleet.broker.process is None:
            raise RuntimeError("the broker scenario needs the fleet's own embedded broker")
        restarts = fleet.restarts.get("broker", 0)
        proc = fleet.broker.process
        sig_ms = now_ms()
        d.start_ms = d.start_ms or sig_ms
        proc.send_signal(getattr(signal, sig_name))
        wait_until(lambda: proc.poll() is not None, 30, 0.05)
        exit_ms = now_ms()
        wait_until(lambda: fleet.broker is not None and fleet.broker.process is not proc and is_listening("127.0.0.1", port, 0.2), 90, 0.05)
        back_ms = now_ms()
        wait_until(lambda: fleet.restarts.get("broker", 0) > restarts, 60)  # topics recreated, workers restarted
        w.reopen()  # the new broker's topics start at offset 0
        fresh = lambda: {rid for rid, s in list(w.sent.items()) if rid.startswith(prefix) and s.created_ms >= back_ms}  # noqa: E731
        served = wait_until(lambda: bool(w.answered(fresh())), 180, 0.5)
        d.end_ms = now_ms()
        d.figures[sig_name] = f"down {(back_ms - sig_ms) / 1000:.1f} s; fleet answering again after " + (
            f"{(d.end_ms - back_ms) / 1000:.1f} s" if served else "never (180 s)")
        if not served:
            d.misses.append(f"{sig_name}: the fleet answered no new request within 180 s of the broker's return")
        return sig_ms, exit_ms, back_ms

    def _client_recovery(self, prefix: str, sig_name: str, sig_ms: int, exit_ms: int, back_ms: int, until_ms: int, d: Disturbance) -> None:
        """The long-running client across one restart: the first acknowledgement after the broker's return,
        and the longest any request sent from the signal to ``until_ms`` waited past the return for its
        acknowledgement (target :data:`RECOVERY_TARGET_S`); requests the old broker acknowledged that have
        no verdict go to ``d.wiped``."""
        w = self.live
        sent = {rid: s for rid, s in list(w.sent.items()) if rid.startswith(prefix) and sig_ms <= s.created_ms <= until_ms}
        acks, every = dict(w.acked_ms), dict(w.sent)
        # a report served just after the return for a request sent before the exit may be the old broker's
        old = lambda rid, t: t < back_ms or (every[rid].created_ms < exit_ms and t < back_ms + LATE_REPORT_MS)  # noqa: E731
        after = [t for rid, t in acks.items() if rid in every and not old(rid, t)]
        first_s = (min(after) - back_ms) / 1000 if after else None
        waits = [(acks[rid] - max(s.created_ms, back_ms)) / 1000 if rid in acks else None for rid, s in sent.items()]
        known = [x for x in waits if x is not None]
        longest = None if len(known) < len(waits) else max(known, default=0.0)
        # acknowledged by the old broker (``old``) and no verdict: the broker forgot it
        wiped = {rid for rid, t in acks.items() if rid.startswith(prefix) and rid not in w.arrived_ms and old(rid, t)}
        d.wiped |= wiped
        fmt = lambda x: "never" if x is None else f"{x:.1f} s"  # noqa: E731
        d.figures[sig_name] += (f"; client acknowledged again {fmt(first_s)} after the return, longest wait for an "
                                f"acknowledgement {fmt(longest)} ({len(sent)} requests); {len(wiped)} wiped")
        for what, x in (("first acknowledgement", first_s), ("longest wait for an acknowledgement", longest)):
            if x is None or x > RECOVERY_TARGET_S:
                d.misses.append(f"{sig_name}: client's {what} {fmt(x)} after the broker's return (target {RECOVERY_TARGET_S:g} s)")

    def broker(self, prefix: str) -> Disturbance:
        """Steady load; the broker restarted with each of ``broker_signals`` in turn."""
        from rtaudit.engine.clock import now_ms

        o, d, stop = self.opts, Disturbance(), threading.Event()
        thread = self._load(prefix, iter(self._steady(o.broker_rate, 3600.0, "text", None, o.slo_ms)), stop)
        time.sleep(o.broker_gap_s)
        restarts = []
        for sig_name in o.broker_signals:
            restarts.append((sig_name, *self._restart_broker(sig_name, prefix, d)))
            time.sleep(o.broker_gap_s)
        stop.set()
        thread.join(10)
        if err := self.live.flush(RECOVERY_TARGET_S + 30):
            self.say(f"  {err}")
            d.figures["client"] = err
        d.figures["client producer instances recreated"] = str(self.live.client.producer_recreations)
        ends = [sig for _, sig, _, _ in restarts[1:]] + [now_ms()]
        for (sig_name, sig_ms, exit_ms, back_ms), until_ms in zip(restarts, ends):
            self._client_recovery(prefix, sig_name, sig_ms, exit_ms, back_ms, until_ms, d)
        return d

    # -- the whole run -------------------------------------------------------------------
    def start(self) -> "Scenarios":
        """Start the fleet and the long-running client; wait until it answers a probe.

        Raises:
            rtaudit.tools.fleet.local.FleetNotReady: no probe answered (the fleet is stopped).
        """
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def play(self, name: str) -> ScenarioRow:
        """Play one scenario on the started fleet and tally it (its requests are ``<run id>-<name>-...``)."""
        if name not in FLEET_SCENARIOS:
            raise ValueError(f"unknown scenario {name!r}: they are {', '.join(FLEET_SCENARIOS)}")
        prefix = f"{self.run_id}-{name}"
        self.say(f"  scenario {name} ...")
        self.marks.mark()
        started = time.monotonic()
        d: Disturbance = getattr(self, name)(prefix)
        self._settle(prefix, d.wiped)
        row = self._row(name, prefix, d, self.opts.lo_slo_ms if name == "saturate" else self.opts.slo_ms)
        self.say(f"  scenario {name}: {row.sent} sent, {row.verdicts} verdicts, {len(row.lost)} lost, "
                 f"{'; '.join(f'{k} {v}' for k, v in row.figures.items())} ({time.monotonic() - started:.0f} s)"
                 + (f"; FAILED: {'; '.join(row.failed)}" if row.failed else ""))
        return row

    def stop(self) -> None:
        """Stop the readers, the client and the fleet (idempotent)."""
        if self.watch is not None:
            self.watch.close()
            self.watch = None
        if self.fleet is not None:
            self.fleet.stop()
            self.fleet = None

    def run(self) -> list[ScenarioRow]:
        """Start the fleet, play every selected scenario in :data:`FLEET_SCENARIOS` order, stop it."""
        self.start()
        try:
            return [self.play(name) for name in FLEET_SCENARIOS if name in self.opts.scenarios]
        finally:
            self.stop()
