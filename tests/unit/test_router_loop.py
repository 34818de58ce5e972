"""The router's batch loop without a broker: outputs per record, an unexpected error goes to
the DLQ with a rejection verdict instead of crash-looping the router, and the commit position
moves only past records whose outputs were handed to the producer."""

from __future__ import annotations

import orjson
import pytest

from rtaudit.engine.delay import HeldQueue
from rtaudit.engine.quota import TenantQuotas
from rtaudit.topics.catalog import DLQ, SCORES, VERDICTS
from tests.unit.builders import FakeMessage
from rtaudit.workers.router import RouterLoop
from rtaudit.workers.settings import load_settings

from .builders import audit_request


@pytest.fixture
def loop(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path))
    settings = load_settings()
    r = RouterLoop.__new__(RouterLoop)  # no client handles: produce is captured below
    r.control = None  # no control topic: the policies given here stay
    from rtaudit.engine.routing import Router

    r.router = Router(policies=settings.policies, media_policy=settings.media.policy())
    r.next_offset = {}
    r.quotas = TenantQuotas()
    r.held = HeldQueue()
    r.outputs = []
    r.produce = lambda topic, key, value, partition=None: r.outputs.append((topic, key, orjson.loads(value)))  # type: ignore[method-assign]
    return r


def test_a_valid_request_gives_tasks_and_a_manifest(loop) -> None:  # type: ignore[no-untyped-def]
    req = audit_request(request_id="ok-1")
    loop.handle([FakeMessage(req.model_dump_json().encode(), b"ok-1", 7)])
    topics = [t for t, _, _ in loop.outputs]
    assert topics == ["audit.text.lo", SCORES] or topics == ["audit.text.hi", SCORES]
    assert loop.next_offset == {0: 8}


def test_an_unexpected_error_is_routed_to_the_dlq_with_a_rejection_verdict(loop) -> None:  # type: ignore[no-untyped-def]
    class BrokenRouter:
        policies = loop.router.policies  # read by the quota check

        def plan(self, request, now_ms):  # type: ignore[no-untyped-def]
            raise ZeroDivisionError("division by zero")

    loop.router = BrokenRouter()
    req = audit_request(request_id="bug-1")
    loop.handle([FakeMessage(req.model_dump_json().encode(), b"bug-1", 3)])
    by_topic = {t: v for t, _, v in loop.outputs}
    assert by_topic[DLQ]["error_code"] == "routing_failed"
    assert "ZeroDivisionError: division by zero" in by_topic[DLQ]["error"]
    assert SCORES not in by_topic  # the router answers a request it rejects itself: no fusion hop
    assert by_topic[VERDICTS]["request_id"] == "bug-1" and by_topic[VERDICTS]["decision"] == "review"
    assert by_topic[VERDICTS]["reasons"][0].startswith("rejected: routing_failed: unexpected error while routing")
    assert loop.next_offset == {0: 4}


def test_the_position_does_not_move_past_a_record_that_raised(loop) -> None:  # type: ignore[no-untyped-def]
    def exploding_produce(topic, key, value, partition=None):  # type: ignore[no-untyped-def]
        raise BufferError("producer queue is gone")

    loop.produce = exploding_produce
    req = audit_request(request_id="r-2")
    with pytest.raises(BufferError):
        loop.handle([FakeMessage(req.model_dump_json().encode(), b"r-2", 11)])
    assert loop.next_offset == {}  # the record is consumed again after the crash
