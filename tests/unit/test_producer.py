"""The recovering producer (workers/producer.py) on real librdkafka instances: one with nothing
listening (a stalled instance), one on librdkafka's in-process mock cluster (``test.mock.num.brokers``)."""

from __future__ import annotations

import logging
import socket

from rtaudit.workers.producer import RecoveringProducer


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_stalled_instance_is_recreated_and_every_unacknowledged_record_kept() -> None:
    reports: list[object] = []
    conf = {"bootstrap.servers": f"127.0.0.1:{unused_port()}", "enable.idempotence": True, "log_level": 0}
    producer = RecoveringProducer(conf, name="unit", stall_s=0.3)
    for i in range(5):
        producer.produce("t", b"v%d" % i, b"k%d" % i, on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(1.5) == 5  # nothing listens: nothing is acknowledged...
    assert producer.recreated >= 2  # ...so an instance is replaced after every 0.3 s without a report
    assert len(producer) == 5 and reports == []  # the dropped instances' purge reports never reach the caller


def test_records_are_delivered_once_each_and_an_idle_producer_is_not_stalled(caplog) -> None:  # type: ignore[no-untyped-def]
    delivered: list[bytes] = []
    conf = {"test.mock.num.brokers": 1, "enable.idempotence": True, "log_level": 0}
    producer = RecoveringProducer(conf, name="unit", stall_s=0.5)
    for i in range(50):
        producer.produce("t", b"v%d" % i, b"k%d" % i, on_delivery=lambda err, msg: delivered.append(msg.key()))
    assert producer.flush(10) == 0
    assert sorted(delivered) == sorted(b"k%d" % i for i in range(50))
    producer.poll(0.8)  # idle for longer than stall_s with nothing waiting
    producer.produce("t", b"late", b"late", on_delivery=lambda err, msg: delivered.append(msg.key()))
    assert producer.flush(10) == 0 and delivered[-1] == b"late"
    assert producer.recreated == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_reports_waiting_to_be_served_are_not_a_stall() -> None:
    """A caller that hands records over and calls the producer again only after ``stall_s`` (a client
    that submits a burst, then waits for verdicts) must not have every delivered record produced again:
    the reports were in librdkafka's queue, unserved. Found by ``rtaudit chaos -S slow``: 64 requests
    submitted at once, the next submit 26 s later resent all 64 ("no delivery report for 10 s")."""
    import time

    delivered: list[bytes] = []
    conf = {"test.mock.num.brokers": 1, "enable.idempotence": True, "log_level": 0}
    producer = RecoveringProducer(conf, name="unit", stall_s=0.5)
    producer.flush(10)  # the mock cluster is up
    for i in range(20):
        producer.produce("t", b"v%d" % i, b"k%d" % i, on_delivery=lambda err, msg: delivered.append(msg.key()))
    time.sleep(1.2)  # acknowledged meanwhile, but no poll serves the reports
    producer.produce("t", b"next", b"next", on_delivery=lambda err, msg: delivered.append(msg.key()))
    assert producer.flush(10) == 0
    assert producer.recreated == 0, "delivered records were taken for a stall and produced again"
    assert sorted(delivered) == sorted([b"k%d" % i for i in range(20)] + [b"next"])


class _FencedOnce:
    """A stand-in for ``confluent_kafka.Producer`` whose first instance gets every record refused with
    ``PRODUCER_FENCED`` (what tansu answered a long-running client after a restart handed its producer
    id to another producer), and whose later instances deliver."""

    instances = 0

    def __init__(self, config: dict) -> None:  # type: ignore[type-arg]
        type(self).instances += 1
        self.fenced = type(self).instances == 1
        self.queue: list[tuple[object, bytes]] = []

    def produce(self, topic, value, key, on_delivery=None, **kw):  # type: ignore[no-untyped-def]
        self.queue.append((on_delivery, key))

    def poll(self, timeout: float = 0.0) -> int:
        from confluent_kafka import KafkaError

        served, self.queue = self.queue, []
        for cb, key in served:
            msg = type("Msg", (), {"key": lambda self, k=key: k})()
            cb(KafkaError(KafkaError.PRODUCER_FENCED) if self.fenced else None, msg)
        return len(served)

    def flush(self, timeout: float = -1.0) -> int:
        self.poll()
        return 0

    def purge(self, *a: object) -> None:
        self.queue = []


def test_a_fenced_producer_id_recreates_the_instance_and_keeps_the_records() -> None:
    """``PRODUCER_FENCED`` (and the other producer-state errors) come as per-record, non-fatal delivery
    errors: before, each record was failed to the caller and the failure counted as progress, so the
    instance was never replaced (``rtaudit chaos -S broker``: 558 requests never acknowledged, 0
    instances recreated). Now the records are kept and produced again by a new instance."""
    _FencedOnce.instances = 0
    reports: list[tuple[object, bytes]] = []
    producer = RecoveringProducer({}, name="unit", stall_s=60, factory=_FencedOnce)
    for i in range(5):
        producer.produce("t", b"v", b"k%d" % i, on_delivery=lambda err, msg: reports.append((err, msg.key())))
    assert producer.flush(5) == 0
    assert producer.recreated == 1
    assert reports == [(None, b"k%d" % i) for i in range(5)]  # delivered once each, no failure reported

