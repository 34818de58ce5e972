"""The control topic on a real embedded broker: compare-and-swap publishing, every reader
converging on the same state, rejected records in the DLQ, heartbeats on ``audit.status``."""

from __future__ import annotations

import time

import orjson
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from rtaudit.engine.policy import TenantPolicy
from rtaudit.schemas.control import BundleRef, Heartbeat, ModelPayload, PolicyPayload, PriorityPayload
from rtaudit.schemas.messages import DLQRecord
from rtaudit.topics.catalog import CONTROL, DLQ, STATUS
from rtaudit.workers.control import ControlConflict, ControlPlane, publish, read_state
from rtaudit.workers.kafka import consumer_config, producer_config
from rtaudit.workers.settings import Settings

pytestmark = pytest.mark.integration


def ref(version: str) -> BundleRef:
    return BundleRef(stage="text", version=version, sha256="cd" * 32, uri=f"file:///models/text/{version}")


def read_all(settings: Settings, topic: str, timeout_s: float = 5.0) -> list:  # type: ignore[type-arg]
    consumer = Consumer(consumer_config(settings, f"read-{topic}-{time.monotonic_ns()}"))
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(settings.partitions if topic == DLQ else 1)])
    out, end = [], time.monotonic() + timeout_s
    while time.monotonic() < end:
        out += [m for m in consumer.consume(100, 0.2) if m.error() is None]
    consumer.close()
    return out


def test_publishing_is_compare_and_swap_and_every_reader_converges(broker_settings: Settings) -> None:
    settings = broker_settings
    plane = ControlPlane(settings, "router", dead_letters=True, heartbeat_s=0.5).start()
    seen: list[tuple[float, list[str]]] = []
    plane.listen(lambda state, applied: seen.append((time.monotonic(), [a.subject for a in applied])))
    try:
        assert plane.wait_caught_up(15)
        first = publish(settings, "model:text", ModelPayload(bundle=ref("v1")), author="itest")
        assert (first.version, first.expects) == (1, 0)
        published_at = time.monotonic()
        second = publish(settings, "model:text", ModelPayload(bundle=ref("v2")), author="itest", reason="new head")
        assert (second.version, second.expects) == (2, 1)
        with pytest.raises(ControlConflict) as conflict:  # the author saw version 1: someone else moved it on
            publish(settings, "model:text", ModelPayload(bundle=ref("v3")), author="itest", expects=1)
        assert conflict.value.code == "cas_conflict" and conflict.value.in_force == 2
        assert "version 2 is in force" in str(conflict.value)

        # a record no CLI would write: malformed, and a stale replay, produced raw
        producer = Producer(producer_config(settings))
        producer.produce(CONTROL, key=b"model:text", value=b'{"subject": "model:text", "version": "x"}', partition=0)
        producer.produce(CONTROL, key=b"model:text", value=orjson.dumps(first.model_dump(mode="json")), partition=0)
        producer.flush(10)

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and plane.state.rejected_total < 2:
            time.sleep(0.1)
        assert plane.state.rejected_total == 2 and plane.state.model("text").bundle.version == "v2"  # type: ignore[union-attr]
        assert any(t - published_at < 1.0 and "model:text" in s for t, s in seen), seen  # applied within 1 s

        dlq = [DLQRecord.model_validate_json(m.value()) for m in read_all(settings, DLQ)]
        codes = sorted(r.error.split(":")[0] for r in dlq if r.error_code == "control_rejected")
        assert codes == ["malformed", "stale"], dlq

        beats = [Heartbeat.model_validate_json(m.value()) for m in read_all(settings, STATUS, 2.0)]
        mine = [b for b in beats if b.worker_id == plane.worker_id]
        assert mine and mine[-1].versions["model:text"] == 2 and mine[-1].rejected == 2

        # a process started now (a restart) reads the whole topic and converges on the same state
        late = read_state(settings)
        assert late.version("model:text") == 2 and late.offset == plane.state.offset
    finally:
        plane.stop()


def test_policy_and_priority_reach_a_running_reader_within_a_second(broker_settings: Settings) -> None:
    from rtaudit.engine.policy import PolicyBook

    settings = broker_settings
    plane = ControlPlane(settings, "fusion").start()
    base = PolicyBook()
    try:
        assert plane.wait_caught_up(15)
        assert plane.policy_book(base).for_tenant("acme").lane == "lo"
        publish(settings, "priority:acme", PriorityPayload(lane="hi", slo_ms=500), author="itest")
        t0 = time.monotonic()
        while plane.policy_book(base).for_tenant("acme").lane != "hi":
            assert time.monotonic() - t0 < 1.0, "priority override not applied within 1 s"
            time.sleep(0.02)
        publish(settings, "policy:acme", PolicyPayload(policy=TenantPolicy(on_incomplete="block")), author="itest")
        t0 = time.monotonic()
        while plane.policy_book(base).for_tenant("acme").on_incomplete != "block":
            assert time.monotonic() - t0 < 1.0, "policy not applied within 1 s"
            time.sleep(0.02)
        acme = plane.policy_book(base).for_tenant("acme")
        assert (acme.lane, acme.slo_ms) == ("hi", 500)  # the override still applies over the new policy
    finally:
        plane.stop()
