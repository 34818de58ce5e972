"""rtaudit.modelbuild.text.evasion / benign / robustness: the suite is deterministic, realistic, and normalization undoes it."""

from __future__ import annotations

import re
import string
import unicodedata

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rtaudit.engine.text.normalize import ABBREVIATIONS, normalize
from rtaudit.modelbuild.text.benign import BENIGN, BENIGN_CATEGORIES, BENIGN_TEXTS
from rtaudit.modelbuild.text.evasion import TECHNIQUES, evasion_variant, evasion_variants
from rtaudit.modelbuild.text.robustness import evasion_report, format_reports, newly_flagged, normalized

CLEAN = "RT @someone: you are a stupid bitch http://t.co/Ab12 #tbt"


def test_variants_are_deterministic_and_differ_by_seed():
    assert evasion_variants(CLEAN, seed=3) == evasion_variants(CLEAN, seed=3)
    assert set(evasion_variants(CLEAN)) == set(TECHNIQUES)
    assert evasion_variants(CLEAN, seed=1)["homoglyphs"] != evasion_variants(CLEAN, seed=2)["homoglyphs"]


@pytest.mark.parametrize("technique", TECHNIQUES)
def test_every_technique_hides_the_word_but_keeps_handles_urls_and_tags(technique):
    variant = evasion_variant(CLEAN, technique)
    assert "bitch" not in variant and "stupid" not in variant
    for kept in ("@someone:", "http://t.co/Ab12", "#tbt", " a "):
        assert kept in variant


def test_technique_signatures():
    v = evasion_variants("bitch please", seed=0)
    assert any(unicodedata.name(c).startswith(("CYRILLIC", "GREEK")) for c in v["homoglyphs"])
    assert any(unicodedata.category(c) == "Cf" for c in v["zero_width"])
    assert any(c in "4@31!05$798" for c in v["leetspeak"])
    assert v["spacing"] == "b i t c h   p l e a s e"
    assert v["punctuation"][1] in ".-*_" and v["punctuation"].replace(v["punctuation"][1], "").startswith("bitch")
    assert any(ord(c) > 0x2000 for c in v["emoji"])


def test_unknown_technique():
    with pytest.raises(ValueError, match="unknown evasion technique 'rot13'"):
        evasion_variant("x", "rot13")


_SENTENCE = st.lists(st.text(alphabet=string.ascii_lowercase, min_size=3, max_size=9), min_size=1, max_size=6).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(_SENTENCE, st.integers(0, 2**16), st.sampled_from(["homoglyphs", "zero_width", "punctuation", "mixed_scripts", "emoji"]))
def test_normalization_undoes_the_lossless_techniques(clean, seed, technique):
    variant = evasion_variant(clean, technique, seed)
    # a text with no Latin letter left at all ("bbj" → "ььј") reads as Cyrillic and, by design, stays so
    assume(any(c.isascii() and c.isalpha() for c in variant) or technique in ("emoji", "zero_width", "punctuation"))
    assert normalize(variant).text == clean


@settings(max_examples=100, deadline=None)
@given(_SENTENCE, st.integers(0, 2**16))
def test_normalization_undoes_spacing_up_to_word_gaps(clean, seed):
    # the writer's word gaps (three spaces) stay; inside a word, a glued form that is no known
    # word may be read as known words, keeping one of the writer's spaces between them ("keya" → "key a")
    assume(not any(w in ABBREVIATIONS for w in clean.split()))  # "kys" is spelled out ("kill yourself"), spaced or not
    seen = normalize(evasion_variant(clean, "spacing", seed)).text
    assert [w.replace(" ", "") for w in re.split(r" {3,}", seen)] == clean.split()


def test_benign_list_shape():
    assert len(BENIGN) == len(BENIGN_TEXTS) == len(BENIGN_CATEGORIES) >= 150
    assert len(set(BENIGN_TEXTS)) == len(BENIGN_TEXTS)
    assert {"scunthorpe", "russian", "chinese", "numbers_ids", "product_codes", "urls_emails"} <= set(BENIGN_CATEGORIES)


def test_normalization_does_not_invent_offensive_words_in_the_benign_list():
    offensive = ("shit", "fuck", "bitch", "ass ", "asshole", "cunt", "dick", "hoe", "nigg", "fag")
    for b in BENIGN:
        seen = normalize(b.text).text
        for word in offensive:
            assert seen.count(word) <= b.text.lower().count(word), (b.text, seen, word)


def test_report_with_a_keyword_scorer():
    def keyword(texts: list[str]) -> np.ndarray:
        return np.array([1.0 if "bitch" in t.lower() else 0.0 for t in texts])

    offensive = ["you stupid bitch", "bitch please", "shut up bitch"]
    raw = evasion_report(keyword, offensive, label="raw")
    norm = evasion_report(normalized(keyword), offensive, label="normalized")
    assert raw.recall["clean"] == norm.recall["clean"] == 1.0
    assert raw.recall["homoglyphs"] == 0.0 and raw.worst_relative == 0.0
    assert norm.relative["homoglyphs"] == norm.relative["zero_width"] == norm.relative["spacing"] == 1.0
    assert norm.benign_fp_rate == 0.0 and norm.n_benign == len(BENIGN)
    table = format_reports([raw, norm])
    assert "normalized recall" in table and all(t in table for t in TECHNIQUES)
    assert newly_flagged(keyword, ["a b i t c h y remark", "fine"]) == (0.0, 0.5, ["a b i t c h y remark"])


def test_report_rejects_bad_scorers():
    with pytest.raises(ValueError, match="at least one"):
        evasion_report(lambda t: np.zeros(len(t)), [])
    with pytest.raises(ValueError, match="shape"):
        evasion_report(lambda t: np.zeros(1), ["a", "b"])
