"""Conversation is not abuse: laughter, thanks and greetings (the Chit-Chat negatives of the English head),
their loader and labels, and the conversational false-positive row of ``rtaudit eval``."""

from __future__ import annotations

import numpy as np
import pytest

from rtaudit.modelbuild.text import data as D
from rtaudit.modelbuild.text import training_data as T
from rtaudit.modelbuild.text.evaluation import LAUGHTER, conversation

#: ordinary chat the tweet-trained head read as abuse before the Chit-Chat negatives (shipped head,
#: 2026-12-01: "lol" offensive 0.65, "haha so funny" 0.48); none of them is a Chit-Chat message.
CHAT = ["lol", "haha so funny", "that's so funny", "that was hilarious", "LMAO no way", "hahaha you got me there",
        "thanks for everything, see you soon", "good morning everyone", "omg that is amazing lol", "talk to you later"]
#: farewells read as self-harm before they became its hard negatives (goodbye notes are a trope of the
#: r/SuicideWatch posts; training_data.FAREWELL_WORDS): 0.74, 0.78, 0.66 on the head before (2026-12-02),
#: 0.28, 0.46, 0.34 after. None is a Chit-Chat message.
FAREWELLS = ["thanks so much, see you tomorrow!", "you too. talk to you tomorrow.", "See you tomorrow"]
#: and their contrasts: a goodbye that says the writer is done living (self-harm 0.63 and 0.79 on the frozen encoder,
#: 0.20 and 0.34 on the first fine-tuned one, 0.10 and 0.67 on the six-layer one: the first is a known miss,
#: test_a_suicidal_goodbye_is_self_harm)
SUICIDAL_FAREWELLS = ["goodbye everyone, I can't take it anymore", "this is my goodbye note, I'm done living"]


@pytest.fixture(scope="module")
def chat_scores(text_scorer):
    return dict(zip(CHAT, (r.scores for r in text_scorer.score(CHAT, evidence=False))))


@pytest.mark.parametrize("text", CHAT)
def test_ordinary_chat_is_not_flagged(chat_scores, text):
    assert max(chat_scores[text].values()) < 0.5, chat_scores[text]


def test_a_farewell_is_not_self_harm(text_scorer):
    scores = [r.scores["self-harm"] for r in text_scorer.score(FAREWELLS, evidence=False)]
    assert max(scores) < 0.5, scores


@pytest.mark.parametrize("text", [pytest.param(t, marks=pytest.mark.xfail(
    t == SUICIDAL_FAREWELLS[0], strict=True, reason="known miss of the fine-tuned encoders: self-harm 0.20 with artifacts "
    "2026-12-03-f8525f07, about 0.42 with 2026-12-03-4b441c1b, 0.30 with 2026-12-03-97926eb7, 0.10 with 2026-12-04-e7082391 (0.63 on the "
    "frozen encoder); Suicide Detection test recall 0.882 (docs/text-moderation.md, 'All six layers fine-tuned')")) for t in SUICIDAL_FAREWELLS])
def test_a_suicidal_goodbye_is_self_harm(text_scorer, text):
    score = text_scorer.score([text], evidence=False)[0].scores["self-harm"]
    assert score >= 0.5, score


def test_farewells_are_self_harm_hard_negatives_and_violent_words_violence_ones():
    """The weighting on rows the test makes (no data needed): a negative that says goodbye counts
    HARD_NEGATIVE_WEIGHT times for self-harm only, one with a violent word for violence only; positives never."""
    rows = [D.Example("see you tomorrow!", {}, "chitchat", "train", "a"), D.Example("I will kill it at the gym", {}, "chitchat", "train", "b"),
            D.Example("what a lovely day", {}, "chitchat", "train", "c"), D.Example("goodbye, I can't go on", {}, "suicide_detection", "train", "d")]
    y, train = np.array([0, 0, 0, 1]), np.ones(4, bool)
    base = T.balanced_weights(y, np.array([e.dataset for e in rows]))
    ratio = {cat: T.category_weights(cat, rows, y, train) / base for cat in ("self-harm", "violence")}
    assert ratio["self-harm"].tolist() == [T.HARD_NEGATIVE_WEIGHT, 1, 1, 1]
    assert ratio["violence"].tolist() == [1, T.HARD_NEGATIVE_WEIGHT, 1, 1]
    assert not any(T.FAREWELL_WORDS.search(t) for t in ("abyss", "i can see your point", "seeking help"))


def test_laughter_pattern():
    assert all(LAUGHTER.search(t) for t in ("lol", "LOLOL", "hahaha", "that's hilarious", "lmaooo"))
    assert not any(LAUGHTER.search(t) for t in ("lollipop", "the lolly", "a hash", "hello"))


def test_chitchat_loader_splits_and_labels(safety_data_dir):
    rows = D.load("chitchat", safety_data_dir)
    assert len(rows) > 200_000
    assert all(r.labels == {c: 0 for c in D.CATEGORIES} for r in rows)
    keys = {s: {D.text_key(r.text) for r in rows if r.split == s} for s in ("train", "dev", "test")}
    assert not (keys["train"] & keys["test"]) and not (keys["dev"] & keys["test"])
    share = len(keys["test"]) / len(rows)
    assert abs(share - D.SAFETY_TEST) < 0.01


def test_training_reads_a_sample_of_chitchat_train_only(safety_data_dir, data_dir):
    rows = [e for e in T.english_examples(data_dir, safety_data_dir) if e.dataset == "chitchat"]
    farewells = [e for e in rows if T.FAREWELL_WORDS.search(e.text)]
    train = [e for e in D.load("chitchat", safety_data_dir, "train") if T.FAREWELL_WORDS.search(e.text)]
    assert {e.split for e in rows} == {"train"} and len({e.uid for e in rows}) == len(rows)
    # the hashed sample, and besides it every farewell of the train split (self-harm's hard negatives)
    assert len(rows) - len(farewells) < T.CHITCHAT_TRAIN_ROWS < len(rows) and {e.uid for e in farewells} == {e.uid for e in train}


def test_conversation_false_positives_of_the_shipped_model(text_scorer, safety_data_dir):
    rows = {r.subset: r for r in conversation(text_scorer, safety_data_dir, quick=True)}
    assert rows["messages"].n == rows["messages that laugh"].n == 300
    # measured on the shipped head, this quick sample: 2.7 % of messages, 8.3 % of laughing ones (full
    # run in docs/text-moderation.md); the head before Chit-Chat flagged 4.8 % / 11.9 % of the full run.
    # alt-profanity-check alone flags fewer (2.0 % / 4.3 % here): the head's extra flags are the
    # categories it has and alt-profanity-check lacks (self-harm on "Gotta go, sorry!").
    assert rows["messages"].any_rate <= 0.04, rows["messages"].examples
    assert rows["messages that laugh"].any_rate <= 0.10, rows["messages that laugh"].examples
