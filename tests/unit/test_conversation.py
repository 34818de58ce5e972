"""Conversation is not abuse: laughter, thanks and greetings (the Chit-Chat negatives of the English head),
their loader and labels, and the conversational false-positive row of ``rtaudit eval``."""

from __future__ import annotations

import pytest

from rtaudit.engine.text import data as D
from rtaudit.engine.text import training_data as T
from rtaudit.engine.text.evaluation import LAUGHTER, conversation

#: ordinary chat the tweet-trained head read as abuse before the Chit-Chat negatives (shipped head,
#: 2026-12-01: "lol" offensive 0.65, "haha so funny" 0.48); none of them is a Chit-Chat message.
CHAT = ["lol", "haha so funny", "that's so funny", "that was hilarious", "LMAO no way", "hahaha you got me there",
        "thanks for everything, see you soon", "good morning everyone", "omg that is amazing lol", "talk to you later"]
#: known false positive (docs/text-moderation.md): a farewell reads as self-harm (goodbye notes are a
#: trope of the r/SuicideWatch posts): 0.71 before the Chit-Chat negatives, about as much after.
FAREWELL = "thanks so much, see you tomorrow!"


@pytest.fixture(scope="module")
def chat_scores(text_scorer):
    return dict(zip(CHAT, (r.scores for r in text_scorer.score(CHAT, evidence=False))))


@pytest.mark.parametrize("text", CHAT)
def test_ordinary_chat_is_not_flagged(chat_scores, text):
    assert max(chat_scores[text].values()) < 0.5, chat_scores[text]


@pytest.mark.xfail(strict=True, reason="known false positive: a farewell reads as self-harm (docs/text-moderation.md)")
def test_a_farewell_is_not_self_harm(text_scorer):
    assert text_scorer.score([FAREWELL], evidence=False)[0].scores["self-harm"] < 0.5


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
    assert len(rows) == T.CHITCHAT_TRAIN_ROWS and {e.split for e in rows} == {"train"}


def test_conversation_false_positives_of_the_shipped_model(text_scorer, safety_data_dir):
    rows = {r.subset: r for r in conversation(text_scorer, safety_data_dir, quick=True)}
    assert rows["messages"].n == rows["messages that laugh"].n == 300
    # measured on the shipped head, this quick sample: 2.7 % of messages, 8.3 % of laughing ones (full
    # run in docs/text-moderation.md); the head before Chit-Chat flagged 4.8 % / 11.9 % of the full run.
    # alt-profanity-check alone flags fewer (2.0 % / 4.3 % here): the head's extra flags are the
    # categories it has and alt-profanity-check lacks (self-harm on "Gotta go, sorry!").
    assert rows["messages"].any_rate <= 0.04, rows["messages"].examples
    assert rows["messages that laugh"].any_rate <= 0.10, rows["messages that laugh"].examples
