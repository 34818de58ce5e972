"""The null model stage: fixed scores in O(1) per item, no model at all.

What it is for: ``rtaudit bench --model null`` (and ``RTAUDIT_TEXT_MODEL=null`` in a
text worker) measures the fleet's own cost — intake, decode, batching, encode, produce,
commit — with inference taking no time, so records/s and CPU per record are those of
the path around the model (issue 11: on a GPU, where MiniLM runs thousands of texts
per second, that path is the bound). Never serve traffic with it: every item scores 0.
"""

from __future__ import annotations

import time

from rtaudit.engine.models import StageOutput
from rtaudit.schemas.messages import ModalityTask, ModelRef

#: scores of every item: the text stage's categories, all 0 (below every policy threshold).
NULL_SCORES: dict[str, float] = {"offensive": 0.0, "hate": 0.0, "targeted_insult": 0.0, "violence": 0.0, "self-harm": 0.0}


class NullStage:
    """A :class:`rtaudit.engine.models.ModelStage` that returns :data:`NULL_SCORES` for every input.

    ``prepare(task)`` → the task's text (``str``, ``""`` for media: never decoded);
    ``infer(inputs)`` → one :class:`StageOutput` per input, no evidence. Raises nothing.
    The outputs share one scores dict (read-only by contract): O(1) work per item.

    With ``ms_per_item`` > 0, ``infer`` sleeps ``len(inputs) * ms_per_item`` ms first: a stage as
    slow as a real model, without its CPU (rebalance, back-pressure and poll-interval tests).
    """

    def __init__(self, stage: str = "text", scores: dict[str, float] | None = None, ms_per_item: float = 0.0) -> None:
        self.stage = stage
        self.ms_per_item = ms_per_item
        self.model = ModelRef(name="null", version="1")
        self._output = StageOutput(scores=dict(NULL_SCORES if scores is None else scores))

    def prepare(self, task: ModalityTask) -> str:
        return task.text or ""

    def infer(self, inputs: list[str]) -> list[StageOutput]:
        if self.ms_per_item > 0 and inputs:
            time.sleep(len(inputs) * self.ms_per_item / 1000.0)
        return [self._output] * len(inputs)
