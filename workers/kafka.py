"""confluent-kafka client configurations for the two profiles.

``local`` handles the embedded tansu broker's measured quirks (BROKER_NOTES):
3 s session / 1 s heartbeat (joins in ~2 s instead of ~23 s), a 10 ms fetch
wait (tansu answers a fetch only when the wait expires: ~7 ms per hop instead of
~250 ms). ``production`` keeps librdkafka's defaults except what the fleet needs
everywhere (large records, Java-compatible partitioning, idempotent producer).
"""

from __future__ import annotations

from typing import Any

from topics.catalog import MAX_MESSAGE_BYTES
from workers.settings import Settings


def producer_config(settings: Settings) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap,
        "message.max.bytes": MAX_MESSAGE_BYTES + 1024 * 1024,
        # murmur2 is what Faust/aiokafka and the Java client use: a key lands on the
        # same partition whoever produces it.
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "none",
        "log.connection.close": False,  # a broker stop is reported through delivery errors, not log noise
    }
    if settings.profile == "local":
        conf["linger.ms"] = 1
    return conf


def consumer_config(settings: Settings, group_id: str, **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap,
        "group.id": group_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": MAX_MESSAGE_BYTES * 2,
        "max.partition.fetch.bytes": MAX_MESSAGE_BYTES,
        "log.connection.close": False,
    }
    if settings.profile == "local":
        conf.update({"session.timeout.ms": 3000, "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 10})
    conf.update(extra)
    return conf
