"""Drift scores (``engine/drift.py``) on the real MiniLM encoder's embeddings.

The core tests run on a bare clone: generated "twins" (English and Chinese posts built from
seeded templates) stand in for the traffic. The evaluation test reads Davidson tweets and COLD
posts from ../shared/data and skips without them.
"""

from __future__ import annotations

import csv
import random

import numpy as np
import pytest

from rtaudit.engine.drift import DRIFT_ALERT, DriftBook, ScoreDrift, SemanticDrift, alert_level, psi
from rtaudit.workers.settings import Settings

WINDOW = Settings().drift.window

_EN_SUBJECTS = ["my neighbour", "the new coach", "our team", "this app", "the mayor", "my sister", "that movie",
                "the weather", "the bus driver", "everyone at work", "the cat", "your podcast", "the new phone"]
_EN_VERBS = ["ruined", "saved", "loved", "hated", "talked about", "forgot", "watched", "fixed", "missed", "posted"]
_EN_OBJECTS = ["the game last night", "my whole weekend", "the concert", "dinner", "the meeting", "my birthday",
               "the traffic jam", "the final episode", "lunch", "the group chat", "the trip to the coast"]
_EN_TAILS = ["lol", "honestly", "again", "smh", "for real", "!!", "#mondays", "", "", "at all", "today"]
_ZH_SUBJECTS = ["我的邻居", "新来的教练", "我们队", "这个软件", "市长", "我姐姐", "那部电影", "天气", "司机", "同事们", "那只猫"]
_ZH_VERBS = ["毁了", "救了", "喜欢", "讨厌", "聊起", "忘了", "看了", "修好了", "错过了", "发了"]
_ZH_OBJECTS = ["昨晚的比赛", "整个周末", "演唱会", "晚饭", "会议", "我的生日", "堵车", "最后一集", "午饭", "群聊", "去海边的旅行"]
_ZH_TAILS = ["哈哈", "真的", "又来了", "无语", "太好了", "！", "", "", "今天", "服了"]


def english_post(rng: random.Random) -> str:
    return f"{rng.choice(_EN_SUBJECTS)} {rng.choice(_EN_VERBS)} {rng.choice(_EN_OBJECTS)} {rng.choice(_EN_TAILS)}".strip()


def chinese_post(rng: random.Random) -> str:
    return f"{rng.choice(_ZH_SUBJECTS)}{rng.choice(_ZH_VERBS)}{rng.choice(_ZH_OBJECTS)}{rng.choice(_ZH_TAILS)}"


@pytest.fixture(scope="module")
def encoder(text_scorer):
    return text_scorer.encoder


@pytest.fixture(scope="module")
def twins(encoder):
    """Embeddings of 1,500 distinct generated English posts and ``WINDOW`` Chinese ones (seeded)."""
    rng = random.Random(37)
    en: set[str] = set()
    while len(en) < 1500:
        en.add(english_post(rng))
    zh: set[str] = set()
    while len(zh) < WINDOW:
        zh.add(chinese_post(rng))
    en_posts, zh_posts = sorted(en), sorted(zh)
    rng.shuffle(en_posts)
    rng.shuffle(zh_posts)
    return encoder.encode(en_posts), encoder.encode(zh_posts)


def test_a_switch_of_language_crosses_the_alert_within_one_window(twins):
    en, zh = twins
    drift = SemanticDrift(WINDOW)
    before = drift.add(en[:2 * WINDOW])
    after = drift.add(zh)
    assert len(before) == 1 and len(after) == 1, "two English windows, then one Chinese window"
    print(f"semantic drift, generated twins: English→English {before[0]:.4f}, English→Chinese {after[0]:.4f}")
    assert before[0] < 0.1
    assert after[0] > DRIFT_ALERT


def test_two_samples_of_one_distribution_stay_below_0_1_in_20_of_20_runs(twins):
    en, _ = twins
    scores = []
    for seed in range(20):
        order = np.random.default_rng(seed).permutation(len(en))
        drift = SemanticDrift(WINDOW)
        scores += drift.add(en[order[:2 * WINDOW]])
    print(f"identical distributions, 20 seeded runs: max {max(scores):.4f}, mean {np.mean(scores):.4f}")
    assert len(scores) == 20
    assert max(scores) < 0.1


def test_davidson_tweets_to_chinese_posts(encoder, data_dir):
    """Evaluation data: Davidson tweets, then COLD's Chinese posts."""
    with open(data_dir / "text/davidson/labeled_data.csv", newline="", encoding="utf-8") as f:
        tweets = [row["tweet"] for row in csv.DictReader(f)]
    with open(data_dir / "text/cold/dev.csv", newline="", encoding="utf-8-sig") as f:
        posts = [row["TEXT"] for row in csv.DictReader(f)]
    rng = random.Random(7)
    pool = encoder.encode(rng.sample(tweets, 6 * WINDOW))  # 1,536 tweets, encoded once
    zh = encoder.encode(rng.sample(posts, WINDOW))
    drift = SemanticDrift(WINDOW)
    before, after = drift.add(pool[:2 * WINDOW]), drift.add(zh)
    print(f"semantic drift, Davidson→Davidson {before[0]:.4f}, Davidson→COLD {after[0]:.4f}")
    assert before[0] < 0.1 < DRIFT_ALERT < after[0]
    runs = []
    for seed in range(20):  # two disjoint windows drawn from the pool per run
        order = np.random.default_rng(seed).permutation(len(pool))
        runs += SemanticDrift(WINDOW).add(pool[order[:2 * WINDOW]])
    print(f"Davidson vs Davidson, 20 seeded runs: max {max(runs):.4f}")
    assert len(runs) == 20 and max(runs) < 0.1


def test_windows_close_across_batches_and_the_score_averages_pairs():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(10, 4)) + np.array([5.0, 0, 0, 0])
    b = rng.normal(size=(10, 4)) + np.array([0, 5.0, 0, 0])
    drift = SemanticDrift(window=5, pairs=2)
    assert drift.add(a[:3]) == [] and drift.score is None
    first = drift.add(a[3:])  # windows 1 and 2 closed: one pair, both near (5, 0, 0, 0)
    assert len(first) == 1 and first[0] < 0.1
    closed = drift.add(b)  # windows 3 and 4: the averages of (a→a, a→b), then (a→b, b→b)
    assert len(closed) == 2 and drift.windows == 4
    single = SemanticDrift(window=5, pairs=1)
    single.add(a)
    jump = single.add(b)[0]  # a's mean against b's alone
    assert jump > 0.7
    assert closed[0] == pytest.approx((1 - (1 - first[0]) + jump) / 2, abs=0.05)
    with pytest.raises(ValueError, match="dimension"):
        drift.add(np.ones((2, 3)))
    with pytest.raises(ValueError, match="float\\[n, d\\]"):
        drift.add(np.ones(4))
    with pytest.raises(ValueError):
        SemanticDrift(window=0)


def test_the_held_score_keeps_a_switch_visible_after_it():
    a, b = np.tile(np.eye(4)[0], (40, 1)), np.tile(np.eye(4)[1], (40, 1))
    drift = SemanticDrift(window=10, hold=3)
    drift.add(a)  # windows 1-4
    drift.add(b[:10])  # window 5: the pair (4, 5) straddles the switch
    assert drift.score == pytest.approx(1.0) and drift.held == pytest.approx(1.0)
    drift.add(b[10:30])  # windows 6, 7: b against b
    assert drift.score == pytest.approx(0.0) and drift.held == pytest.approx(1.0)
    drift.add(b[30:])  # window 8: the switch is out of the last three
    assert drift.held == pytest.approx(0.0)


def test_psi_is_zero_for_one_histogram_and_large_for_a_shift():
    rng = np.random.default_rng(1)
    ref = rng.beta(1, 8, 5000)  # mostly low scores: benign traffic
    same = rng.beta(1, 8, 5000)
    shifted = rng.beta(3, 3, 5000)  # a raid: scores move to the middle
    assert psi(ref, ref) == pytest.approx(0.0)
    assert psi(ref, same) < 0.1
    assert psi(ref, shifted) > 0.25
    with pytest.raises(ValueError, match="no scores"):
        psi(ref, np.array([]))


def test_score_drift_takes_a_new_reference_when_the_version_changes():
    rng = np.random.default_rng(2)
    sd = ScoreDrift(reference_size=500, window=500)
    sd.add("v1", [{"offensive": float(s)} for s in rng.beta(1, 8, 500)])
    assert sd.reference_ready and sd.psi() == {}
    sd.add("v1", [{"offensive": float(s)} for s in rng.beta(3, 3, 500)])
    assert sd.psi()["offensive"] > 0.25
    sd.add("v2", [{"offensive": float(s)} for s in rng.beta(3, 3, 1000)])  # goes live: this is normal now
    assert sd.version == "v2" and sd.psi()["offensive"] < 0.1


def test_drift_book_keeps_stage_and_tenant_apart():
    book = DriftBook(window=2, reference_size=2, psi_window=2)
    book.add_embeddings("text", "acme", np.eye(4)[[0, 0, 1, 1]])
    book.add_embeddings("text", "globex", np.eye(4)[[0, 0, 0, 0]])
    book.add_scores("text", "acme", "v1", [{"hate": 0.1}] * 4)
    readings = {(r.stage, r.tenant): r for r in book.readings()}
    assert readings[("text", "acme")].semantic == pytest.approx(1.0)
    assert readings[("text", "globex")].semantic == pytest.approx(0.0)
    assert readings[("text", "acme")].psi == {"hate": pytest.approx(0.0)}


@pytest.mark.parametrize(("p99_s", "drift", "level"), [
    (2.5, 0.45, "page"), (2.5, 0.4, "page"), (2.0, 0.45, None), (1.2, 0.3, "ticket"), (0.8, 0.25, "ticket"),
    (2.0, 0.39, "ticket"), (1.2, 0.45, None), (0.5, 0.3, None), (3.0, 0.2, None),
])
def test_alert_matrix(p99_s, drift, level):
    assert alert_level(p99_s, drift) == level
