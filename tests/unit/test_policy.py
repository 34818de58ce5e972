from __future__ import annotations

import pytest
from pydantic import ValidationError

from rtaudit.engine.policy import DEFAULT_THRESHOLDS, PolicyBook, TenantPolicy, Threshold, stricter

PROFANITY = DEFAULT_THRESHOLDS["profanity"]


@pytest.mark.parametrize(
    "score, decision",
    [
        (0.0, "allow"),
        (PROFANITY.review - 0.001, "allow"),
        (PROFANITY.review, "review"),
        (PROFANITY.block - 0.001, "review"),
        (PROFANITY.block, "block"),
        (1.0, "block"),
    ],
)
def test_decide_at_and_around_thresholds(score, decision):
    assert TenantPolicy().decide({"profanity": score}, complete=True) == decision


def test_decide_takes_the_strictest_category():
    policy = TenantPolicy()
    assert policy.decide({"profanity": 0.95, "sexual": 0.5}, complete=True) == "block"
    assert policy.decide({"sexual": 0.5, "profanity": 0.95}, complete=True) == "block"
    assert policy.decide({"suggestive": 0.61, "profanity": 0.1}, complete=True) == "review"


def test_decide_ignores_categories_without_thresholds():
    assert TenantPolicy().decide({"ocr": 1.0, "neutral": 1.0}, complete=True) == "allow"


def test_block_threshold_above_one_never_blocks():
    assert TenantPolicy().decide({"suggestive": 1.0}, complete=True) == "review"


@pytest.mark.parametrize(
    "on_incomplete, scores, decision",
    [
        ("allow", {}, "allow"),
        ("allow", {"profanity": 0.6}, "review"),
        ("allow", {"profanity": 0.95}, "block"),
        ("review", {}, "review"),
        ("review", {"profanity": 0.95}, "block"),
        ("block", {}, "block"),
    ],
)
def test_incomplete_decision_is_at_least_on_incomplete(on_incomplete, scores, decision):
    policy = TenantPolicy(on_incomplete=on_incomplete)
    assert policy.decide(scores, complete=False) == decision


def test_complete_verdicts_ignore_on_incomplete():
    assert TenantPolicy(on_incomplete="block").decide({}, complete=True) == "allow"


def test_stricter_orders_block_review_allow():
    assert stricter("allow", "review") == "review"
    assert stricter("block", "review") == "block"
    assert stricter("allow", "allow") == "allow"


def test_threshold_rejects_block_below_review():
    with pytest.raises(ValidationError, match="below review threshold"):
        Threshold(review=0.8, block=0.5)
    assert Threshold(review=0.5, block=0.5).block == 0.5


@pytest.mark.parametrize("bad", [dict(review=-0.1, block=0.5), dict(review=0.5, block=1.5), dict(review=1.1, block=1.01)])
def test_threshold_rejects_out_of_range_values(bad):
    with pytest.raises(ValidationError):
        Threshold(**bad)


def test_flagged_lists_categories_at_review_or_above_highest_first():
    categories = {"suggestive": 0.7, "profanity": 0.5, "sexual": 0.9, "ocr": 1.0, "neutral": 0.99}
    assert TenantPolicy().flagged(categories) == ["sexual", "suggestive", "profanity"]
    assert TenantPolicy().flagged({"profanity": 0.49}) == []


def test_policy_book_uses_tenant_policy_else_default():
    strict = TenantPolicy(version="strict-2", on_incomplete="block", thresholds={"profanity": Threshold(review=0.1, block=0.2)})
    book = PolicyBook(tenants={"acme": strict})
    assert book.for_tenant("acme") is strict
    assert book.for_tenant("other") is book.default
    assert book.default.version == "default-1"
    assert book.for_tenant("acme").decide({"profanity": 0.3}, complete=True) == "block"
    assert book.for_tenant("other").decide({"profanity": 0.3}, complete=True) == "allow"


def test_default_policy_is_fail_closed():
    assert TenantPolicy().on_incomplete == "review"
    assert TenantPolicy().on_rejected == "review"


def test_policies_reject_unknown_settings():
    with pytest.raises(ValidationError):
        TenantPolicy(on_incomplet="allow")
