"""The ``text`` stage: request text through :class:`rtaudit.engine.text.scoring.TextScorer`.

Categories: ``offensive``, ``hate``, ``targeted_insult``, ``violence`` (threats, calls for
violence) and ``self-harm`` for English (and any non-Han text), ``offensive`` for Chinese; scores are calibrated so 0.5 is the dev-optimal
threshold (``docs/text-moderation.md``). Evidence: word/character spans with
``[start, end)`` code-point offsets into the text as sent, ``score`` = span score.
"""

from __future__ import annotations

from rtaudit.engine.models import StageOutput
from rtaudit.engine.text.scoring import TextScore, TextScorer
from rtaudit.schemas.messages import Evidence, ModalityTask, ModelRef


def model_ref(scorer: TextScorer) -> ModelRef:
    """The ``ModelRef`` reported on partials scored by ``scorer``."""
    return ModelRef(name="rtaudit-text", version=scorer.version)


def stage_output(result: TextScore, part: str = "") -> StageOutput:
    """One :class:`TextScore` as the stage contract's scores + evidence (label = the span's source model)."""
    evidence = [Evidence(part=part, category=s.category, score=s.score, label=s.source, text=s.text, span=(s.start, s.end))
                for s in result.spans]
    return StageOutput(scores=dict(result.scores), evidence=evidence)


class TextStage:
    """The ``text`` stage (see the module docstring); one scorer call per micro-batch."""

    stage = "text"

    def __init__(self, scorer: TextScorer | None = None) -> None:
        self.scorer = scorer or TextScorer()
        self.model = model_ref(self.scorer)

    def prepare(self, task: ModalityTask) -> str:
        return task.text or ""

    def infer(self, inputs: list[str]) -> list[StageOutput]:
        return [stage_output(r) for r in self.scorer.score(inputs)]
