"""Separator tricks (rtaudit.engine.text.separators, issue 12.7): each rule with the evasion it undoes and a
benign control it must leave alone; offsets still point at what the user wrote."""

from __future__ import annotations

import pytest

from rtaudit.engine.text.normalize import normalize
from rtaudit.modelbuild.text.benign import BENIGN
from rtaudit.engine.text.lexicon import common, offensive, word_cost

#: (rule, what a user wrote, what the model must see)
EVASIONS = [
    ("newline", "f\nu\nc\nk you", "fuck you"),
    ("newline", "you are a\nb\ni\nt\nc\nh", "you are a\nbitch"),
    ("newline", "f\r\nu\r\nc\r\nk\n\ny\no\nu", "fuck\n\nyou"),  # a blank line is the word gap
    ("one_letter_word", "you are a b i t c h", "you are a bitch"),
    ("one_letter_word", "you are a c u n t", "you are a cunt"),
    ("phrase", "f u c k y o u", "fuck you"),
    ("phrase", "y o u a r e a b i t c h", "you are a bitch"),
    ("phrase", "s h u t u p", "shut up"),
    ("phrase", "f u c k   y o u", "fuck   you"),  # a marked word gap is kept as written
    ("underscore", "you_bitch", "you bitch"),
    ("underscore", "fuck_you", "fuck you"),
    ("underscore", "f_u_c_k_you", "fuck you"),
    ("inner_space", "you stupid bi tch", "you stupid bitch"),
    ("inner_space", "you are a bit ch", "you are a bitch"),
    ("inner_space", "what an as shole", "what an asshole"),
    ("inner_space", "fu ck you", "fuck you"),
    ("inner_space", "you are a b!t ch", "you are a bitch"),  # after leet
    ("respell", "you are an idddiot", "you are an idiot"),  # stretched letters
    ("respell", "shut up you moooron", "shut up you moron"),
    ("respell", "f*ck you", "fuck you"),  # masked letters
    ("respell", "what a b**ch", "what a bitch"),
    ("respell", "sh*t", "shit"),  # the most offensive reading, not "shut"
    ("respell", "you are an i*iot", "you are an idiot"),
    ("phonetic", "phuck you", "fuck you"),
    ("phonetic", "what an azzhole you are", "what an asshole you are"),
    ("phonetic", "you're a fuqing disgrace", "you're a fucking disgrace"),
    ("phonetic", "you are so stoopid", "you are so stupid"),
    ("phonetic", "shut up, biatch", "shut up, bitch"),
    ("phonetic", "you are a |oser", "you are a loser"),
    ("glued_words", "STUPIDIDIOT", "stupid idiot"),  # OCR of a video frame that lost the word gap
    ("glued_words", "you fuckingidiot!", "you fucking idiot!"),
    ("glued_words", "#dumbbitch", "#dumb bitch"),
]

#: (rule, benign text, what the model must see): the control for each rule
CONTROLS = [
    ("newline", "roses\nare\nred", "roses\nare\nred"),  # words on lines are not letters
    ("newline", "Options:\nA\nB", "options:\na\nb"),  # two letters are not a run
    ("newline", "f\n\nu\n\nc\n\nk", "f\n\nu\n\nc\n\nk"),  # blank lines between letters are word gaps
    ("one_letter_word", "a s s h o l e", "asshole"),  # the glued form is a word: no one-letter word split off
    ("one_letter_word", "you i d i o t", "you idiot"),
    ("one_letter_word", "I need a B and a C", "i need a b and a c"),
    ("phrase", "T h a t's so f u n n y", "that's so funny"),
    ("phrase", "s c u n t h o r p e", "scunthorpe"),  # not readable as known words: stays one word
    ("phrase", "Bring snacks, e.g. fruit or nuts.", "bring snacks, e.g. fruit or nuts."),
    ("underscore", "snake_case_name", "snake case name"),  # harmless: read as words
    ("underscore", "__init__ and a_b", "__init__ and a_b"),  # no word of two letters: left as it is
    ("underscore", "@g_anderson4 and http://x.example/a_bc", "@g_anderson4 and http://x.example/a_bc"),
    ("underscore", "ticket A55_1337_B", "ticket a55_1337_b"),
    ("inner_space", "The pen is mightier than the sword", "the pen is mightier than the sword"),
    ("inner_space", "a bit chilly today", "a bit chilly today"),
    ("inner_space", "the rapist was caught", "the rapist was caught"),
    ("inner_space", "go to the island", "go to the island"),
    ("respell", "sooo coool", "so cool"),  # stretched benign words read as themselves
    ("respell", "You are an a*gel", "you are an angel"),
    ("respell", "*really* good, 2*3=6", "*really* good, 2*3=6"),  # emphasis and arithmetic stay
    ("respell", "the zzzqx code", "the zzzqx code"),  # no known reading: as written
    ("respell", "see www.example.com/aaa*b", "see www.example.com/aaa*b"),  # URLs are exempt
    ("phonetic", "My phone died at the jazz club", "my phone died at the jazz club"),  # known words
    ("phonetic", "a fuchsia dress in Phuket", "a fuchsia dress in phuket"),  # readings not offensive
    ("phonetic", "Options: yes | no | maybe, a|b test", "options: yes | no | maybe, a|b test"),
    ("glued_words", "my therapist and therapists", "my therapist and therapists"),  # known; a 3-letter part
    ("glued_words", "Penistone is near Sheffield", "penistone is near sheffield"),  # one offensive part
    ("glued_words", "lunch at the whitehouse cafe", "lunch at the whitehouse cafe"),  # parts below the weight
    ("glued_words", "scunthorpe united", "scunthorpe united"),  # no reading as known words
    ("glued_words", "@stupididiot and https://x.example/stupididiot", "@stupididiot and https://x.example/stupididiot"),  # exempt
]


@pytest.mark.parametrize(("rule", "written", "seen"), EVASIONS, ids=[f"{r}:{w!r}" for r, w, _ in EVASIONS])
def test_separator_evasions_are_undone(rule, written, seen):
    assert normalize(written).text == seen


@pytest.mark.parametrize(("rule", "written", "seen"), CONTROLS, ids=[f"{r}:{w!r}" for r, w, _ in CONTROLS])
def test_benign_controls(rule, written, seen):
    assert normalize(written).text == seen


@pytest.mark.parametrize("written", [w for _, w, _ in EVASIONS + CONTROLS])
def test_idempotent_and_offsets_monotonic(written):
    n = normalize(written)
    assert normalize(n.text).text == n.text
    assert list(n.offsets) == sorted(n.offsets) and all(0 <= a < b <= len(written) for a, b in n.offsets)


def test_spans_cover_what_the_user_wrote():
    for written, word, source in [
        ("you are a b i t c h", "bitch", "b i t c h"),
        ("x f\nu\nc\nk y", "fuck", "f\nu\nc\nk"),
        ("you stupid bi tch!", "bitch", "bi tch"),
        ("hey you_bitch", "bitch", "bitch"),
        ("f u c k y o u", "you", "y o u"),
        ("ha STUPIDIDIOT", "idiot", "IDIOT"),
        ("go phuck off", "fuck", "phuck"),
        ("a |oser", "loser", "|oser"),
    ]:
        n = normalize(written)
        start = n.text.index(word)
        assert written[slice(*n.to_original(start, start + len(word)))] == source, written


def test_no_offensive_word_appears_in_the_benign_list():
    words = sorted(offensive())
    for b in BENIGN:
        seen = normalize(b.text).text.split()
        before = b.text.lower().split()
        for w in set(seen) & set(words):
            assert seen.count(w) <= sum(t.strip(".,!?") == w for t in before), (b.text, w)


def test_lexicon():
    assert common("the") and common("is") and common("a") and not common("ch") and not common("bi")
    assert {"bitch", "cunt", "asshole"} <= offensive() and "the" not in offensive()
    assert word_cost("are") < word_cost("area") and word_cost("qzx") is None


def test_separator_evasions_now_score_like_the_plain_text(text_scorer):
    cases = [(w, s) for rule, w, s in EVASIONS if rule != "newline" or "\n\n" not in w]
    written = text_scorer.score([w for w, _ in cases], evidence=False)
    plain = text_scorer.score([s for _, s in cases], evidence=False)
    for (w, _), a, b in zip(cases, written, plain):
        assert a.scores == b.scores, w


#: benign controls the model flags for reasons of its own, before and after these rules (issue 12.5:
#: "The pen is mightier than the sword" 0.67): normalization leaves them as they are (test_benign_controls).
#: "the zzzqx code": a string of no known word, offensive 0.505 on the fine-tuned encoder of artifacts
#: 2026-12-03-f8525f07, 0.53 on that of 2026-12-03-4b441c1b, under the line on the frozen one.
MODEL_FLAGS = {"The pen is mightier than the sword", "the zzzqx code"}


def test_controls_stay_benign(text_scorer):
    texts = [w for _, w, _ in CONTROLS
             if w not in MODEL_FLAGS and not any(o in normalize(w).text.split() for o in offensive())]
    for text, r in zip(texts, text_scorer.score(texts, evidence=False)):
        assert max(r.scores.values()) < 0.5, (text, r.scores)
