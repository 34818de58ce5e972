"""Run one micro-batch of modality tasks through a model stage.

The contract (after Ray Serve's batching): one partial per task, in order; an
item that is past its deadline when the batch forms is not inferred
(``expired``); an item whose input is bad fails alone (``error`` + a DLQ entry);
when the model itself raises, every item of the batch fails with that error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.clock import now_ms as wall_now_ms
from engine.clock import past_deadline
from engine.models import ModelStage, StageOutput
from schemas.errors import AuditError, InferenceFailed
from schemas.messages import Evidence, ModalityTask, PartialScore, Timings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchResult:
    """``partials[i]`` answers ``tasks[i]``; ``failures`` holds ``(i, error)`` for items bound for the DLQ."""

    partials: list[PartialScore]
    failures: list[tuple[int, AuditError]] = field(default_factory=list)
    inference_s: float = 0.0
    inferred: int = 0


def _partial(
    stage: ModelStage, task: ModalityTask, status: str, timings: Timings, produced_at_ms: int,
    output: StageOutput | None = None, error: AuditError | None = None,
) -> PartialScore:
    evidence = []
    if output is not None:
        evidence = [Evidence(**{**e.model_dump(), "part": task.part}) for e in output.evidence]
    return PartialScore(
        request_id=task.request_id, tenant_id=task.tenant_id, part=task.part, stage=stage.stage,  # type: ignore[arg-type]
        model=stage.model, status=status,  # type: ignore[arg-type]
        scores=output.scores if output is not None else {},
        evidence=evidence,
        error_code=str(error.code) if error else None, error=error.message if error else None,
        timings=timings, deadline_ms=task.deadline_ms, produced_at_ms=produced_at_ms,
    )


def process_batch(
    stage: ModelStage, tasks: list[ModalityTask], *, now_ms: Callable[[], int] = wall_now_ms,
) -> BatchResult:
    """Prepare, infer and wrap one micro-batch. Blocking: call it off the event loop.

    Args:
        stage: the model stage.
        tasks: the batch, 1..max batch size tasks.
        now_ms: wall clock in epoch ms (tests pass a fake).

    Returns:
        A :class:`BatchResult` with exactly ``len(tasks)`` partials.
    """
    formed_at = now_ms()
    prepared: list[tuple[int, object]] = []
    failed: dict[int, AuditError] = {}
    expired: set[int] = set()
    for i, task in enumerate(tasks):
        if past_deadline(task.deadline_ms, formed_at):
            expired.add(i)
            continue
        try:
            prepared.append((i, stage.prepare(task)))
        except AuditError as exc:
            failed[i] = exc
        except Exception as exc:  # a bug or library error on one item must not fail the batch
            log.exception("prepare failed for %s %s", task.request_id, task.part)
            failed[i] = InferenceFailed(f"{type(exc).__name__}: {exc}", request_id=task.request_id)

    outputs: dict[int, StageOutput] = {}
    started = time.perf_counter()
    if prepared:
        try:
            results = stage.infer([x for _, x in prepared])
            if len(results) != len(prepared):
                raise InferenceFailed(f"{stage.stage} returned {len(results)} outputs for {len(prepared)} inputs")
            outputs = {i: out for (i, _), out in zip(prepared, results)}
        except Exception as exc:
            err = exc if isinstance(exc, AuditError) else InferenceFailed(f"{type(exc).__name__}: {exc}")
            log.exception("inference failed for a batch of %d on %s", len(prepared), stage.stage)
            for i, _ in prepared:
                failed[i] = err
    inference_s = time.perf_counter() - started

    produced_at = now_ms()
    partials = []
    for i, task in enumerate(tasks):
        timings = Timings(
            queue_ms=float(max(0, formed_at - task.routed_at_ms)),
            inference_ms=round(inference_s * 1000.0, 3),
            batch_size=len(tasks) - len(expired),  # the live batch: expired items take no slot
        )
        if i in expired:
            partials.append(_partial(stage, task, "expired", timings, produced_at))
        elif i in failed:
            partials.append(_partial(stage, task, "error", timings, produced_at, error=failed[i]))
        else:
            partials.append(_partial(stage, task, "ok", timings, produced_at, output=outputs[i]))
    failures = sorted(((i, e) for i, e in failed.items() if e.to_dlq), key=lambda p: p[0])
    return BatchResult(partials, failures, inference_s, len(outputs))
