"""rtaudit.engine.text.windows and whole-document scoring: every piece read, cost bounded, padding no longer hides abuse."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtaudit.modelbuild.text.long_document import SENTENCES, benign_sentences, whole_document
from rtaudit.engine.text.windows import (
    MAX_COST_RATIO,
    OVERLAP_TOKENS,
    SNAP_TOKENS,
    WINDOW_TOKENS,
    TokenView,
    encoded_cost,
    plan_windows,
    token_view,
    window_chars,
)


def _toy_view(text: str) -> TokenView:
    """Words and single punctuation marks as pieces (what BERT's pre-tokenizer splits on)."""
    found = [(m.start(), m.end()) for m in re.finditer(r"\w+|[^\w\s]", text)]
    return token_view(text, found, [text[a:b] for a, b in found])


@st.composite
def _views(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(0, 2500))
    rng = random.Random(draw(st.integers(0, 2**32)))
    p_sentence = draw(st.sampled_from([0.0, 0.01, 0.05, 0.2, 0.5, 1.0]))
    p_piece = draw(st.sampled_from([0.0, 0.2, 0.5, 0.9]))
    word = tuple([True] + [rng.random() >= p_piece for _ in range(n - 1)])
    sent = tuple([True] + [rng.random() < p_sentence for _ in range(n - 1)])
    return TokenView(tuple((i, i + 1) for i in range(n)), word, sent)


@settings(max_examples=300, deadline=None)
@given(_views())
def test_every_piece_is_read_within_the_cost_bound(view):
    n = len(view.offsets)
    windows = plan_windows(view)
    covered = [False] * n
    for s, e in windows:
        assert 0 <= s < e <= n or (n == 0 and (s, e) == (0, 0))
        assert e - s <= WINDOW_TOKENS
        covered[s:e] = [True] * (e - s)
    assert all(covered)
    assert [s for s, _ in windows] == sorted(s for s, _ in windows)
    assert encoded_cost(windows) <= MAX_COST_RATIO * (n + 2)
    if n <= WINDOW_TOKENS:
        assert windows == [(0, n)]


def test_sentences_are_windows_of_their_own():
    text = " ".join(f"Sentence number {i} is about the weather and the garden today." for i in range(12))
    view = _toy_view(text)
    windows = plan_windows(view)
    spans = window_chars(view, windows)
    assert len(view.offsets) > WINDOW_TOKENS
    assert [text[a:b] for a, b in spans] == [f"Sentence number {i} is about the weather and the garden today." for i in range(12)]


def test_sentence_starts_stops_and_blank_lines_not_line_wraps():
    text = "first line wrapped\nmid sentence. Third one! e.g.x stays\n\nnew paragraph"
    view = _toy_view(text)
    words = [text[a:b] for a, b in view.offsets]
    assert [words[i] for i, s in enumerate(view.sentence_start) if s] == ["first", "Third", "e", "new"]


def test_a_long_sentence_slides_with_a_bounded_overlap():
    view = TokenView(tuple((i, i + 1) for i in range(500)), tuple([True] * 500), tuple([True] + [False] * 499))
    windows = plan_windows(view)
    assert all(e - s <= WINDOW_TOKENS for s, e in windows)
    for (_, e1), (s2, _) in zip(windows, windows[1:]):
        assert 0 < e1 - s2 <= OVERLAP_TOKENS
    assert windows[0] == (0, WINDOW_TOKENS) and windows[-1][1] == 500


def test_window_edges_land_on_word_starts():
    # every third piece continues a word ("##"): no window may start or end inside a word
    word = tuple(i % 3 == 0 for i in range(400))
    view = TokenView(tuple((i, i + 1) for i in range(400)), word, tuple([True] + [False] * 399))
    for s, e in plan_windows(view):
        assert word[s]
        assert e == 400 or word[e]
    assert SNAP_TOKENS >= 3


def test_short_sentences_share_windows_when_alone_they_would_cost_too_much():
    text = " ".join(["Ok."] * 200)  # 2 pieces each: alone, 4 per sentence would be 2x the text
    view = _toy_view(text)
    windows = plan_windows(view)
    assert encoded_cost(windows) <= MAX_COST_RATIO * (len(view.offsets) + 2)
    assert len(windows) < 200


# ---------------------------------------------------------------- the scorer, whole documents

ABUSE = SENTENCES[0]


@pytest.fixture(scope="module")
def filler() -> list[str]:
    return benign_sentences(5000)


def test_benign_filler_is_benign(text_scorer, filler):
    doc = " ".join(filler)
    assert len(doc.split()) >= 5000 and len(doc) <= 32_000
    assert max(text_scorer.score([doc], evidence=False)[0].scores.values()) < 0.5


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_abuse_anywhere_in_5000_benign_words_scores_as_alone(text_scorer, filler, where):
    k = {"start": 0, "middle": len(filler) // 2, "end": len(filler)}[where]
    doc = " ".join(filler[:k] + [ABUSE] + filler[k:])
    alone, whole = text_scorer.score([ABUSE, doc], evidence=where == "middle")
    assert alone.scores["offensive"] >= 0.5
    for c, v in alone.scores.items():
        if v >= 0.5:  # what the sentence is flagged for scores as it does alone (the target)
            assert abs(whole.scores[c] - v) <= 0.1, (c, whole.scores[c], v)
        else:  # the rest is the worst benign window's (violence 0.34 on this filler): still not flagged
            assert whole.scores[c] < 0.5, (c, whole.scores[c], v)
    if where == "middle":
        assert whole.spans and {s.text for s in whole.spans} <= set(re.findall(r"\w+", ABUSE))
        for s in whole.spans:
            assert doc[s.start:s.end] == s.text
            assert doc.index(ABUSE) <= s.start < s.end <= doc.index(ABUSE) + len(ABUSE)


def test_spans_of_a_window_point_at_what_the_user_wrote(text_scorer):
    written = "You are a stupid b1tch."
    doc = " ".join(benign_sentences(300, seed=1) + [written] + benign_sentences(300, seed=2))
    result = text_scorer.score([doc])[0]
    assert result.scores["offensive"] >= 0.5
    at = doc.index(written)
    assert any(s.text == "b1tch" and s.start == at + written.index("b1tch") for s in result.spans), result.spans


def test_encoded_tokens_stay_within_the_bound(text_scorer, filler):
    doc = " ".join(filler[: len(filler) // 2] + [ABUSE] + filler[len(filler) // 2:])
    norm = text_scorer.score([doc], evidence=False)[0].normalized
    own = len(text_scorer.encoder.pieces([norm])[0].ids) + 2
    windows = text_scorer._windows([norm])[0]
    encoded = sum(len(ids) for ids in text_scorer.encoder.tokenize([norm[a:b] for a, b in windows]))
    assert len(windows) > 100
    assert encoded <= MAX_COST_RATIO * own, (encoded, own)


def test_a_text_that_fits_one_window_is_read_whole(text_scorer):
    texts = ["have a nice day", "x" * 61 + " y", " ".join(benign_sentences(30))]
    assert text_scorer._windows(texts) == [[(0, len(t))] for t in texts]
    one = " ".join(benign_sentences(80))
    assert len(text_scorer._windows([one])[0]) > 1


def test_padding_just_past_one_window_no_longer_dilutes(text_scorer):
    doc = " ".join(benign_sentences(60) + [ABUSE])
    alone, padded = text_scorer.score([ABUSE, doc], evidence=False)
    assert abs(padded.scores["offensive"] - alone.scores["offensive"]) <= 0.1


def test_the_whole_document_report_scores_every_sentence_at_every_place(text_scorer):
    rows = whole_document(lambda texts: [r.scores for r in text_scorer.score(texts, evidence=False)], words=2000)
    assert [(r.sentence, r.place) for r in rows] == [(s, p) for s in SENTENCES for p in ("start", "middle", "end")]
    assert all(r.words >= 2000 for r in rows)
    insult = [r for r in rows if r.sentence == ABUSE]
    assert all(r.flagged and r.met for r in insult), insult
