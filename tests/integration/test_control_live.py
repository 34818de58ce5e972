"""Live tenant priority and policy through a running fleet (router, fusion, a null-model text
worker) on the embedded broker: a ``priority:`` record moves the tenant's new requests to the
high lane, and a ``policy:`` record changes their decisions, within 1 s and without a restart."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.engine.policy import TenantPolicy, Threshold
from rtaudit.schemas.control import PolicyPayload, PriorityPayload
from rtaudit.schemas.messages import AuditRequest, ModalityTask
from rtaudit.topics.catalog import lane_topic
from rtaudit.workers.client import AuditClient, verdict_reader
from rtaudit.workers.control import publish
from rtaudit.workers.kafka import consumer_config
from rtaudit.workers.settings import Settings

from .conftest import launch_null_text_fleet

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # a fleet starts in the first test
TENANT = "live"
#: how long after a control record is published the fleet must apply it, s.
APPLY_WITHIN_S = 1.0


@pytest.fixture(scope="module")
def text_fleet(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("live")
    fleet, settings = launch_null_text_fleet(root)
    client, reader = AuditClient(settings), verdict_reader(settings)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # text-only probes: this fleet has no image stages
            probe = request("probe")
            client.submit(probe)
            client.flush()
            if probe.request_id in reader.wait_for({probe.request_id}, timeout_s=10):
                break
        else:
            pytest.fail(f"no verdict from the text fleet within 180 s; logs in {root / 'logs'}")
        yield settings, client, reader
    finally:
        reader.close()
        fleet.stop()


def request(prefix: str) -> AuditRequest:
    return AuditRequest(request_id=f"{prefix}-{uuid.uuid4().hex[:12]}", tenant_id=TENANT, created_at_ms=now_ms(),
                        text="a perfectly ordinary sentence", slo_ms=60_000)


def stream_requests(client: AuditClient, prefix: str, seconds: float, every_s: float = 0.05) -> list[AuditRequest]:
    sent, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        sent.append(request(prefix))
        client.submit(sent[-1])
        client.flush()
        time.sleep(every_s)
    return sent


def lanes_of(settings: Settings, ids: set[str], timeout_s: float = 20.0) -> dict[str, str]:
    """request id → lane its text task was routed on (read from both lane topics)."""
    consumer = Consumer(consumer_config(settings, f"lanes-{uuid.uuid4().hex[:8]}"))
    consumer.assign([TopicPartition(lane_topic("text", lane), p, OFFSET_BEGINNING)
                     for lane in ("hi", "lo") for p in range(settings.partitions)])
    out: dict[str, str] = {}
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and len(out) < len(ids):
        for m in consumer.consume(500, 0.2):
            if m.error() is None:
                task = ModalityTask.model_validate_json(m.value())
                if task.request_id in ids:
                    out[task.request_id] = task.lane
    consumer.close()
    return out


def publish_while_streaming(client: AuditClient, prefix: str, do_publish) -> tuple[list[AuditRequest], int, object]:  # type: ignore[no-untyped-def]
    """Stream requests for 3 s from a thread; publish 0.5 s in. Returns (sent, the message's
    ``at_ms`` (set just before it is produced), message)."""
    sent: list[AuditRequest] = []
    streamer = threading.Thread(target=lambda: sent.extend(stream_requests(client, prefix, 3.0)))
    streamer.start()
    time.sleep(0.5)
    msg = do_publish()
    streamer.join()
    return sent, msg.at_ms, msg


def switch_time(sent: list[AuditRequest], changed: dict[str, bool], published_at_ms: int) -> float:
    """Seconds from the publish to the creation of the last request that did *not* see the change
    (every request after it saw it); asserts the change is monotonic."""
    flags = [changed[r.request_id] for r in sent]
    assert flags[-1], "the change never reached the fleet"
    last_old = max((i for i, f in enumerate(flags) if not f), default=None)
    assert all(flags[(last_old or -1) + 1:]), flags
    if last_old is None:
        return 0.0
    return max(0.0, (sent[last_old].created_at_ms - published_at_ms) / 1000.0)


def test_a_priority_override_moves_new_requests_to_the_high_lane_within_a_second(text_fleet) -> None:  # type: ignore[no-untyped-def]
    settings, client, _ = text_fleet
    before = stream_requests(client, "before", 0.5)
    assert set(lanes_of(settings, {r.request_id for r in before}).values()) == {"lo"}
    sent, published_at, msg = publish_while_streaming(
        client, "prio", lambda: publish(settings, f"priority:{TENANT}", PriorityPayload(lane="hi"), author="itest"))
    lanes = lanes_of(settings, {r.request_id for r in sent})
    assert len(lanes) == len(sent)
    took = switch_time(sent, {i: lane == "hi" for i, lane in lanes.items()}, published_at)
    print(f"priority:{TENANT} v{msg.version} published: new requests on the hi lane after {took:.2f} s")
    assert took <= APPLY_WITHIN_S


def test_a_policy_change_alters_the_next_decisions_without_a_restart(text_fleet) -> None:  # type: ignore[no-untyped-def]
    settings, client, reader = text_fleet
    before = stream_requests(client, "allow", 0.3)
    got = reader.wait_for({r.request_id for r in before}, timeout_s=30)
    assert {v.decision for v, _ in got.values()} == {"allow"}
    strict = TenantPolicy(thresholds={"offensive": Threshold(review=0.0, block=0.0)})  # the null model scores 0
    sent, published_at, msg = publish_while_streaming(
        client, "policy", lambda: publish(settings, f"policy:{TENANT}", PolicyPayload(policy=strict), author="itest"))
    got = reader.wait_for({r.request_id for r in sent}, timeout_s=60)
    assert len(got) == len(sent)
    blocked = {i: v.decision == "block" for i, (v, _) in got.items()}
    took = switch_time(sent, blocked, published_at)
    versions = {v.policy_version for i, (v, _) in got.items() if blocked[i]}
    print(f"policy:{TENANT} v{msg.version} published: decisions changed after {took:.2f} s (policy {versions})")
    assert took <= APPLY_WITHIN_S
    assert all(v.startswith(f"control-{msg.version}") for v in versions), versions
