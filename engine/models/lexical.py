"""The lexical text stage: alt-profanity-check alone (TF-IDF + linear SVM, calibrated), no MiniLM.

A cheap text model (about 3,800 texts/s on one core, docs/benchmarks.md "Measured"): with
``RTAUDIT_TEXT_MODEL=lexical`` a text worker serves it instead of the full
:class:`rtaudit.engine.models.text.TextStage`, and ``rtaudit bench --model lexical`` measures
the fleet with a model that costs little but something. Source and scores: see
:mod:`rtaudit.engine.models.profanity`.

Categories: ``offensive`` — the model's probability of offensive language, in
``[0, 1]``; evidence: words scoring at least 0.5 on their own, ``span`` = ``[start,
end)`` code-point offsets into the text as sent (look-alikes and leetspeak undone).
"""

from __future__ import annotations

from rtaudit.engine.models import StageOutput
from rtaudit.engine.models.profanity import CATEGORY, ProfanityScorer
from rtaudit.schemas.messages import ModalityTask

#: the category its probability is reported as (the text stage's, so tenant thresholds apply).
REPORTED_AS = "offensive"


class LexicalTextStage:
    """The ``text`` stage on alt-profanity-check only; one model call per micro-batch
    (:meth:`ProfanityScorer.score_with_spans`)."""

    stage = "text"

    def __init__(self, scorer: ProfanityScorer | None = None) -> None:
        self.scorer = scorer or ProfanityScorer()
        self.model = self.scorer.model

    def prepare(self, task: ModalityTask) -> str:
        return task.text or ""

    def infer(self, inputs: list[str]) -> list[StageOutput]:
        out = []
        for result in self.scorer.score_with_spans(inputs):
            scores = {REPORTED_AS if k == CATEGORY else k: v for k, v in result.scores.items()}
            evidence = [e.model_copy(update={"category": REPORTED_AS}) if e.category == CATEGORY else e for e in result.evidence]
            out.append(StageOutput(scores=scores, evidence=evidence))
        return out
