"""Model stages: each turns a batch of prepared inputs into per-category scores and evidence.

A stage has two halves, both run off the event loop by the worker:

* ``prepare(task)`` turns one :class:`rtaudit.schemas.messages.ModalityTask` into the model's
  input (decoded text, an RGB array); it raises a typed ``AuditError`` for bad
  input, which fails that item alone.
* ``infer(inputs)`` runs the model on the whole micro-batch and returns one
  :class:`StageOutput` per input, in order; a stage that loops over its inputs
  may put the exception one input raised in that input's place, which fails
  that item alone. When ``infer`` raises, :func:`rtaudit.engine.stage.process_batch`
  splits the batch to find the items that fail on their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rtaudit.schemas.messages import Evidence, ModalityTask, ModelRef


@dataclass(frozen=True)
class StageOutput:
    """One input's result: category → score in ``[0, 1]``, and evidence (``part`` filled in later).

    ``subtasks``: tasks a splitting stage (video) made of its item, to be scored by other stages
    (a frame by ``image`` and ``ocr``, the audio track by ``audio``); ``expands`` the part keys
    (``"<stage>/<part>"``) fusion must now wait for because of them.
    """

    scores: dict[str, float]
    evidence: list[Evidence] = field(default_factory=list)
    subtasks: list[ModalityTask] = field(default_factory=list)
    expands: list[str] = field(default_factory=list)


class ModelStage(Protocol):
    """What :func:`rtaudit.engine.stage.process_batch` needs from a model."""

    #: ``"text"``, ``"image"`` or ``"ocr"``: the stage name in part keys and metrics.
    stage: str
    #: model name and version reported on every partial.
    model: ModelRef

    def prepare(self, task: ModalityTask) -> Any: ...

    def infer(self, inputs: list[Any]) -> Sequence[StageOutput | BaseException]: ...
