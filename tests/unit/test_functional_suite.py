"""The functional suite (rtaudit.modelbuild.text.functional): its shape, how it scores, and floors for the real model."""

from __future__ import annotations

from collections import Counter

import pytest
from typer.testing import CliRunner

from rtaudit.engine.policy import Threshold
from rtaudit.modelbuild.text import functional as F
from rtaudit.cli.common import markdown_table

CATEGORIES = {"hate", "offensive", "targeted_insult", "violence"}


def test_the_suite_is_deterministic():
    again = F.build_suite.__wrapped__()
    assert again == F.CASES == F.build_suite()
    assert [c.text for c in again] == [c.text for c in F.CASES]


def test_ids_are_unique_and_name_their_functionality():
    ids = [c.id for c in F.CASES]
    assert len(ids) == len(set(ids))
    assert all(c.id.rsplit("-", 1)[0] == c.functionality for c in F.CASES)
    assert len({f.id for f in F.FUNCTIONALITIES}) == len(F.FUNCTIONALITIES)


def test_no_text_appears_twice():
    repeated = [t for t, n in Counter(c.text for c in F.CASES).items() if n > 1]
    assert repeated == []


def test_every_functionality_has_at_least_ten_cases():
    sizes = Counter(c.functionality for c in F.CASES)
    assert set(sizes) == {f.id for f in F.FUNCTIONALITIES}
    assert min(sizes.values()) >= 10, sizes


def test_labels_and_categories_agree_with_the_functionality():
    by_id = {f.id: f for f in F.FUNCTIONALITIES}
    for c in F.CASES:
        f = by_id[c.functionality]
        assert c.hateful == f.hateful
        if c.hateful:
            assert c.category in CATEGORIES and (f.category is None or c.category == f.category)
        else:
            assert c.category is None and f.category is None
        assert c.text.strip() and c.source in ("template", "hand", "transform")


def test_every_family_has_hateful_cases_and_their_non_hateful_contrasts():
    labels: dict[str, set[bool]] = {}
    for f in F.FUNCTIONALITIES:
        labels.setdefault(f.family, set()).add(f.hateful)
    assert labels and all(v == {True, False} for v in labels.values()), labels


def test_the_issue_examples_are_in_the_suite():
    texts = {c.text: c for c in F.CASES}
    for text, hateful in (("I am not an idiot.", False), ("I left the hoe in the garden shed.", False),
                          ("The pen is mightier than the sword.", False), ("gr8 job m8!", False),
                          ("I am a gay man.", False), ("I will kill you.", True), ("🖕 you", True),
                          ("You are not worthless.", False), ("Muslims celebrate Eid at the end of Ramadan.", False)):
        assert texts[text].hateful is hateful, text
    assert "you are a m o r o n" in texts and "Immigrants are rats." in texts


def fake_scores(texts: list[str]) -> list[dict[str, float]]:
    """Flags ``targeted_insult`` on 'idiot', ``offensive`` on 'rats', ``hate`` on 'vermin'; else nothing."""
    out = []
    for t in texts:
        s = {"offensive": 0.1, "hate": 0.1, "targeted_insult": 0.1, "unthresholded": 0.99}
        if "idiot" in t:
            s["targeted_insult"] = 0.5  # exactly at the review threshold: flagged
        if "rats" in t:
            s["offensive"] = 0.7
        if "vermin" in t:
            s["hate"] = 0.9
        out.append(s)
    return out


def case(fid: str, text: str) -> F.Case:
    f = next(f for f in F.FUNCTIONALITIES if f.id == fid)
    return F.Case(f"{fid}-{text}", fid, text, f.hateful, f.category, "hand")


def test_pass_rates_with_a_fake_scorer():
    cases = [case("insult_direct", "you idiot"), case("insult_direct", "you fool"), case("insult_direct", "rats to you"),
             case("insult_negated", "not an idiot"), case("insult_negated", "not a fool"),
             case("group_dehumanisation", "they are vermin"), case("group_dehumanisation", "they are rats"),
             case("identity_neutral", "hello")]
    report = F.evaluate(fake_scores, cases)
    rows = {r.functionality: r for r in report.rows}
    assert [r.functionality for r in report.rows] == ["insult_direct", "insult_negated", "group_dehumanisation",
                                                      "identity_neutral"]
    assert (rows["insult_direct"].n, rows["insult_direct"].passed, rows["insult_direct"].any_flagged) == (3, 1, 2)
    assert rows["insult_direct"].pass_rate == pytest.approx(1 / 3) and not rows["insult_direct"].met
    assert (rows["insult_negated"].passed, rows["insult_negated"].pass_rate) == (1, 0.5)
    # "rats" flags offensive, not hate: flagged, but not a pass for a hate case
    assert (rows["group_dehumanisation"].passed, rows["group_dehumanisation"].any_flagged) == (1, 2)
    assert rows["identity_neutral"].pass_rate == 1.0 and rows["identity_neutral"].met  # a category with no threshold never flags
    assert rows["identity_neutral"].target == F.NON_HATEFUL_TARGET and rows["insult_direct"].target == F.HATEFUL_TARGET
    assert report.met == 1
    assert {fid: [c.text for c, _ in bad] for fid, bad in report.failures.items()} == {
        "insult_direct": ["you fool", "rats to you"], "insult_negated": ["not an idiot"],
        "group_dehumanisation": ["they are rats"]}


def test_thresholds_come_from_the_policy_passed():
    cases = [case("insult_direct", "you idiot")]
    strict = {"targeted_insult": Threshold(review=0.6, block=0.9)}
    assert F.evaluate(fake_scores, cases).rows[0].passed == 1
    assert F.evaluate(fake_scores, cases, thresholds=strict).rows[0].passed == 0


def test_the_whole_suite_is_scored_in_one_call_and_checked_for_length():
    calls = []

    def score(texts):
        calls.append(len(texts))
        return fake_scores(texts)

    report = F.evaluate(score)
    assert calls == [len(F.CASES)] and len(report.rows) == len(F.FUNCTIONALITIES)
    assert sum(r.n for r in report.rows) == len(F.CASES)
    with pytest.raises(ValueError):
        F.evaluate(lambda texts: fake_scores(texts)[:-1])
    assert markdown_table(F.rich_table(report)).count("\n| ") == len(F.FUNCTIONALITIES) + 1


class FakeScorer:
    version = "fake"

    class Result:
        def __init__(self, scores):
            self.scores = scores

    def __init__(self, *args, **kwargs):
        pass

    def score(self, texts, evidence=True):
        return [self.Result(s) for s in fake_scores(texts)]


def test_eval_functional_runs_without_data(tmp_path, monkeypatch):
    from rtaudit.engine.text import scoring
    from rtaudit.cli.main import app

    monkeypatch.setattr(scoring, "TextScorer", FakeScorer)
    result = CliRunner().invoke(app, ["eval", "--functional", "--data", str(tmp_path / "none")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert F.TITLE in result.output and "insult_negated" in result.output


#: measured with the shipped model (artifacts 2026-12-03-97926eb7, fine-tuned layers 4-5, int8 one text per run) on the
#: functionalities that meet their target, plus the non-hateful identity and threat families; the floors are those
#: rates less 0.15 (one or two cases per functionality may move with a retrain). Before the fine-tuned encoder
#: (2026-11-29-943a9b1b, frozen MiniLM): identity_positive 0.88, threat_negated 0.23, insult_counter 0.00,
#: threat_direct 0.45, identity_neutral 0.90, implicit_contrast 0.83; the first fine-tuned encoder
#: (2026-12-03-f8525f07) traded identity_positive (0.71) for negation, counter-speech and direct threats, and this
#: one (``hate`` its own decision) won it back (docs/text-moderation.md, "Hate as its own
#: decision").
#: violence_idiom and insult_counter are not independent measurements: modelbuild/text/contrasts.py and
#: modelbuild/text/context_contrasts.py train on other wordings of the same senses and frames.
MEASURED = {"insult_direct": 1.00, "insult_counter": 0.80, "group_derogation": 0.92, "identity_neutral": 1.00,
            "identity_positive": 0.88, "group_reporting": 0.92, "threat_direct": 0.85, "threat_negated": 0.69,
            "violence_idiom": 0.92, "slur_reclaimed": 1.00, "emoji_benign": 1.00, "evasion_benign": 1.00,
            "implicit_contrast": 0.88,
            # issue 39's functionalities, measured on artifacts 2026-12-04-e7082391 with the ``phonetic`` normalization
            # step (before it, evasion_phonetic 0.50)
            "group_attribute_positive": 1.00, "evasion_phonetic": 0.92, "evasion_phonetic_benign": 1.00}
MARGIN = 0.15


def test_real_model_floors(text_scorer):
    report = F.evaluate(F.scorer_scores(text_scorer))
    print(f"\nrtaudit-text {text_scorer.version}\n{markdown_table(F.rich_table(report))}")
    rates = {r.functionality: r.pass_rate for r in report.rows}
    low = {f: round(rates[f], 3) for f, m in MEASURED.items() if rates[f] < m - MARGIN}
    assert low == {}, f"below measured - {MARGIN}: {low}"
