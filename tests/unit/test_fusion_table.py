"""The pending table of one partition: commit offsets for rebuild-by-replay, deadlines
from a heap, deduplication after a restart, retention."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rtaudit.engine.fusion import Fusion
from rtaudit.engine.fusion_table import PendingTable
from rtaudit.engine.policy import PolicyBook, TenantPolicy

from .builders import CREATED_MS, DEADLINE_MS, manifest, partial, tick

GRACE_MS = 250
RETENTION_MS = 60_000
TEXT, IMAGE = "text/text:0", "image/image:1"
NOW = CREATED_MS + 10


def table() -> PendingTable:
    return PendingTable(Fusion(policies=PolicyBook(default=TenantPolicy()), grace_ms=GRACE_MS, retention_ms=RETENTION_MS))


def test_commit_offset_holds_at_the_oldest_undecided_request():
    t = table()
    assert t.commit_offset() is None
    assert t.apply(manifest(TEXT, request_id="a", lane="hi"), 10, NOW) is None
    assert t.apply(manifest(TEXT, request_id="b"), 11, NOW) is None
    assert t.commit_offset() == 10
    decision = t.apply(partial(TEXT, request_id="a"), 12, NOW)
    assert decision is not None and decision.verdict.request_id == "a" and decision.verdict.complete
    assert decision.lane == "hi"
    assert t.commit_offset() == 11  # b is still waiting
    assert t.apply(partial(TEXT, request_id="b"), 13, NOW) is not None
    assert t.commit_offset() == 14  # nothing waits: past the last record
    assert t.undecided == 0


def test_a_decided_request_never_decides_again():
    t = table()
    t.apply(manifest(TEXT), 0, NOW)
    assert t.apply(partial(TEXT), 1, NOW) is not None
    assert t.apply(partial(TEXT), 2, NOW) is None  # a replayed duplicate
    assert t.due(DEADLINE_MS + GRACE_MS + 1) == []
    assert t.commit_offset() == 3


def test_mark_decided_suppresses_the_replay_of_a_request_decided_before_a_restart():
    t = table()
    t.mark_decided("r-1", NOW)
    assert t.apply(manifest(TEXT, request_id="r-1"), 5, NOW) is None
    assert t.apply(partial(TEXT, request_id="r-1"), 6, NOW) is None
    assert t.undecided == 0 and t.commit_offset() == 7
    assert t.due(DEADLINE_MS + GRACE_MS + 1) == []


def test_deadline_gives_one_incomplete_verdict_after_the_grace():
    t = table()
    t.apply(manifest(TEXT, IMAGE), 0, NOW)
    t.apply(partial(TEXT), 1, NOW)
    assert t.due(DEADLINE_MS + GRACE_MS - 1) == []
    [decision] = t.due(DEADLINE_MS + GRACE_MS)
    assert not decision.verdict.complete and decision.verdict.parts[IMAGE] == "missing"
    assert t.due(DEADLINE_MS + GRACE_MS + 5000) == []
    assert t.commit_offset() == 2


def test_a_manifest_that_moves_the_deadline_earlier_is_honoured():
    t = table()
    t.apply(partial(TEXT), 0, NOW)  # the partial carries DEADLINE_MS
    t.apply(manifest(TEXT, IMAGE, deadline_ms=DEADLINE_MS - 5000), 1, NOW)
    [decision] = t.due(DEADLINE_MS - 5000 + GRACE_MS)
    assert decision.verdict.deadline_ms == DEADLINE_MS - 5000


def test_decided_entries_are_dropped_after_retention():
    t = table()
    t.apply(manifest(TEXT), 0, NOW)
    t.apply(partial(TEXT), 1, NOW)
    t.mark_decided("x", NOW)
    assert len(t) == 2
    t.due(NOW + RETENTION_MS - 1)
    assert len(t) == 2
    t.due(NOW + RETENTION_MS)
    assert len(t) == 1  # "x" (no deadline known) goes; the decided request is kept past its deadline
    t.due(DEADLINE_MS + GRACE_MS + RETENTION_MS)
    assert len(t) == 0


def test_old_fusion_ticks_on_the_topic_only_move_the_position():
    t = table()
    assert t.apply(tick("deadline", DEADLINE_MS + 10_000), 7, NOW) is None
    assert len(t) == 0 and t.commit_offset() == 8


@settings(max_examples=60)
@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=40))
def test_replay_from_the_commit_offset_loses_and_repeats_nothing(seed: int, n_requests: int):
    """Property: a fusion that stops at any record and restarts from its commit offset,
    knowing the verdicts it produced, emits exactly one verdict per request overall."""
    rng = random.Random(seed)
    records = []
    for i in range(n_requests):
        rid = f"r{i}"
        parts = [TEXT] if rng.random() < 0.5 else [TEXT, IMAGE]
        records.append(manifest(*parts, request_id=rid))
        records += [partial(p, request_id=rid) for p in parts if rng.random() < 0.9]
    rng.shuffle(records)
    crash_at = rng.randrange(len(records) + 1)
    first = table()
    emitted: list[str] = []
    for offset, record in enumerate(records[:crash_at]):
        d = first.apply(record, offset, NOW)
        if d is not None:
            emitted.append(d.verdict.request_id)
    resume = first.commit_offset() or 0
    second = table()
    for rid in emitted:  # read back from audit.verdicts before the replay
        second.mark_decided(rid, NOW)
    for offset in range(resume, len(records)):
        d = second.apply(records[offset], offset, NOW)
        if d is not None:
            emitted.append(d.verdict.request_id)
    emitted += [d.verdict.request_id for d in second.due(DEADLINE_MS + GRACE_MS)]
    assert sorted(emitted) == sorted(f"r{i}" for i in range(n_requests))


LONG_DEADLINE_MS = CREATED_MS + 600_000  # a 600 s SLO, as in issue 34


def test_a_replayed_partial_after_the_retention_but_before_the_deadline_gives_no_second_verdict():
    """Issue 34, defect 3: a request decided complete at once; a modality worker that replays its
    lane minutes later sends the part again (``expired``). Fusion had forgotten the decided id after
    ``retention_ms`` and gave the request a second, different verdict at its deadline."""
    t = table()
    t.apply(manifest(TEXT, request_id="q", deadline_ms=LONG_DEADLINE_MS), 0, NOW)
    first = t.apply(partial(TEXT, request_id="q", deadline_ms=LONG_DEADLINE_MS), 1, NOW)
    assert first is not None and first.verdict.complete
    t.due(NOW + RETENTION_MS + 60_000)  # the retention has ended
    later = NOW + RETENTION_MS + 60_000
    assert t.apply(partial(TEXT, request_id="q", status="expired", deadline_ms=LONG_DEADLINE_MS), 2, later) is None
    assert t.apply(manifest(TEXT, request_id="q", deadline_ms=LONG_DEADLINE_MS), 3, later) is None
    assert t.due(LONG_DEADLINE_MS + GRACE_MS) == []
    assert t.take_dropped() == {"decided": 2}
    assert t.take_dropped() == {}  # counted once
    assert t.undecided == 0 and t.commit_offset() == 4


def test_a_partial_later_than_any_replay_of_an_unknown_request_is_dropped_and_counted():
    t = table()
    t.due(DEADLINE_MS + GRACE_MS + RETENTION_MS)
    assert t.apply(partial(TEXT, request_id="gone"), 0, DEADLINE_MS + GRACE_MS + RETENTION_MS) is None
    assert len(t) == 0 and t.take_dropped() == {"late": 1}


def test_decided_ids_are_kept_until_the_deadline_plus_grace_plus_retention():
    t = table()
    t.apply(manifest(TEXT, request_id="q", deadline_ms=LONG_DEADLINE_MS), 0, NOW)
    t.apply(partial(TEXT, request_id="q", deadline_ms=LONG_DEADLINE_MS), 1, NOW)
    t.due(LONG_DEADLINE_MS + GRACE_MS + RETENTION_MS - 1)
    assert len(t) == 1
    t.due(LONG_DEADLINE_MS + GRACE_MS + RETENTION_MS)
    assert len(t) == 0
