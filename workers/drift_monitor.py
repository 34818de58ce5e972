"""A modality worker's drift monitor: feeds :class:`rtaudit.engine.drift.DriftBook` from its batches,
exports ``rtaudit_drift_*`` gauges and reports the readings in the heartbeat.

One call site in the worker: :meth:`DriftMonitor.observe` after a batch is scored (inference
thread; appends scores and queues the sampled texts, no model call). A daemon thread embeds the
sampled texts with the text stage's own MiniLM encoder (a second pass on ``[drift] sample`` of
the items: deterministic by request id), feeds the semantic score, and refreshes the gauges
every second. A full queue drops the sample and counts it (``rtaudit_drift_dropped_items_total``):
drift never slows scoring beyond its share of the CPU.
"""

from __future__ import annotations

import logging
import queue
import threading
import zlib
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from rtaudit.engine.drift import DriftBook
from rtaudit.workers import metrics
from rtaudit.workers.obs_settings import DriftSettings

log = logging.getLogger(__name__)
#: batches of sampled texts waiting for the embedding thread; more are dropped.
QUEUE_BATCHES = 32
#: seconds between gauge refreshes.
REFRESH_S = 1.0

Embed = Callable[[list[str]], np.ndarray]


def sampled(request_id: str, share: float) -> bool:
    """Whether ``request_id`` is in the ``share`` (``(0, 1]``) of items embedded: crc32 of the id,
    so every replica and every retry samples the same items."""
    return share >= 1.0 or (zlib.crc32(request_id.encode()) % 10_000) < share * 10_000


def text_encoder(stage: Any) -> Embed | None:
    """The MiniLM ``encode`` of a text stage (``stage.scorer.encoder``: unit-norm ``float32[n, 384]``), or
    ``None`` for a stage without one (the null or lexical text model, image, OCR)."""
    encoder = getattr(getattr(stage, "scorer", None), "encoder", None)
    return getattr(encoder, "encode", None)


class DriftMonitor:
    """Drift per ``(stage, tenant)`` of one worker.

    Args:
        settings: the ``[drift]`` section.
        stage: the stage name in labels (``text``, ``image``, ...).
        tenants: tenant ids the settings name (others are labelled ``other``).
        embed: the encoder for the semantic score (``None``: PSI only).
    """

    def __init__(self, settings: DriftSettings, stage: str, tenants: Collection[str], embed: Embed | None = None) -> None:
        self.settings, self.stage, self.tenants, self.embed = settings, stage, set(tenants), embed
        self.book = DriftBook(settings.window, settings.reference_size, settings.psi_window, settings.hold_windows)
        self._lock = threading.Lock()
        self._queue: queue.Queue[dict[str, list[str]] | None] = queue.Queue(maxsize=QUEUE_BATCHES)
        self._thread: threading.Thread | None = None

    def start(self, embed: Embed | None = None) -> "DriftMonitor":
        """Start the embedding thread; ``embed`` (when given) replaces the encoder (known once the model loaded)."""
        self.embed = embed if embed is not None else self.embed
        if self.settings.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"{self.stage}-drift", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                pass

    def observe(self, tasks: Sequence[Any], partials: Sequence[Any]) -> None:
        """One scored batch: ``tasks[i]`` (:class:`ModalityTask`) answered by ``partials[i]``
        (:class:`PartialScore`); only ``ok`` partials count. Never raises into the worker."""
        if not self.settings.enabled:
            return
        try:
            scores: dict[tuple[str, str], list[dict[str, float]]] = {}
            texts: dict[str, list[str]] = {}
            for task, p in zip(tasks, partials):
                if p.status != "ok":
                    continue
                tenant = metrics.tenant_label(p.tenant_id, self.tenants)
                scores.setdefault((tenant, p.model.version), []).append(p.scores)
                if self.embed is not None and task.text and sampled(p.request_id, self.settings.sample):
                    texts.setdefault(tenant, []).append(task.text)
            with self._lock:
                for (tenant, version), s in scores.items():
                    self.book.add_scores(self.stage, tenant, version, s)
            if texts:
                try:
                    self._queue.put_nowait(texts)
                except queue.Full:
                    metrics.DRIFT_DROPPED.labels(self.stage).inc(sum(map(len, texts.values())))
        except Exception:  # a monitor must never cost a batch its partials
            log.exception("%s drift monitor: batch not observed", self.stage)

    def _run(self) -> None:
        while True:
            try:
                texts = self._queue.get(timeout=REFRESH_S)
            except queue.Empty:
                texts = {}
            if texts is None:
                return
            embed = self.embed  # set before the thread starts (start()); only texts sampled while it is set arrive here
            for tenant, batch in texts.items():
                if embed is None:
                    break
                try:
                    emb = embed(batch)
                except Exception:
                    log.exception("%s drift monitor: embedding failed", self.stage)
                    continue
                with self._lock:
                    closed = self.book.add_embeddings(self.stage, tenant, emb)
                if closed:
                    metrics.DRIFT_WINDOWS.labels(self.stage, tenant).inc(len(closed))
            self.refresh_gauges()

    def refresh_gauges(self) -> None:
        """Set the gauges from the current readings."""
        for r in self.readings():
            if r["semantic"] is not None:
                metrics.DRIFT_SEMANTIC.labels(r["stage"], r["tenant"]).set(r["semantic"])
            for cat, value in r["psi"].items():
                metrics.DRIFT_PSI.labels(r["stage"], r["tenant"], cat).set(value)

    def readings(self) -> list[dict[str, Any]]:
        """The heartbeat's ``drift`` list: per tenant ``stage``, ``tenant``, ``semantic`` (or ``None``),
        ``psi`` (category → PSI, rounded to 4 places) and ``windows``."""
        with self._lock:
            readings = self.book.readings()
        return [{"stage": r.stage, "tenant": r.tenant, "semantic": None if r.semantic is None else round(r.semantic, 4),
                 "psi": {c: round(v, 4) for c, v in r.psi.items()}, "windows": r.windows} for r in readings]
