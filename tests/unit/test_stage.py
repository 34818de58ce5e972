from __future__ import annotations

import pytest

from engine.models import StageOutput
from engine.stage import process_batch
from schemas.errors import MediaUndecodable, URINotAllowed
from schemas.messages import Evidence, ModelRef

from .builders import CREATED_MS, task

FORMED_MS = CREATED_MS + 30
PRODUCED_MS = CREATED_MS + 95


class FakeClock:
    """Returns the batch-formed time, then the produced time."""

    def __init__(self, *times: int) -> None:
        self._times = list(times or (FORMED_MS, PRODUCED_MS))

    def __call__(self) -> int:
        return self._times.pop(0) if len(self._times) > 1 else self._times[0]


class FakeTextStage:
    """Scores each text by its length; ``prepare`` fails on the texts named in ``prepare_errors``."""

    stage = "text"
    model = ModelRef(name="fake", version="0.1")

    def __init__(self, prepare_errors: dict[str, Exception] | None = None, infer_error: Exception | None = None,
                 output_count_delta: int = 0) -> None:
        self.prepare_errors = prepare_errors or {}
        self.infer_error = infer_error
        self.output_count_delta = output_count_delta
        self.infer_inputs: list[list[str]] = []

    def prepare(self, task) -> str:
        if task.text in self.prepare_errors:
            raise self.prepare_errors[task.text]
        return task.text

    def infer(self, inputs: list[str]) -> list[StageOutput]:
        self.infer_inputs.append(list(inputs))
        if self.infer_error is not None:
            raise self.infer_error
        outputs = [
            StageOutput(scores={"profanity": len(text) / 100}, evidence=[Evidence(part="", category="profanity", score=0.5, text=text)])
            for text in inputs
        ]
        return (outputs * 2)[: len(inputs) + self.output_count_delta]


def batch(*texts: str, expired: tuple[str, ...] = ()) -> list:
    return [
        task(f"text:{n}", text=text, deadline_ms=FORMED_MS if text in expired else FORMED_MS + 1,
             request_id=f"req-{n}")
        for n, text in enumerate(texts)
    ]


def statuses(result) -> list[str]:
    return [p.status for p in result.partials]


def test_every_task_gets_an_ok_partial_in_order():
    tasks = batch("a", "bb", "ccc")
    result = process_batch(FakeTextStage(), tasks, now_ms=FakeClock())
    assert statuses(result) == ["ok", "ok", "ok"]
    assert [(p.request_id, p.part) for p in result.partials] == [(t.request_id, t.part) for t in tasks]
    assert [p.scores for p in result.partials] == [{"profanity": 0.01}, {"profanity": 0.02}, {"profanity": 0.03}]
    assert result.failures == [] and result.inferred == 3
    first = result.partials[0]
    assert (first.stage, first.model, first.key) == ("text", FakeTextStage.model, "text/text:0")
    assert first.produced_at_ms == PRODUCED_MS
    assert first.deadline_ms == tasks[0].deadline_ms


def test_expired_items_are_not_inferred():
    stage = FakeTextStage()
    result = process_batch(stage, batch("late", "fresh", "also late", expired=("late", "also late")), now_ms=FakeClock())
    assert statuses(result) == ["expired", "ok", "expired"]
    assert stage.infer_inputs == [["fresh"]]
    assert result.inferred == 1
    assert result.failures == []
    assert result.partials[0].scores == {} and result.partials[0].error_code is None


def test_all_expired_batch_skips_inference():
    stage = FakeTextStage()
    result = process_batch(stage, batch("a", "b", expired=("a", "b")), now_ms=FakeClock())
    assert statuses(result) == ["expired", "expired"]
    assert stage.infer_inputs == []


def test_bad_input_fails_only_its_item():
    broken = MediaUndecodable("not a decodable image")
    stage = FakeTextStage(prepare_errors={"broken": broken})
    result = process_batch(stage, batch("fine", "broken", "also fine"), now_ms=FakeClock())
    assert statuses(result) == ["ok", "error", "ok"]
    assert stage.infer_inputs == [["fine", "also fine"]]
    failed = result.partials[1]
    assert (failed.error_code, failed.error) == ("media_undecodable", "not a decodable image")
    assert result.failures == [(1, broken)]


def test_unexpected_prepare_exception_becomes_inference_failed():
    stage = FakeTextStage(prepare_errors={"bug": KeyError("oops")})
    result = process_batch(stage, batch("bug", "fine"), now_ms=FakeClock())
    assert statuses(result) == ["error", "ok"]
    assert result.partials[0].error_code == "inference_failed"
    assert "KeyError" in result.partials[0].error
    (index, error), = result.failures
    assert index == 0 and error.request_id == "req-0"


@pytest.mark.parametrize(
    "infer_error, code",
    [(RuntimeError("CUDA out of memory"), "inference_failed"), (URINotAllowed("weird"), "uri_not_allowed")],
)
def test_model_failure_fails_every_prepared_item(infer_error, code):
    stage = FakeTextStage(prepare_errors={"bad": MediaUndecodable("x")}, infer_error=infer_error)
    result = process_batch(stage, batch("a", "bad", "late", "b", expired=("late",)), now_ms=FakeClock())
    assert statuses(result) == ["error", "error", "expired", "error"]
    assert [result.partials[i].error_code for i in (0, 3)] == [code, code]
    assert result.partials[1].error_code == "media_undecodable"
    assert [i for i, _ in result.failures] == [0, 1, 3]
    assert result.inferred == 0


@pytest.mark.parametrize("output_count_delta", [1, -1])
def test_wrong_number_of_outputs_fails_the_batch(output_count_delta):
    result = process_batch(FakeTextStage(output_count_delta=output_count_delta), batch("a", "b"), now_ms=FakeClock())
    assert statuses(result) == ["error", "error"]
    assert {p.error_code for p in result.partials} == {"inference_failed"}
    assert "outputs for 2 inputs" in result.partials[0].error


def test_evidence_gets_the_task_part():
    result = process_batch(FakeTextStage(), batch("a", "b"), now_ms=FakeClock())
    assert [[(e.part, e.text) for e in p.evidence] for p in result.partials] == [[("text:0", "a")], [("text:1", "b")]]


def test_timings_report_batch_size_and_queue_time():
    tasks = [task("text:0", routed_at_ms=FORMED_MS - 12, deadline_ms=FORMED_MS + 1),
             task("text:1", routed_at_ms=FORMED_MS + 5, deadline_ms=FORMED_MS + 1)]
    result = process_batch(FakeTextStage(), tasks, now_ms=FakeClock())
    assert [p.timings.batch_size for p in result.partials] == [2, 2]
    assert [p.timings.queue_ms for p in result.partials] == [12.0, 0.0]
    assert all(p.timings.inference_ms >= 0.0 for p in result.partials)


def test_expired_items_do_not_count_in_the_batch_size():
    result = process_batch(FakeTextStage(), batch("a", "b", "c", expired=("b",)), now_ms=FakeClock())
    assert statuses(result) == ["ok", "expired", "ok"]
    assert [p.timings.batch_size for p in result.partials] == [2, 2, 2]


def test_real_text_stage_scores_and_locates_profanity(text_stage):
    texts = ["have a nice day", "you are a fucking idiot", "¡Olé! 😀 — shut up, you fucking idiot"]
    categories = {"offensive", "hate", "targeted_insult"}
    result = process_batch(text_stage, batch(*texts), now_ms=FakeClock())
    clean, rude, rude_after_emoji = result.partials
    assert statuses(result) == ["ok", "ok", "ok"]
    assert set(clean.scores) == set(rude.scores) == categories
    assert max(clean.scores.values()) < 0.5
    assert clean.evidence == []
    assert rude.scores["offensive"] >= 0.5
    assert rude.evidence, "an offensive text needs span evidence"
    for ev in rude.evidence:
        start, end = ev.span
        assert texts[1][start:end] == ev.text
        assert ev.part == "text:1" and ev.category in categories and 0.0 < ev.score <= 1.0
    assert "fucking" in {ev.text for ev in rude.evidence}
    for ev in rude_after_emoji.evidence:
        assert texts[2][slice(*ev.span)] == ev.text, "spans are code-point offsets into the text"
    assert "fucking" in {ev.text for ev in rude_after_emoji.evidence}
