"""rtaudit.engine.text.normalize: evasions fold, benign text survives, offsets always point into the original."""

from __future__ import annotations

import re
import string
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtaudit.engine.text.normalize import NormalizedText, normalize
from rtaudit.engine.text.normalize import ABBREVIATIONS
from rtaudit.engine.text.separators import glued_words, phonetic
from rtaudit.modelbuild.text.benign import BENIGN


@pytest.mark.parametrize(
    ("written", "seen", "step"),
    [
        ("sh1t", "shit", "leet"),
        ("5h1t", "shit", "leet"),
        ("b1tch", "bitch", "leet"),
        ("8itch", "bitch", "leet"),
        ("a$$hole", "asshole", "leet"),
        ("sh!t", "shit", "leet"),
        ("f u c k you", "fuck you", "split_letters"),
        ("f.u.c.k", "fuck", "split_letters"),
        ("f - u - c - k", "fuck", "split_letters"),
        ("s h 1 t", "shit", "split_letters"),
        ("f u c k   y o u", "fuck   you", "split_letters"),
        ("T h a t's so f u n n y", "that's so funny", "split_letters"),
        ("called u a b*i*t*c*h", "called u a bitch", "split_letters"),
        ("s a d-l o o k i n g", "sad-looking", "split_letters"),
        ("b-i-t-c-h-a.s.s", "bitchass", "split_letters"),
        ("sh\u0456t", "shit", "confusables"),  # Cyrillic і
        ("b\u037atch", "bitch", "confusables"),  # Greek ypogegrammeni ͺ, which NFKC would split
        ("bi\u03f2h", "bich", "confusables"),  # Greek lunate sigma ϲ, which NFKC would make ς
        ("\u0455\u04bb\u0456\u0442 happens", "ѕһіт happens", None),  # т has no Latin look-alike: left alone
        ("\u0455\u04bb\u0456t happens", "shit happens", "confusables"),
        ("ｆｕｃｋ", "fuck", "nfkc"),
        ("𝐟𝐮𝐜𝐤", "fuck", "nfkc"),
        ("f\u200bu\u200dc\u00adk", "fuck", "format_chars"),
        ("f\u0337\u0322u\u0335c\u0338k", "fuck", "combining_marks"),
        ("🅵🆄🅲🅺", "fuck", "emoji"),
        ("🇫🇺🇨🇰", "fuck", "emoji"),
        ("fück", "fuck", "diacritics"),
    ],
)
def test_evasions_fold_to_the_plain_word(written, seen, step):
    n = normalize(written)
    assert n.text == seen
    if step:
        assert step in n.steps
    else:
        assert n.steps == ()


@pytest.mark.parametrize(
    "text",
    [
        "Scunthorpe",
        "classic",
        "assessment",
        "cocktail",
        "Dick Van Dyke",
        "I am 5 ft 7",
        "order #A55-1337",
        "Ticket 5H1T-4477-B",
        "3.14",
        "10am 5ft 1st 30min mp3 win10 a55 B52 1337 $5.99",
        "mail john.doe@example.com or see http://t.co/a55b1337",
        "@Royceda59 @MLB hello! wow!!",
        "a i",
        "e.g. x",
        "I'm a b",
    ],
)
def test_benign_ascii_survives_except_case(text):
    assert normalize(text).text == text.lower()


@pytest.mark.parametrize(
    "text",
    [b.text for b in BENIGN if b.category in ("russian", "greek", "chinese")],
)
def test_non_latin_text_keeps_its_script(text):
    n = normalize(text)
    assert "confusables" not in n.steps
    # only case and NFKC width folding of punctuation (，→ ,) may differ
    import unicodedata

    assert n.text == "".join(unicodedata.normalize("NFKC", c) for c in text).lower()


def test_offsets_point_at_what_the_user_wrote():
    original = "you are a 5h\u0456t, f.u.c.k off"
    n = normalize(original)
    assert n.text == "you are a shit, fuck off"
    start = n.text.index("shit")
    assert original[slice(*n.to_original(start, start + 4))] == "5h\u0456t"
    start = n.text.index("fuck")
    assert original[slice(*n.to_original(start, start + 4))] == "f.u.c.k"


def test_nfkc_expansion_shares_the_source_span():
    n = normalize("\ufb01ne")  # ﬁ ligature → "fi"
    assert n.text == "fine"
    assert n.offsets[:3] == ((0, 1), (0, 1), (1, 2))
    assert n.to_original(0, 1) == (0, 1)


def test_to_original_edges():
    n = normalize("a\u200bb")
    assert n.text == "ab"
    assert n.to_original(0, 2) == (0, 3)
    assert n.to_original(1, 1) == (2, 2)
    assert n.to_original(2, 2) == (3, 3)
    assert normalize("\u200b").to_original(0, 0) == (1, 1)
    with pytest.raises(ValueError, match="not within"):
        n.to_original(1, 3)
    with pytest.raises(ValueError, match="not within"):
        n.to_original(2, 1)


def test_bad_input():
    with pytest.raises(TypeError, match="takes a str"):
        normalize(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="offsets"):
        NormalizedText(original="ab", text="ab", offsets=((0, 1),), steps=())


# ---------------------------------------------------------------- properties

_ANY_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
        st.sampled_from("aeiost01345789$@!.-_ \u200b\u0456\u03bf\ufb01ｆ𝐟🅰🇦\u0301\u037a"),
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(_ANY_TEXT)
def test_offsets_are_monotonic_and_within_the_original(text):
    n = normalize(text)
    assert n.original == text
    assert len(n.offsets) == len(n.text)
    previous = (0, 0)
    for start, end in n.offsets:
        assert 0 <= start < end <= len(text)
        assert start >= previous[0] and end >= previous[1]
        previous = (start, end)
    if n.text:
        assert n.to_original(0, len(n.text)) == (n.offsets[0][0], n.offsets[-1][1])


def _plain(word: str) -> bool:
    """Neither an abbreviation, nor stretched (``bbb``: respell reads it), nor glued offensive words, nor an
    offensive word spelled by its sound."""
    w = word.lower()
    spans = [(i, i + 1) for i in range(len(w))]
    return (w not in ABBREVIATIONS and not re.search(r"([a-z])\1\1", w) and glued_words(w, spans)[0] == w
            and phonetic(w, spans)[0] == w)


_WORDS = st.lists(st.text(alphabet=string.ascii_letters, min_size=2, max_size=9).filter(_plain),
                  min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(_WORDS, st.sampled_from([" ", ", ", ". ", "? ", "\n"]))
def test_plain_ascii_words_only_change_case(words, sep):
    text = sep.join(words)
    n = normalize(text)
    assert n.text == text.lower()
    assert n.offsets == tuple((i, i + 1) for i in range(len(text)))
    assert n.steps == ()


@settings(max_examples=300, deadline=None)
@given(_ANY_TEXT)
def test_idempotent_on_its_own_output(text):
    once = normalize(text).text
    assert normalize(once).text == once


def _code_points_the_folds_touch() -> list[str]:
    """Every assigned code point one of the character-level folds acts on, or whose case partner
    it acts on: a confusables key, a character NFKC changes, an invisible or blank, a letter-shaped
    emoji, a Latin letter with a removable diacritic, a combining mark, a cased letter, and the
    leet characters. About 9,400 code points."""
    from rtaudit.engine.text.normalize import _BLANKS, is_invisible, _LEET_DIGITS, _emoji_letter, _strip_diacritics, confusable_letters

    folds = confusable_letters()
    touched = []
    for cp in range(sys.maxunicode + 1):
        c = chr(cp)
        category = unicodedata.category(c)
        if category in ("Cn", "Cs", "Co"):
            continue
        if (
            c in folds or c.lower() in folds or c.upper() in folds or c.lower() != c
            or not unicodedata.is_normalized("NFKC", c) or is_invisible(c) or cp in _BLANKS
            or _emoji_letter(c) or _strip_diacritics(c) != c or category.startswith("M")
            or c in _LEET_DIGITS or c in "$@!"
        ):
            touched.append(c)
    return touched


#: each character alone, doubled, inside a Latin word, after a Cyrillic letter (a mixed-script
#: token once the character folds) and inside a leet run
_CONTEXTS = ("{c}", "{c}{c}", "a{c}b", "\u0430{c}", "sh{c}1t")


def test_idempotent_on_every_code_point_the_folds_touch():
    """Exhaustive where Hypothesis samples: ``Ƽ`` lower-cases to ``ƽ``, which ``confusables``
    folds to ``s`` only on a second pass; 158 such cases (lower-casing, leet making a
    mixed-script token) were found by this check before normalize ran to a fixed point."""
    touched = _code_points_the_folds_touch()
    assert len(touched) > 9000 and "\u01bc" in touched
    unstable = []
    for c in touched:
        for context in _CONTEXTS:
            once = normalize(context.format(c=c))
            again = normalize(once.text)
            if again.text != once.text:
                unstable.append((f"U+{ord(c):04X}", context, once.text, again.text))
    assert not unstable, f"{len(unstable)} not idempotent, e.g. {unstable[:10]}"


@pytest.mark.parametrize(
    ("text", "seen", "steps"),
    [
        ("\u01bc", "s", ("confusables",)),  # Ƽ → ƽ (lowercase) → s (confusables)
        ("\u0194ay", "yay", ("confusables",)),  # Ɣ → ɣ → y
        ("\u0430$", "as", ("leet", "confusables")),  # Cyrillic а + $ → аs, now mixed-script → as
        ("x\u0393", "xy", ("confusables",)),  # Greek Γ → γ in a Latin token → y
    ],
)
def test_folds_that_feed_an_earlier_step_reach_the_fixed_point(text, seen, steps):
    n = normalize(text)
    assert n.text == seen and n.steps == steps
    assert len(n.offsets) == len(seen) and all(0 <= a < b <= len(text) for a, b in n.offsets)


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("see http://t.co/a55b1337 now", "see http://t.co/a55b1337 now"),
        ("(https://x.example/sh1t)", "(https://x.example/sh1t)"),
        ("link:http://t.co/f-u-c-k", "link:http://t.co/f-u-c-k"),
        ("www.b1tch.example", "www.b1tch.example"),
        ("mail a.s.s@example.com.", "mail a.s.s@example.com."),
        ("sh1t, meet me @ 5", "shit, meet me @ 5"),
    ],
)
def test_urls_and_emails_are_left_to_the_models(text, seen):
    assert normalize(text).text == seen


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("@g_anderson4 thanks", "@g_anderson4 thanks"),  # was '@g_andersona': the run after '_' was leet-folded
        ("cc @a_b_c and @x_1_3", "cc @a_b_c and @x_1_3"),  # no split_letters or leet inside a handle
        ("thanks @dan_b1tch3r!", "thanks @dan_b1tch3r!"),
        ("@g_anderson4 is a b1tch", "@g_anderson4 is a bitch"),  # the rest of the text still folds
        ("@$$hole", "asshole"),  # not a handle: '$' right after '@'
        ("@sh!t", "ashit"),  # not a handle: '!' inside the word
    ],
)
def test_handles_are_exempt_as_whole_tokens(text, seen):
    n = normalize(text)
    assert n.text == seen
    assert len(n.offsets) == len(n.text)


@pytest.mark.parametrize(
    "hostile",
    [
        "1" * 50_000,
        "$" * 50_000,
        "a.b." * 12_500,
        "ab." * 16_000,
        "a@b" + ".aa" * 16_000,
        "a!" * 25_000,
        "a " * 25_000,
        "a" + " " * 25_000 + "b" + " " * 25_000 + "c",
        "a" + "\u0301" * 50_000,
        "a1-" * 16_000,
    ],
    ids=lambda t: repr(t[:8]),
)
def test_long_hostile_inputs_stay_linear_and_consistent(hostile):
    # regex backtracking here once took minutes per message; the suite's timeout guards it
    n = normalize(hostile)
    assert len(n.offsets) == len(n.text) <= len(hostile)
    assert n.to_original(0, len(n.text))[1] <= len(hostile)


def test_abuse_abbreviations_are_spelled_out_with_their_span():
    n = normalize("ok KYS now")
    assert n.text == "ok kill yourself now" and "abbreviations" in n.steps
    assert n.to_original(3, 16) == (3, 6)
    assert normalize("k y s").text == "kill yourself"
    assert normalize("keys and skys").text == "keys and skys"
    assert normalize(n.text).text == n.text


def test_a_right_to_left_override_is_read_as_displayed() -> None:
    """U+202E shows the Latin text after it reversed (UAX #9): the models read what a person sees."""
    n = normalize("\u202etoidi diputs a era uoy")
    assert n.text == "you are a stupid idiot" and "bidi_override" in n.steps
    assert n.to_original(10, 16) == (0, 23)  # a reversed word maps to the whole override run
    popped = normalize("hello \u202etoidi\u202c friend")
    assert popped.text == "hello idiot friend"
    assert popped.to_original(6, 11) == (6, 13) and popped.to_original(12, 18) == (14, 20)
    assert normalize("a\u202ebc\ndef").text == "acb\ndef"  # a line break ends the override
    arabic = normalize("\u202eمرحبا يا صديقي")  # right-to-left letters display in logical order either way
    assert arabic.text == "مرحبا يا صديقي" and arabic.offsets[0] == (1, 2)
    for t in ("\u202etoidi diputs", "x\u202e\u202eab\u202cc", "\u202e"):
        once = normalize(t)
        assert normalize(once.text).text == once.text and len(once.offsets) == len(once.text)
