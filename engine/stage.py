"""Run one micro-batch of modality tasks through a model stage.

The contract (after Ray Serve's batching): one partial per task, in order; an
item that is past its deadline when the batch forms is not inferred
(``expired``). Every failure is per item, whatever stage it happens in:

* **prepare** (load, decode, resize) raises for one task: that item fails alone, after one more try
  when the error is ``retriable`` (a media fetch that failed on the network; :data:`PREPARE_ATTEMPTS`).
* **infer** returns an exception in place of one output (a stage that loops over
  its items, as OCR does): that item fails alone.
* **infer** raises for the whole batch (a poison item inside a batched model
  call, a wrong output count, an out-of-memory): the batch is split in halves and
  each half inferred again, down to single items, so only the items that fail on
  their own fail (Ray Serve fails every caller of a raising batch; here a bad
  input must not cost its batch-mates their scores). When the model itself is
  broken every item still fails, after ``2n - 1`` calls.

Each failed item gets its own :class:`AuditError` instance carrying its own
``request_id`` and a readable message (exception type and message, never empty,
no object reprs), so a DLQ record is never labelled with a batch-mate's id.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from rtaudit.engine.clock import now_ms as wall_now_ms
from rtaudit.engine.clock import past_deadline
from rtaudit.engine.models import ModelStage, StageOutput
from rtaudit.schemas.errors import AuditError, InferenceFailed, describe
from rtaudit.schemas.messages import Evidence, ModalityTask, PartialScore, Timings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchResult:
    """``partials[i]`` answers ``tasks[i]``; ``failures`` holds ``(i, error)`` for items bound for the DLQ;
    ``subtasks`` holds ``(i, tasks)`` for items a splitting stage split (produced before ``partials[i]``)."""

    partials: list[PartialScore]
    failures: list[tuple[int, AuditError]] = field(default_factory=list)
    inference_s: float = 0.0
    inferred: int = 0
    subtasks: list[tuple[int, list[ModalityTask]]] = field(default_factory=list)


def _partial(
    stage: ModelStage, task: ModalityTask, status: str, timings: Timings, produced_at_ms: int,
    output: StageOutput | None = None, error: AuditError | None = None,
) -> PartialScore:
    evidence = []
    if output is not None:
        # a frame split off a video: its evidence says where in the video it was shown
        place = {"frame": task.frame, "time_s": task.time_s} if task.time_s is not None else {}
        evidence = [Evidence(**{**e.model_dump(), **({} if e.time_s is not None else place), "part": task.part})
                    for e in output.evidence]
    return PartialScore(
        request_id=task.request_id, tenant_id=task.tenant_id, part=task.part, stage=stage.stage,
        model=stage.model, status=status,
        scores=output.scores if output is not None else {},
        evidence=evidence,
        error_code=str(error.code) if error else None, error=error.message if error else None,
        timings=timings, deadline_ms=task.deadline_ms, produced_at_ms=produced_at_ms,
        expands=list(output.expands) if output is not None else [],
    )


def _error_for(exc: BaseException, task: ModalityTask) -> AuditError:
    """``exc`` as an :class:`AuditError` of ``task`` alone (a copy: the same exception object may
    have failed other items too); anything untyped becomes ``InferenceFailed`` with its type and message."""
    if isinstance(exc, AuditError):
        return exc.for_request(task.request_id)
    return InferenceFailed(describe(exc), request_id=task.request_id)


#: attempts of ``prepare`` for one item when it raises a ``retriable`` :class:`AuditError` (a media fetch
#: that failed on the network): the first, and one retry if the item's deadline has not passed.
PREPARE_ATTEMPTS = 2


def _prepare(stage: ModelStage, task: ModalityTask, now_ms: Callable[[], int]) -> Any:
    """``stage.prepare(task)``, tried again (up to :data:`PREPARE_ATTEMPTS` in all) while it raises an
    :class:`AuditError` whose ``retriable`` flag is set and the task's deadline has not passed; any other
    error, or the last attempt's, is raised (the item then fails alone: an ``error`` partial, and a DLQ
    record when the error's ``to_dlq`` says so)."""
    for attempt in range(1, PREPARE_ATTEMPTS + 1):
        try:
            return stage.prepare(task)
        except AuditError as exc:
            if not exc.retriable or attempt == PREPARE_ATTEMPTS or past_deadline(task.deadline_ms, now_ms()):
                raise
            log.info("prepare of %s %s on %s failed (%s), retriable: attempt %d of %d", task.request_id,
                     task.part, stage.stage, exc.message, attempt + 1, PREPARE_ATTEMPTS)
    raise AssertionError("unreachable: the last attempt returns or raises")


def infer_isolated(stage: ModelStage, inputs: list[Any]) -> list[StageOutput | BaseException]:
    """One result per input, in order: a :class:`StageOutput`, or the exception that input failed with.

    The batch is inferred in one call; when that call raises or returns the wrong
    number of outputs, its two halves are inferred again, recursively, so a single
    poison input costs about ``2·log2(n)`` extra calls and fails alone.
    """
    try:
        results = list(stage.infer(inputs))
        if len(results) != len(inputs):
            raise InferenceFailed(f"{stage.stage} returned {len(results)} outputs for {len(inputs)} inputs")
        return results
    except Exception as exc:
        if len(inputs) == 1:
            return [exc]
        log.warning("a batch of %d failed on %s (%s): inferring its halves to isolate the failing items",
                    len(inputs), stage.stage, describe(exc))
        mid = len(inputs) // 2
        return infer_isolated(stage, inputs[:mid]) + infer_isolated(stage, inputs[mid:])


def _expired(tasks: list[ModalityTask], decided: Collection[int] | None, formed_at: int) -> set[int] | frozenset[int]:
    """Indices of the expired tasks: ``decided`` by the caller, else past their deadline at ``formed_at``."""
    if decided is None:
        return {i for i, task in enumerate(tasks) if past_deadline(task.deadline_ms, formed_at)}
    return decided if isinstance(decided, (set, frozenset)) else set(decided)


def process_batch(
    stage: ModelStage, tasks: list[ModalityTask], *, now_ms: Callable[[], int] = wall_now_ms,
    expired: Collection[int] | None = None,
) -> BatchResult:
    """Prepare, infer and wrap one micro-batch. Blocking: call it off the event loop.

    Args:
        stage: the model stage.
        tasks: the batch, 1..max batch size tasks.
        now_ms: wall clock in epoch ms (tests pass a fake).
        expired: indices of the tasks the caller found past their deadline (a worker's batcher,
            at batch close: decided once); ``None``: decided here (:func:`rtaudit.engine.clock.past_deadline`).

    Returns:
        A :class:`BatchResult` with exactly ``len(tasks)`` partials; ``failures`` holds
        one distinct :class:`AuditError` per failed item, its ``request_id`` set to the item's.
    """
    formed_at = now_ms()
    prepared: list[tuple[int, object]] = []
    failed: dict[int, AuditError] = {}
    expired = _expired(tasks, expired, formed_at)
    for i, task in enumerate(tasks):
        if i in expired:
            continue
        try:
            prepared.append((i, _prepare(stage, task, now_ms)))
        except AuditError as exc:
            failed[i] = _error_for(exc, task)
        except Exception as exc:  # a bug or library error on one item must not fail the batch
            log.exception("prepare failed for %s %s on %s", task.request_id, task.part, stage.stage)
            failed[i] = _error_for(exc, task)

    outputs: dict[int, StageOutput] = {}
    started = time.perf_counter()
    if prepared:
        results = infer_isolated(stage, [x for _, x in prepared])
        for (i, _), result in zip(prepared, results):
            if isinstance(result, BaseException):
                failed[i] = _error_for(result, tasks[i])
                log.warning("inference failed for %s %s on %s: %s", tasks[i].request_id, tasks[i].part,
                            stage.stage, failed[i].message, exc_info=not isinstance(result, AuditError))
            else:
                outputs[i] = result
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
    subtasks = [(i, list(outputs[i].subtasks)) for i in sorted(outputs) if outputs[i].subtasks]
    return BatchResult(partials, failures, inference_s, len(outputs), subtasks)
