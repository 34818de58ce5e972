"""The text worker's model choice (``text_model``): null and lexical stages keep the stage contract."""

from __future__ import annotations

import pytest

from rtaudit.engine.models.null import NULL_SCORES, NullStage
from rtaudit.engine.stage import process_batch
from tests.unit.builders import task
from rtaudit.workers.settings import Settings, SettingsError, load_settings


def test_the_null_stage_answers_every_item_with_fixed_scores() -> None:
    stage = NullStage("text")
    result = process_batch(stage, [task(request_id=f"r{i}", text="anything at all", deadline_ms=10**13) for i in range(5)])
    assert [p.request_id for p in result.partials] == [f"r{i}" for i in range(5)]
    assert all(p.status == "ok" and p.scores == NULL_SCORES and not p.evidence for p in result.partials)
    assert all(p.model.name == "null" for p in result.partials)


def test_the_lexical_stage_reports_offensive_with_spans() -> None:
    from rtaudit.engine.models.lexical import LexicalTextStage

    (clean, rude) = LexicalTextStage().infer(["have a lovely day", "you are a fucking idiot"])
    assert set(clean.scores) == {"offensive"} and clean.scores["offensive"] < 0.5
    assert rude.scores["offensive"] >= 0.5
    assert rude.evidence and all(e.category == "offensive" for e in rude.evidence)


@pytest.mark.parametrize(("name", "cls"), [("null", "NullStage"), ("lexical", "LexicalTextStage")])
def test_the_text_worker_builds_the_model_the_setting_names(name: str, cls: str) -> None:
    from rtaudit.workers.text import stage_factory

    stage = stage_factory(Settings(text_model=name))
    assert type(stage).__name__ == cls and stage.stage == "text"


def test_an_unknown_text_model_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTAUDIT_TEXT_MODEL", "bert")
    with pytest.raises(SettingsError, match="RTAUDIT_TEXT_MODEL"):
        load_settings()
