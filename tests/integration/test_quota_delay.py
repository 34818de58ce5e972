"""``over_quota = "delay"`` on the embedded broker: the router holds a flooding tenant's requests
and routes them on their lane topic at the tenant's quota rate, never faster, while another
tenant's requests go through at once; stopped with requests held, it commits no further than
the oldest held record, and the next router routes what was held."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.engine.policy import QuotaPolicy, TenantPolicy
from rtaudit.schemas.messages import AuditRequest, ModalityTask
from rtaudit.topics.catalog import REQUESTS, lane_topic
from rtaudit.workers.kafka import consumer_config, producer_config
from rtaudit.workers.router import GROUP_ID, router_loop
from rtaudit.workers.settings import Settings

pytestmark = pytest.mark.integration
RATE = 10.0  # req/s: one every 100 ms
SLOW = TenantPolicy(lane="hi", quota=QuotaPolicy(rate_per_s=RATE, burst=1, over_quota="delay", max_delay_ms=5000))


class Running:
    """The router's batch loop in a thread."""

    def __init__(self, settings: Settings) -> None:
        self.loop = router_loop(settings)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.loop.run()
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def stop(self) -> None:
        self.loop.stop()
        self.thread.join(30)
        assert not self.thread.is_alive() and self.error is None, self.error


class LaneReader:
    """Tasks on the text lane topics, with the time they were read."""

    def __init__(self, settings: Settings) -> None:
        self.consumer = Consumer(consumer_config(settings, f"itest-lanes-{uuid.uuid4().hex[:8]}"))
        self.consumer.assign([
            TopicPartition(lane_topic("text", lane), p, OFFSET_BEGINNING)
            for lane in ("hi", "lo") for p in range(settings.partitions)
        ])
        self.tasks: list[ModalityTask] = []

    def until(self, done, timeout_s: float) -> list[ModalityTask]:  # type: ignore[no-untyped-def]
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and not done(self.tasks):
            self.tasks += [ModalityTask.model_validate_json(m.value()) for m in self.consumer.consume(500, 0.05) if m.error() is None]
        return self.tasks


def send(producer: Producer, tenants: list[str], prefix: str) -> dict[str, TopicPartition]:
    """Produce one request per entry of ``tenants``; request id → its position. The producer is
    warm (connected): the records' timestamps, at which the router meters them, are their send times."""
    where: dict[str, TopicPartition] = {}

    def delivered(err, msg):  # type: ignore[no-untyped-def]
        assert err is None, err
        where[msg.key().decode()] = TopicPartition(REQUESTS, msg.partition(), msg.offset())

    for i, tenant in enumerate(tenants):
        req = AuditRequest(request_id=f"{prefix}-{tenant}-{i:02d}", tenant_id=tenant, created_at_ms=now_ms(),
                           text="an ordinary sentence", slo_ms=60_000)
        producer.produce(REQUESTS, req.model_dump_json().encode(), req.request_id.encode(), on_delivery=delivered)
    producer.flush(10)
    assert len(where) == len(tenants)
    return where


def test_held_requests_leave_at_the_quota_rate_and_survive_a_stop(broker_settings: Settings) -> None:
    settings = broker_settings.model_copy(update={"tenants": {"slow": SLOW}})
    reader, producer = LaneReader(settings), Producer(producer_config(settings))
    router = Running(settings)
    try:
        send(producer, ["quiet"], "warm")  # the router is in its group and routing
        reader.until(lambda ts: any(t.request_id.startswith("warm-") for t in ts), 60)
        assert any(t.request_id.startswith("warm-") for t in reader.tasks), "the router routed nothing in 60 s"

        n = 20
        sent_at = now_ms()
        send(producer, ["slow"] * n + ["quiet"] * 5, "a")
        produced_at = now_ms()
        tasks = reader.until(lambda ts: sum(t.request_id.startswith("a-slow") for t in ts) >= n, 30)
        slow = sorted(t.routed_at_ms for t in tasks if t.request_id.startswith("a-slow"))
        quiet = [t.routed_at_ms for t in tasks if t.request_id.startswith("a-quiet")]
        assert len(slow) == n and len(quiet) == 5
        assert {t.lane for t in tasks if t.request_id.startswith("a-slow")} == {"hi"}  # their lane, not lo
        # never faster than the quota: the k-th is routed no earlier than k intervals after sending
        for k, at in enumerate(slow):
            assert at >= sent_at + k * 1000 / RATE - 1, (k, at - sent_at)
        span = slow[-1] - slow[0]
        rate = (n - 1) / span * 1000
        # and not much slower: released on the loop's ticks (every 20 ms or sooner)
        assert slow[-1] <= produced_at + (n - 1) * 1000 / RATE + 500, slow[-1] - produced_at
        assert max(quiet) - produced_at < 1000  # the quiet tenant is not held behind them
        print(f"\n20 held requests at {RATE:g} req/s: routed over {span} ms = {rate:.2f} req/s; "
              f"gaps {min(b - a for a, b in zip(slow, slow[1:]))}-{max(b - a for a, b in zip(slow, slow[1:]))} ms; "
              f"quiet tenant routed {max(quiet) - produced_at} ms after sending")

        # stop with requests held: the commit stays at or before the oldest held record
        positions = send(producer, ["slow"] * 10, "b")
        reader.until(lambda ts: sum(t.request_id.startswith("b-slow") for t in ts) >= 3, 10)
        router.stop()
        reader.until(lambda ts: False, 2.0)  # what it routed up to its stop
        routed_b = {t.request_id for t in reader.tasks if t.request_id.startswith("b-slow")}
        held = {rid: tp for rid, tp in positions.items() if rid not in routed_b}
        assert held, "every request was routed before the stop"
        check = Consumer(consumer_config(settings, GROUP_ID))
        committed = {tp.partition: tp.offset for tp in check.committed(
            [TopicPartition(REQUESTS, p) for p in range(settings.partitions)], timeout=10)}
        check.close()
        for rid, tp in held.items():
            assert committed[tp.partition] <= tp.offset, (rid, tp.offset, committed)

        router = Running(settings)  # the next owner replays what was held
        tasks = reader.until(lambda ts: set(held) <= {t.request_id for t in ts}, 60)
        assert set(held) <= {t.request_id for t in tasks}
        print(f"stopped with {len(held)} of 10 held: the next router routed them all")
    finally:
        router.stop()
        reader.consumer.close()
