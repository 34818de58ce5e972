"""BatchDelivery: one batch's outputs acknowledged → its future resolves, from any thread."""

from __future__ import annotations

import asyncio
import threading

import pytest
from confluent_kafka import KafkaError

from rtaudit.workers.runtime.emitter import BatchDelivery, DeliveryFailed


class Delivered:
    """What librdkafka passes to a delivery callback (topic, partition)."""

    def topic(self) -> str:
        return "audit.scores"

    def partition(self) -> int:
        return 3


def deliver_from_thread(delivery: BatchDelivery, errors: list[KafkaError | None]) -> threading.Thread:
    thread = threading.Thread(target=lambda: [delivery(err, Delivered()) for err in errors])
    thread.start()
    return thread


async def settle(delivery: BatchDelivery) -> None:
    await asyncio.wait_for(delivery.future, 5)


def test_the_future_resolves_only_after_the_last_output_of_a_sealed_batch() -> None:
    async def run() -> None:
        delivery = BatchDelivery(asyncio.get_running_loop())
        for _ in range(3):
            delivery.add()
        deliver_from_thread(delivery, [None, None]).join()
        await asyncio.sleep(0.01)
        assert not delivery.future.done()  # one output still unacknowledged
        delivery(None, Delivered())
        await asyncio.sleep(0.01)
        assert not delivery.future.done()  # all acknowledged, but more may still be added
        delivery.seal()
        await settle(delivery)

    asyncio.run(run())


def test_an_empty_batch_resolves_when_sealed() -> None:
    async def run() -> None:
        delivery = BatchDelivery(asyncio.get_running_loop())
        delivery.seal()
        await settle(delivery)

    asyncio.run(run())


def test_a_failed_output_fails_the_batch_naming_it() -> None:
    async def run() -> None:
        delivery = BatchDelivery(asyncio.get_running_loop())
        for _ in range(4):
            delivery.add()
        delivery.seal()
        deliver_from_thread(delivery, [None, KafkaError(KafkaError._MSG_TIMED_OUT), None, None]).join()
        with pytest.raises(DeliveryFailed, match=r"audit.scores\[3\]"):
            await settle(delivery)

    asyncio.run(run())


def test_many_threads_acknowledging_at_once_resolve_it_exactly_once() -> None:
    async def run() -> None:
        delivery = BatchDelivery(asyncio.get_running_loop())
        for _ in range(4000):
            delivery.add()
        delivery.seal()
        threads = [deliver_from_thread(delivery, [None] * 1000) for _ in range(4)]
        for t in threads:
            t.join()
        await settle(delivery)
        assert delivery.future.result() is None

    asyncio.run(run())
