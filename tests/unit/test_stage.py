from __future__ import annotations

import pytest

from rtaudit.engine.models import StageOutput
from rtaudit.engine.stage import PREPARE_ATTEMPTS, process_batch
from rtaudit.schemas.errors import InferenceFailed, MediaFetchFailed, MediaUndecodable, URINotAllowed
from rtaudit.schemas.messages import Evidence, ModelRef

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
    ((index, error),) = result.failures
    assert index == 1 and type(error) is MediaUndecodable and error.message == "not a decodable image"
    assert error.request_id == "req-1"


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
def test_a_broken_model_fails_every_prepared_item_each_with_its_own_error(infer_error, code):
    stage = FakeTextStage(prepare_errors={"bad": MediaUndecodable("x")}, infer_error=infer_error)
    result = process_batch(stage, batch("a", "bad", "late", "b", expired=("late",)), now_ms=FakeClock())
    assert statuses(result) == ["error", "error", "expired", "error"]
    assert [result.partials[i].error_code for i in (0, 3)] == [code, code]
    assert result.partials[1].error_code == "media_undecodable"
    assert [i for i, _ in result.failures] == [0, 1, 3]
    assert [e.request_id for _, e in result.failures] == ["req-0", "req-1", "req-3"]
    assert len({id(e) for _, e in result.failures}) == 3, "one error instance per failed item"
    assert result.inferred == 0
    assert stage.infer_inputs == [["a", "b"], ["a"], ["b"]], "the batch, then each half"


@pytest.mark.parametrize("output_count_delta", [1, -1])
def test_wrong_number_of_outputs_fails_the_batch(output_count_delta):
    result = process_batch(FakeTextStage(output_count_delta=output_count_delta), batch("a", "b"), now_ms=FakeClock())
    assert statuses(result) == ["error", "error"]
    assert {p.error_code for p in result.partials} == {"inference_failed"}
    assert "outputs for 1 inputs" in result.partials[0].error


class PoisonStage(FakeTextStage):
    """A batched model call that raises when any input is in ``poison`` (one shared exception object)."""

    def __init__(self, poison: dict[str, Exception]) -> None:
        super().__init__()
        self.poison = poison

    def infer(self, inputs: list[str]) -> list[StageOutput]:
        self.infer_inputs.append(list(inputs))
        for text in inputs:
            if text in self.poison:
                raise self.poison[text]
        return [StageOutput(scores={"profanity": len(t) / 100}) for t in inputs]


def test_a_poison_item_in_a_batched_call_fails_alone_with_its_own_request_id():
    shared = ValueError()  # an empty message, as RapidOCR's ResizeImgError() has
    stage = PoisonStage({"poison": shared, "venom": shared})
    texts = ["a", "b", "poison", "c", "d", "venom", "e", "f"]
    result = process_batch(stage, batch(*texts), now_ms=FakeClock())
    assert statuses(result) == ["ok", "ok", "error", "ok", "ok", "error", "ok", "ok"]
    assert [p.scores for p in result.partials if p.status == "ok"] == [{"profanity": 0.01}] * 6
    assert result.inferred == 6
    assert [(i, e.request_id) for i, e in result.failures] == [(2, "req-2"), (5, "req-5")]
    first, second = (e for _, e in result.failures)
    assert first is not second
    assert first.message == "ValueError" and result.partials[2].error == "ValueError"
    assert len(stage.infer_inputs) < 2 * len(texts), "bisection, not one call per item"


def test_a_stage_may_fail_one_item_by_returning_its_exception():
    class LoopingStage(FakeTextStage):
        def infer(self, inputs):
            return [RuntimeError(f"cannot read {t}") if t == "bad" else StageOutput(scores={"x": 1.0}) for t in inputs]

    stage = LoopingStage()
    result = process_batch(stage, batch("good", "bad", "good too"), now_ms=FakeClock())
    assert statuses(result) == ["ok", "error", "ok"]
    (index, error), = result.failures
    assert (index, error.request_id, error.code) == (1, "req-1", "inference_failed")
    assert error.message == "RuntimeError: cannot read bad"


def test_error_messages_name_the_type_and_never_show_object_reprs():
    import io

    stage = PoisonStage({"repr": OSError(f"cannot identify image file {io.BytesIO()!r}")})
    result = process_batch(stage, batch("repr"), now_ms=FakeClock())
    assert result.partials[0].error == "OSError: cannot identify image file"


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
    categories = {"offensive", "hate", "targeted_insult", "violence", "self-harm"}
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


def test_real_text_stage_isolates_an_input_its_scorer_rejects(text_stage):
    """The real scorer raises ``TypeError`` for a whole batch holding one non-``str``: the batch is
    split and only that item fails."""

    class OneNone:
        stage, model = text_stage.stage, text_stage.model

        def prepare(self, t):
            return None if t.text == "poison" else text_stage.prepare(t)

        def infer(self, inputs):
            return text_stage.infer(inputs)

    result = process_batch(OneNone(), batch("hello there", "poison", "you fucking idiot", "nice"), now_ms=FakeClock())
    assert statuses(result) == ["ok", "error", "ok", "ok"]
    assert result.partials[2].scores["offensive"] >= 0.5
    ((index, error),) = result.failures
    assert (index, error.request_id, error.code) == (1, "req-1", "inference_failed")
    assert error.message.startswith("TypeError: ")


class FlakyStage(FakeTextStage):
    """``prepare`` raises ``errors[text]`` for the first ``fails`` calls of that text, then succeeds."""

    def __init__(self, error: Exception, fails: int) -> None:
        super().__init__()
        self.error, self.fails = error, fails
        self.prepare_calls: dict[str, int] = {}

    def prepare(self, task) -> str:
        n = self.prepare_calls[task.text] = self.prepare_calls.get(task.text, 0) + 1
        if task.text == "flaky" and n <= self.fails:
            raise self.error
        return task.text


def test_a_retriable_prepare_failure_is_tried_once_more_and_then_served():
    stage = FlakyStage(MediaFetchFailed("connection reset"), fails=1)
    result = process_batch(stage, batch("flaky", "fine"), now_ms=FakeClock(FORMED_MS, FORMED_MS, PRODUCED_MS))
    assert statuses(result) == ["ok", "ok"] and result.failures == []
    assert stage.prepare_calls == {"flaky": 2, "fine": 1}


def test_a_retriable_failure_that_persists_goes_to_the_dlq_after_the_last_attempt():
    stage = FlakyStage(MediaFetchFailed("host unreachable"), fails=PREPARE_ATTEMPTS)
    result = process_batch(stage, batch("flaky", "fine"), now_ms=FakeClock(FORMED_MS, FORMED_MS, PRODUCED_MS))
    assert statuses(result) == ["error", "ok"]
    assert stage.prepare_calls["flaky"] == PREPARE_ATTEMPTS
    ((index, error),) = result.failures
    assert index == 0 and error.code == "media_fetch_failed" and error.request_id == "req-0"


@pytest.mark.parametrize("error", [MediaUndecodable("not an image"), InferenceFailed("bug"), KeyError("bug")])
def test_errors_that_are_not_retriable_are_tried_once(error):
    stage = FlakyStage(error, fails=1)
    result = process_batch(stage, batch("flaky"), now_ms=FakeClock(FORMED_MS, FORMED_MS, PRODUCED_MS))
    assert statuses(result) == ["error"] and stage.prepare_calls == {"flaky": 1}


def test_no_retry_once_the_item_is_past_its_deadline():
    stage = FlakyStage(MediaFetchFailed("timed out"), fails=1)
    result = process_batch(stage, batch("flaky"), now_ms=FakeClock(FORMED_MS, FORMED_MS + 1, PRODUCED_MS))
    assert statuses(result) == ["error"] and stage.prepare_calls == {"flaky": 1}
    assert result.failures[0][1].retriable
