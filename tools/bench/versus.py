"""``rtaudit bench --peers``: each peer (:mod:`rtaudit.tools.bench.peers`) stepped like the worker,
in the same run, on the same private broker.

For each peer, before the worker's own series (:meth:`rtaudit.tools.bench.runner.Bench.stage`):

1. when the peer cannot run here (Ray not installed), the series is skipped and says why;
2. the peer process starts on its own new topic with the bench's inference thread count
   (``RTAUDIT_INFERENCE_THREADS``) and is ready when it answered a probe task;
3. the same stepped open-loop load as the worker (the same fractions of the stage's limit,
   the same SLO, step length, stop and bisection rules: :func:`rtaudit.tools.bench.runner.run_series`);
4. one step at 70 % of the peer's own knee throughput;
5. the peer is stopped with its whole process tree (Ray's too) before the next one starts.

A peer that fails keeps the steps it measured and says why in its note; the run goes on.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import TYPE_CHECKING

from rtaudit.tools.bench.peers import peer_command, peer_missing
from rtaudit.tools.bench.rig import Rig, run_step
from rtaudit.tools.bench.stats import find_knee, step_rates

if TYPE_CHECKING:
    from rtaudit.tools.bench.runner import Bench, PeerSeries

log = logging.getLogger(__name__)
#: longest wait for a peer to answer its first probe, s (Ray: its own cluster, Serve and the model).
START_TIMEOUT_S = {"faust": 180.0, "ray": 300.0}
#: step id prefix of each peer's steps.
TAGS = {"faust": "pf", "ray": "pr"}


def run_peer(bench: "Bench", rig: Rig, stage: str, series: "PeerSeries", reserve_s: float) -> "PeerSeries":
    """Measure one peer on ``stage`` into ``series`` (module doc, steps 1-5); ``reserve_s``
    seconds of the budget are kept for what follows (the other peers, the worker)."""
    from rtaudit.tools.bench.runner import run_series

    kind, opts = series.name, bench.opts
    plan, limit = opts.plan(stage), bench.limit(stage)
    missing = peer_missing(kind)
    if missing is not None:
        series.note = f"skipped: {missing}"
        bench.say(f"{stage}: {kind} peer {series.note}")
        return series
    cost = plan.step_s + plan.slo_ms / 1000.0 + 2.0
    if not bench.budget.allows(30.0 + 2 * cost, reserve_s):
        series.note = "skipped: the run's time budget was spent"
        return series
    threads = bench.settings.model_threads()
    bench.say(f"{stage}: the {kind} peer ({threads} inference thread(s)) on a topic of its own…")
    try:
        topic, series.start_s = rig.start_reference(
            kind, stage, lambda t: peer_command(kind, stage, t), START_TIMEOUT_S[kind],
            env={"RTAUDIT_INFERENCE_THREADS": str(threads)},
        )
        series.load_at_start = round(os.getloadavg()[0], 2)
        label = f"{stage} {kind}"
        make = bench.task_stream(stage, topic, "lo", label, plan.slo_ms)
        run_series(rig, make, step_rates(limit.best_per_s, plan.fractions), plan, opts, bench.budget, TAGS[kind],
                   bench.on_step, reserve_s + cost, series.steps)
        series.steps.sort(key=lambda s: s.offered_per_s)
        knee = find_knee(series.steps, plan.slo_ms)
        if knee is None:
            series.note = "no step kept up: the knee is below the lowest step"
        elif bench.budget.allows(cost):
            rig.reader.settle(plan.slo_ms / 1000.0 + 5.0)
            step = run_step(rig, [make(0.7 * knee.achieved_per_s)], plan.step_s, opts.max_items, f"{TAGS[kind]}70")[0]
            series.at_70 = replace(step, target=f"{label} @70%")
            bench.on_step(series.at_70)
    except Exception as exc:  # noqa: BLE001 - one peer's failure must not lose the worker's series
        log.exception("bench peer %s on %s failed", kind, stage)
        series.note = f"failed: {type(exc).__name__}: {exc}"
        bench.say(f"{stage}: {kind} peer {series.note}")
    finally:
        rig.reader.settle(plan.slo_ms / 1000.0 + 5.0)
        rig.stop_naive()
    return series
