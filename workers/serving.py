"""What a modality worker serves: the model versions the control topic puts in force, swapped
between batches, a canary's slice, shadow scoring, and the worker's own rollbacks and promotions.

One :class:`ServingSet` per modality worker process and stage. It follows ``model:<stage>``
(the stable bundle) and ``rollout:<stage>`` (the canary) from the process's
:class:`rtaudit.workers.control.ControlPlane`:

* **Loading, off the hot path**: a bundle named by a record is loaded in the ``loader`` thread
  (sha256 of every file, runtime check, warm-up of each batch-size bucket, golden set within its
  tolerance: :func:`rtaudit.engine.bundle_stage.ready_stage`); only then is it *ready*. Until then the version
  served before goes on serving. A failed load is reported in the heartbeat and, for a canary,
  is a verification failure: the worker rolls the canary back.
* **Swap between batches**: :meth:`ServingSet.score` takes one snapshot of (stable, candidate,
  rollout) per micro-batch and scores each item by exactly one version (its request's slice,
  :func:`rtaudit.engine.rollout.serves_candidate`); every partial names the version that scored it
  and the ``rollout:<stage>`` record version it was routed under (``ModelRef.rollout``).
  A version no record names any more is dropped after the batch that holds it.
* **Canary judge**: every batch feeds the rollout step's :class:`rtaudit.engine.rollout.CanaryJudge`
  (batch latency per version, candidate errors, shadow disagreements); a rollback or promotion
  it decides is published by the worker itself (compare-and-swap on the rollout's version:
  when replicas race, one record is accepted and the others get ``cas_conflict``, logged).
"""

from __future__ import annotations

import base64
import io
import logging
import queue
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from rtaudit.engine.clock import now_ms as wall_now_ms
from rtaudit.engine.control import Applied, ControlState
from rtaudit.engine.models import ModelStage
from rtaudit.engine.rollout import CanaryJudge, Promote, Rollback, disagree, next_step, phase_for, serves_candidate, shadowed
from rtaudit.engine.stage import BatchResult, process_batch
from rtaudit.schemas.control import BundleRef, ModelPayload, RolloutPayload, ServingStatus
from rtaudit.schemas.messages import MediaItem, ModalityTask
from rtaudit.workers import metrics
from rtaudit.workers.settings import Settings

log = logging.getLogger(__name__)

#: seconds after a model version is dropped before its memory is given back (its last batch is over by then).
RECLAIM_AFTER_S = 5.0
#: loads a bundle, verified, warmed and golden-checked; raises when it cannot.
Loader = Callable[[BundleRef], ModelStage]
#: publishes ``(subject, payload, reason, expects)`` on the control topic (blocking).
Publisher = Callable[[str, Any, str, int], None]


def bundle_loader(settings: Settings) -> Loader:
    """The production :data:`Loader`: :func:`rtaudit.engine.bundle_stage.ready_stage` on the bundle's
    ``file://`` directory, checked against the record's sha256 (raises ``BundleError``)."""

    def load(ref: BundleRef) -> ModelStage:
        from rtaudit.engine.bundle_store import uri_path
        from rtaudit.engine.bundle_stage import ready_stage

        ready = ready_stage(uri_path(ref.uri), settings.stage_options(), sha256=ref.sha256)
        log.info("%s bundle %s: verified in %.0f ms, loaded in %.0f ms, %d golden cases in %.0f ms, warm-up ms per "
                 "batch size %s", ref.stage, ref.version, ready.verify_ms, ready.load_ms, ready.golden,
                 ready.golden_ms, ready.warm_ms)
        return ready.stage

    return load


@dataclass(frozen=True)
class Snapshot:
    """What one micro-batch is scored with (taken once per batch)."""

    stable: ModelStage
    candidate: ModelStage | None
    rollout: RolloutPayload | None
    rollout_version: int


def merge(parts: list[tuple[list[int], BatchResult]], n: int) -> BatchResult:
    """One :class:`BatchResult` for ``n`` tasks from sub-batch results; ``parts`` holds each
    sub-batch's task indices (into the whole batch) and its result."""
    partials: list[Any] = [None] * n
    failures, subtasks = [], []
    inference_s, inferred = 0.0, 0
    for indices, result in parts:
        for j, partial in zip(indices, result.partials):
            partials[j] = partial
        failures += [(indices[i], e) for i, e in result.failures]
        subtasks += [(indices[i], t) for i, t in result.subtasks]
        inference_s += result.inference_s
        inferred += result.inferred
    return BatchResult(partials, sorted(failures, key=lambda f: f[0]), inference_s, inferred,
                       sorted(subtasks, key=lambda s: s[0]))


class ServingSet:
    """The versions one worker serves for ``stage`` (see the module doc).

    Args:
        stage: ``text`` | ``image`` | ``ocr``.
        builtin: the model the worker was started with (served while no ``model:<stage>`` is in force).
        loader: turns a :class:`BundleRef` into a ready stage (raises on any verification failure).
        publisher: publishes the worker's own rollbacks and promotions; ``None``: judge only.
        author: written on those records (``auto:<worker id>``).
    """

    def __init__(self, stage: str, builtin: Callable[[], ModelStage], loader: Loader,
                 publisher: Publisher | None = None, author: str = "auto") -> None:
        self.stage, self._builtin, self._loader, self._publisher, self.author = stage, builtin, loader, publisher, author
        self._lock = threading.Lock()
        self._ready: dict[str, ModelStage] = {}  # bundle sha256 → ready stage
        self._failed: dict[str, str] = {}  # bundle sha256 → why it could not be loaded
        self._names: dict[str, str] = {}  # bundle sha256 → version name
        self._loading: set[str] = set()
        self._model: ModelPayload | None = None
        #: the stable bundle in service: kept until the one in force is ready (forever when that one fails)
        self._current: BundleRef | None = None
        self._rollout: RolloutPayload | None = None
        self._rollout_version = 0
        self._judge: CanaryJudge | None = None
        self._acted: int = -1  # the rollout version this worker already published an action for
        #: the rollout version this worker rolled back itself: its candidate gets no more items here
        #: from that decision on (the record takes a few hundred ms to come back through the topic)
        self._vetoed: int = -1
        self._jobs: queue.Queue[BundleRef] = queue.Queue()
        self._actions: queue.Queue[tuple[str, Any, str, int]] = queue.Queue()
        self._started = False
        #: monotonic time a stage was last dropped (the loader thread gives its memory back later)
        self._released_at: float | None = None

    def start(self) -> "ServingSet":
        """Start the loader thread (and the publisher thread of the worker's canary actions)."""
        if not self._started:
            self._started = True
            threading.Thread(target=self._load_loop, name=f"{self.stage}-loader", daemon=True).start()
            if self._publisher is not None:
                threading.Thread(target=self._publish_loop, name=f"{self.stage}-canary", daemon=True).start()
        return self

    # ------------------------------------------------------------------ control records

    def on_control(self, state: ControlState, applied: list[Applied]) -> None:
        """A :data:`rtaudit.workers.control.Listener`: follow ``model:<stage>`` and ``rollout:<stage>``."""
        subjects = {f"model:{self.stage}", f"rollout:{self.stage}"}
        if not any(a.subject in subjects for a in applied):
            return
        with self._lock:
            self._model, rollout = state.model(self.stage), state.rollout(self.stage)
            version = state.version(f"rollout:{self.stage}")
            if version != self._rollout_version:
                self._judge = CanaryJudge(rollout.triggers, time.monotonic()) if rollout is not None and rollout.active else None
                self._rollout, self._rollout_version = rollout, version
            self._take_model_in_force()
            wanted = self._wanted()
            for sha in list(self._ready):  # released after the batch that holds it (snapshots keep a reference)
                if sha not in {r.sha256 for r in wanted}:
                    del self._ready[sha]
                    self._released_at = time.monotonic()
            for ref in wanted:
                self._names[ref.sha256] = ref.version
                if ref.sha256 not in self._ready and ref.sha256 not in self._loading and ref.sha256 not in self._failed:
                    self._loading.add(ref.sha256)
                    self._jobs.put(ref)
            candidate = self._rollout.candidate if self._rollout is not None and self._rollout.active else None
            if candidate is not None and candidate.sha256 in self._failed and self._judge is not None:
                self._judge.record_failure(self._failed[candidate.sha256])
        self._act()

    def _take_model_in_force(self) -> None:
        """When the ``model:<stage>`` bundle is ready, it becomes the stable version in service
        (the next batch takes it) and the previous one is released unless a record still names it.
        Called with the lock held."""
        if self._model is None or self._model.bundle.sha256 not in self._ready:
            return
        previous, self._current = self._current, self._model.bundle
        if previous is not None and previous.sha256 not in {r.sha256 for r in self._wanted()}:
            if self._ready.pop(previous.sha256, None) is not None:
                self._released_at = time.monotonic()

    def _wanted(self) -> list[BundleRef]:
        refs = [self._model.bundle] if self._model is not None else []
        if self._current is not None:
            refs.append(self._current)
        if self._rollout is not None and self._rollout.active:
            refs.append(self._rollout.candidate)
            if self._rollout.stable is not None:
                refs.append(self._rollout.stable)
        return refs

    def _reclaim_if_due(self) -> None:
        """Give a dropped stage's memory back to the OS once the batch that may still hold it is
        over (:data:`RECLAIM_AFTER_S` later): without it, resident memory grew 11 % over 20 text
        swaps (glibc keeps freed onnxruntime/numpy buffers), with it 0.7 % (rtaudit.tools.bench.bundle_memory)."""
        released = self._released_at
        if released is not None and time.monotonic() - released >= RECLAIM_AFTER_S:
            self._released_at = None
            from rtaudit.engine.bundle_stage import reclaim_memory

            reclaim_memory()
            log.info("%s: memory of a released model version given back", self.stage)

    def _load_loop(self) -> None:
        while True:
            try:
                ref = self._jobs.get(timeout=1.0)
            except queue.Empty:
                self._reclaim_if_due()
                continue
            started = time.perf_counter()
            try:
                stage = self._loader(ref)
            except Exception as exc:  # a bad bundle must never stop the worker: report it
                why = f"{type(exc).__name__}: {exc}"[:500]
                log.error("%s bundle %s (%s) failed verification: %s", self.stage, ref.version, ref.sha256[:12], why)
                metrics.MODEL_SWAPS.labels(self.stage, "failed").inc()
                with self._lock:
                    self._loading.discard(ref.sha256)
                    self._failed[ref.sha256] = why
                    rollout = self._rollout
                    if (self._judge is not None and rollout is not None and rollout.active
                            and rollout.candidate.sha256 == ref.sha256):
                        self._judge.record_failure(why)
                self._act()
                continue
            log.info("%s bundle %s (%s) ready in %.2f s (files verified, golden set checked, warmed)",
                     self.stage, ref.version, ref.sha256[:12], time.perf_counter() - started)
            metrics.MODEL_SWAPS.labels(self.stage, "ready").inc()
            with self._lock:
                self._loading.discard(ref.sha256)
                if ref.sha256 in {r.sha256 for r in self._wanted()}:
                    self._ready[ref.sha256] = stage
                self._take_model_in_force()

    def settled(self) -> bool:
        """True when nothing is loading (every bundle in force is ready or failed)."""
        with self._lock:
            return not self._loading and self._jobs.empty()

    def wait_settled(self, timeout_s: float) -> bool:
        """Wait until :meth:`settled` (polling every 50 ms); False when ``timeout_s`` passed first."""
        end = time.monotonic() + timeout_s
        while not self.settled():
            if time.monotonic() >= end:
                return False
            time.sleep(0.05)
        return True

    # ------------------------------------------------------------------ scoring

    def snapshot(self) -> Snapshot:
        """The versions the next batch is scored with: a ready ``model:<stage>`` bundle or the
        built-in model as stable (a rollout's ``stable`` when it names a ready one), and the
        candidate when it is ready and the rollout active."""
        with self._lock:
            stable: ModelStage | None = None
            rollout = self._rollout if self._rollout is not None and self._rollout.active else None
            if rollout is not None and rollout.stable is not None:
                stable = self._ready.get(rollout.stable.sha256)
            if stable is None and self._model is not None:
                stable = self._ready.get(self._model.bundle.sha256)
            if stable is None and self._current is not None:  # the model in force is loading, or failed
                stable = self._ready.get(self._current.sha256)
            candidate = self._ready.get(rollout.candidate.sha256) if rollout is not None else None
            version = self._rollout_version
            if self._vetoed == version:
                candidate = None
        return Snapshot(stable or self._builtin(), candidate, rollout if candidate is not None else None, version)

    def score(self, tasks: list[ModalityTask], expired: Collection[int] | None = None,
              run: Callable[..., BatchResult] = process_batch) -> BatchResult:
        """Score one micro-batch: each task by exactly one version (blocking; the inference thread).
        ``expired``: indices of the tasks already past their deadline (decided when the batch
        closed): they get ``expired`` partials from the version their request is routed to, and
        no inference (``None``: ``run`` decides at batch formation). ``run``: :func:`rtaudit.engine.stage.process_batch` or a stand-in with its
        signature."""
        snap = self.snapshot()
        gone = None if expired is None else frozenset(expired)
        if snap.candidate is None or snap.rollout is None:
            return self._timed(snap, "stable", snap.stable, list(range(len(tasks))), tasks, gone, run)[1]
        to_candidate = [i for i, t in enumerate(tasks) if serves_candidate(t.request_id, snap.rollout)]
        chosen = set(to_candidate)
        to_stable = [i for i in range(len(tasks)) if i not in chosen]
        parts = [self._timed(snap, "stable", snap.stable, to_stable, [tasks[i] for i in to_stable], gone, run)]
        if to_candidate:
            parts.append(self._timed(snap, "candidate", snap.candidate, to_candidate, [tasks[i] for i in to_candidate],
                                     gone, run))
        shadow = [i for i, t in enumerate(tasks) if (gone is None or i not in gone) and shadowed(t.request_id, snap.rollout)]
        if shadow:
            self._shadow(snap, [tasks[i] for i in shadow], parts[0], run)
        self._act()
        return merge(parts, len(tasks))

    def _timed(self, snap: Snapshot, which: str, stage: ModelStage, indices: list[int], tasks: list[ModalityTask],
               expired: frozenset[int] | None, run: Callable[..., BatchResult]) -> tuple[list[int], BatchResult]:
        if not tasks:
            return indices, BatchResult([], [])
        started = time.perf_counter()
        sub_expired = None if expired is None else [j for j, i in enumerate(indices) if i in expired]
        result = run(stage, tasks, expired=sub_expired)
        ms = (time.perf_counter() - started) * 1000.0
        if snap.rollout_version:  # name the rollout record each item was routed under
            stamped = {p.model: p.model.model_copy(update={"rollout": snap.rollout_version}) for p in result.partials}
            result = replace(result, partials=[p.model_copy(update={"model": stamped[p.model]}) for p in result.partials])
        errors = sum(1 for p in result.partials if p.status == "error")
        with self._lock:
            if self._judge is not None and snap.rollout_version == self._rollout_version and result.inferred + errors:
                self._judge.record_batch(which, ms, result.inferred + errors, errors)  # type: ignore[arg-type]  # which is 'serving' or 'candidate' (the Literal the judge takes)
        return indices, result

    def _shadow(self, snap: Snapshot, tasks: list[ModalityTask], stable_part: tuple[list[int], BatchResult],
                run: Callable[..., BatchResult]) -> None:
        if snap.candidate is None:
            return
        shadow = run(snap.candidate, tasks)
        stable_by_request = {p.request_id + p.part: p for p in stable_part[1].partials}
        pairs = [(stable_by_request.get(c.request_id + c.part), c) for c in shadow.partials]
        compared = [(s, c) for s, c in pairs if s is not None and s.status == "ok" and c.status == "ok"]
        differ = sum(1 for s, c in compared if disagree(s.scores, c.scores))
        with self._lock:
            if self._judge is not None and snap.rollout_version == self._rollout_version:
                self._judge.record_shadow(len(compared), differ)

    # ------------------------------------------------------------------ canary actions

    def _act(self) -> None:
        """Publish the judge's rollback or promotion once per rollout version."""
        with self._lock:
            judge, rollout, version = self._judge, self._rollout, self._rollout_version
            if judge is None or rollout is None or not rollout.active or self._acted == version or self._publisher is None:
                return
            decision = judge.decide(time.monotonic())
            if isinstance(decision, Rollback):
                self._vetoed = version  # 0 % here at once; the record tells the other replicas
                payload = rollout.model_copy(update={"weight_pct": 0.0, "phase": "rolled_back"})
                self._actions.put((f"rollout:{self.stage}", payload, f"rollback: {decision.reason}", version))
            elif isinstance(decision, Promote):
                step = next_step(rollout.weight_pct)
                if step is None:  # at 100 %: the candidate becomes the stable model
                    self._actions.put((f"model:{self.stage}", ModelPayload(bundle=rollout.candidate),
                                       f"promote: {decision.reason}", -1))
                    payload = rollout.model_copy(update={"weight_pct": 0.0, "phase": "promoted"})
                    self._actions.put((f"rollout:{self.stage}", payload, f"promoted: {decision.reason}", version))
                else:
                    payload = rollout.model_copy(update={"weight_pct": step, "phase": phase_for(step)})
                    self._actions.put((f"rollout:{self.stage}", payload, f"step to {step:g} %: {decision.reason}", version))
            else:
                return
            self._acted = version
            metrics.CANARY_ACTIONS.labels(self.stage, decision.kind).inc()
            log.warning("%s canary %s (rollout version %d): %s", self.stage, decision.kind, version, decision.reason)

    def _publish_loop(self) -> None:
        publisher = self._publisher
        if publisher is None:  # judge only: nothing to publish
            return
        while True:
            subject, payload, reason, expects = self._actions.get()
            try:
                publisher(subject, payload, reason, expects)
            except Exception as exc:  # another replica won the race, or the broker is away: logged
                log.warning("%s: could not publish %s (%s): %s", self.author, subject, reason, exc)

    # ------------------------------------------------------------------ status

    def status(self) -> ServingStatus:
        """Loaded versions, the traffic share each gets here, and failed loads."""
        snap = self.snapshot()
        weight = snap.rollout.weight_pct if snap.rollout is not None and not snap.rollout.shadow else 0.0
        weights = {snap.stable.model.version: 100.0 - weight}
        if snap.candidate is not None and weight > 0:
            weights[snap.candidate.model.version] = weights.get(snap.candidate.model.version, 0.0) + weight
        with self._lock:
            loaded = sorted(self._names[s] for s in self._ready)
            failed = {self._names.get(s, s[:12]): why for s, why in self._failed.items()}
        return ServingStatus(stage=self.stage, loaded=loaded, weights=weights, failed=failed)


class LazyStage:
    """Loads a model stage once, in a worker thread, at start-up (never at import time)."""

    def __init__(self, factory: Callable[[Settings], ModelStage], settings: Settings) -> None:
        self._factory = factory
        self._settings = settings
        self._stage: ModelStage | None = None
        self._lock = threading.Lock()

    def get(self) -> ModelStage:
        with self._lock:
            if self._stage is None:
                self._stage = self._factory(self._settings)
                log.info("loaded %s model %s", self._stage.stage, self._stage.model)
            return self._stage

    def warm(self, modality: str) -> float:
        """Load the model and run one :func:`warmup_task` batch through it (onnxruntime's first
        run allocates and plans); seconds taken. Raises ``RuntimeError`` when the warm-up item
        fails: a worker that cannot score it should crash at start, not after joining."""
        started = time.perf_counter()
        stage = self.get()
        result = process_batch(stage, [warmup_task(modality)])
        if result.partials[0].status != "ok":
            raise RuntimeError(f"{stage.stage} warm-up batch failed: {dict(result.failures)}")
        took = time.perf_counter() - started
        log.info("warmed %s model %s in %.2f s (before joining the consumer group)", stage.stage, stage.model, took)
        return took


#: the project's own speech clip (``workers/media/README.md``): the audio warm-up item.
WARMUP_SPEECH = Path(__file__).parent / "media" / "speech_benign.ogg"


def warmup_task(modality: str) -> ModalityTask:
    """One small task of ``modality``: a short text, a 4 s spoken sentence (audio: VAD, Whisper
    and the text model all run on it), or a 240×48 px PNG with two rendered words (OCR's
    detector and recogniser both run on it)."""
    t = wall_now_ms()
    content: dict[str, Any] = {"text": "warm up the model"}
    if modality == "audio":
        content = {"media": MediaItem(type="audio", data_b64=base64.b64encode(WARMUP_SPEECH.read_bytes()).decode(),
                                      name=WARMUP_SPEECH.name)}
    elif modality != "text":
        img = Image.new("RGB", (240, 48), "white")
        ImageDraw.Draw(img).text((10, 16), "warm up", fill="black")
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        content = {"media": MediaItem(type="image", data_b64=base64.b64encode(buf.getvalue()).decode(), name="warmup.png")}
    return ModalityTask(
        request_id="rtaudit-warmup", tenant_id="rtaudit-warmup", part=f"{modality}:0", modality=modality,
        lane="hi", created_at_ms=t, deadline_ms=t + 600_000, routed_at_ms=t, **content,
    )
