"""A long-running client across a restart of the embedded broker (issue 34, defect 5).

The broker is memory-only: a restart loses every topic, so the test recreates them, as the
fleet's supervisor does. Before :class:`rtaudit.workers.producer.RecoveringProducer`, the
client's idempotent producer delivered nothing after the restart (librdkafka bumped its epoch
in a loop, each refused with ``UNKNOWN_PRODUCER_ID``, until ``message.timeout.ms``).
"""

from __future__ import annotations

import signal
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.messages import AuditRequest
from rtaudit.topics.admin import ensure_topics
from rtaudit.topics.catalog import REQUESTS, catalog
from rtaudit.tools.fleet.broker import EmbeddedBroker
from rtaudit.workers.client import AuditClient
from rtaudit.workers.kafka import client_config, consumer_config
from rtaudit.workers.settings import Settings

from .conftest import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
#: the target of issue 34: a long-running client delivers within this long of the broker's return, s.
DELIVER_WITHIN_S = 30.0


def requests(prefix: str, n: int) -> list[AuditRequest]:
    return [AuditRequest(request_id=f"{prefix}-{i}-{uuid.uuid4().hex[:8]}", tenant_id="restart", created_at_ms=now_ms(),
                         text="hello") for i in range(n)]


def request_ids_on_topic(settings: Settings) -> set[str]:
    c = Consumer(consumer_config(settings, f"restart-read-{uuid.uuid4().hex[:8]}"))
    c.assign([TopicPartition(REQUESTS, p, OFFSET_BEGINNING) for p in range(settings.partitions)])
    out: set[str] = set()
    idle_until = time.monotonic() + 3.0
    while time.monotonic() < idle_until:
        for m in c.consume(500, 0.2):
            if m.error() is None and m.key():
                out.add(m.key().decode())
                idle_until = time.monotonic() + 1.0
    c.close()
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_long_running_client_delivers_again_after_the_broker_restarts(tmp_path, sig, caplog) -> None:  # type: ignore[no-untyped-def]
    settings = Settings(embedded_port=free_port(), state_dir=tmp_path / "state")
    broker = EmbeddedBroker(settings.embedded_port).start()
    try:
        ensure_topics(client_config(settings), catalog(settings.partitions))
        client = AuditClient(settings)
        before = requests("before", 20)
        for r in before:
            client.submit(r)
        client.flush()
        assert request_ids_on_topic(settings) >= {r.request_id for r in before}

        assert broker.process is not None
        broker.process.send_signal(sig)  # SIGTERM: tansu waits up to 5 s for connected clients
        broker.process.wait(timeout=15)
        broker.stop()
        during = requests("during", 10)
        for r in during:  # the client does not know: it keeps submitting
            client.submit(r)
        time.sleep(2.0)
        broker = EmbeddedBroker(settings.embedded_port).start()
        back = time.monotonic()
        ensure_topics(client_config(settings), catalog(settings.partitions))  # memory-only: recreated
        after = requests("after", 10)
        for r in after:
            client.submit(r)
        client.flush(timeout_s=DELIVER_WITHIN_S + 30)
        took = time.monotonic() - back
        on_topic = request_ids_on_topic(settings)
        missing = {r.request_id for r in during + after} - on_topic
        assert not missing, f"{len(missing)} of {len(during + after)} requests not on the restarted broker"
        print(f"{sig.name}: every request delivered {took:.1f} s after the broker came back; "
              f"{client.producer_recreations} producer instance(s) recreated")
        assert took <= DELIVER_WITHIN_S
        assert any("delivering again" in rec.getMessage() for rec in caplog.records), "the outage was not reported"
    finally:
        broker.stop()
