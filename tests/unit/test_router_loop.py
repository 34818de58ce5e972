"""The router's batch loop without a broker: outputs per record, an unexpected error goes to
the DLQ with a rejection verdict instead of crash-looping the router, and the commit position
moves only past records whose outputs were handed to the producer."""

from __future__ import annotations

import pytest

from rtaudit.topics.catalog import DLQ, SCORES, VERDICTS
from rtaudit.workers.router import RouterHandler
from rtaudit.workers.runtime.driver import record
from rtaudit.workers.settings import load_settings

from .builders import audit_request
from .roles import RoleUnderTest


def request_record(req, offset):  # type: ignore[no-untyped-def]
    return record("audit.requests", req.model_dump_json().encode(), req.request_id.encode(), offset=offset)


@pytest.fixture
def loop(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path))
    settings = load_settings()
    book = settings.policies
    return RoleUnderTest(RouterHandler(lambda: book, settings.media.policy()), "router")


def test_a_valid_request_gives_tasks_and_a_manifest(loop) -> None:  # type: ignore[no-untyped-def]
    req = audit_request(request_id="ok-1")
    loop.handle([request_record(req, 7)])
    topics = [t for t, _, _ in loop.outputs]
    assert topics == ["audit.text.lo", SCORES] or topics == ["audit.text.hi", SCORES]
    assert loop.next_offset == {0: 8}


def test_an_unexpected_error_is_routed_to_the_dlq_with_a_rejection_verdict(loop) -> None:  # type: ignore[no-untyped-def]
    class BrokenRouter:
        policies = loop.router.policies  # read by the quota check

        def deadline_ms(self, request, now_ms):  # type: ignore[no-untyped-def]
            return now_ms + 1000

        def plan(self, request, now_ms, lane=None, deadline_ms=None):  # type: ignore[no-untyped-def]
            raise ZeroDivisionError("division by zero")

    loop.handler.router = BrokenRouter()
    req = audit_request(request_id="bug-1")
    loop.handle([request_record(req, 3)])
    by_topic = {t: v for t, _, v in loop.outputs}
    assert by_topic[DLQ]["error_code"] == "routing_failed"
    assert "ZeroDivisionError: division by zero" in by_topic[DLQ]["error"]
    assert SCORES not in by_topic  # the router answers a request it rejects itself: no fusion hop
    assert by_topic[VERDICTS]["request_id"] == "bug-1" and by_topic[VERDICTS]["decision"] == "review"
    assert by_topic[VERDICTS]["reasons"][0].startswith("rejected: routing_failed: unexpected error while routing")
    assert loop.next_offset == {0: 4}


def test_the_position_does_not_move_past_a_record_whose_routing_was_interrupted(loop) -> None:  # type: ignore[no-untyped-def]
    class InterruptedRouter:
        policies = loop.router.policies

        def deadline_ms(self, request, now_ms):  # type: ignore[no-untyped-def]
            return now_ms + 1000

        def plan(self, request, now_ms, lane=None, deadline_ms=None):  # type: ignore[no-untyped-def]
            raise KeyboardInterrupt  # not an error of the record: the worker stops

    loop.handle([request_record(audit_request(request_id="r-1"), 10)])
    loop.handler.router = InterruptedRouter()
    with pytest.raises(KeyboardInterrupt):
        loop.handle([request_record(audit_request(request_id="r-2"), 11)])
    assert loop.next_offset == {0: 11}  # r-2 is consumed again after the restart
    assert loop.commit_offsets() == {0: 11}
