"""Faust transport for the embedded tansu broker (URL scheme ``tansu://``).

tansu does not wake a waiting fetch when data arrives, so each hop costs about
half the consumer's fetch wait; Faust hard-codes aiokafka's
``fetch_max_wait_ms=1500`` (about 350 ms per hop). This transport lowers it to
:data:`LOCAL_FETCH_MAX_WAIT_MS` (measured: about 4 ms p50 per hop at 100 ms,
see docs/broker.md). On Apache Kafka the broker answers as soon as data arrives,
so the production profile keeps Faust's own ``kafka://`` transport.
"""

from __future__ import annotations

from typing import Any

from faust.transport.drivers import TRANSPORTS
from faust.transport.drivers import aiokafka as faust_aiokafka

LOCAL_FETCH_MAX_WAIT_MS = 100


class LocalConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = LOCAL_FETCH_MAX_WAIT_MS  # read when the fetcher starts
        return consumer


class LocalConsumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> LocalConsumerThread:
        return LocalConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(faust_aiokafka.Transport):
    Consumer = LocalConsumer
    driver_version = faust_aiokafka.Transport.driver_version


def register() -> None:
    """Make ``tansu://host:port`` broker URLs resolve to this transport."""
    TRANSPORTS.aliases["tansu"] = "rtaudit.workers.faust_local:Transport"
