"""Create or verify the catalogue on a broker (idempotent), with confluent-kafka's AdminClient."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from rtaudit.topics.catalog import TopicSpec, catalog

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicCheck:
    name: str
    state: str  # "created" | "exists" | "missing" | "wrong_partitions"
    partitions: int | None
    expected_partitions: int


class TopicsMismatch(RuntimeError):
    """A topic exists with another partition count than the catalogue's (cannot be fixed online)."""


def _existing(admin: AdminClient, timeout_s: float) -> dict[str, int]:
    md = admin.list_topics(timeout=timeout_s)
    return {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}


def ensure_topics(
    bootstrap_servers: str | Mapping[str, Any], specs: list[TopicSpec] | None = None, *, create: bool = True, timeout_s: float = 15.0
) -> list[TopicCheck]:
    """Create missing topics (when ``create``) and check partition counts of all.

    ``bootstrap_servers`` is the bootstrap address, or a whole client configuration
    (``rtaudit.workers.kafka.client_config``: with the cluster's TLS/SASL keys).
    Returns one :class:`TopicCheck` per spec. Raises :class:`TopicsMismatch`
    when an existing topic has another partition count, and
    ``confluent_kafka.KafkaException`` when the broker is unreachable.
    """
    specs = specs if specs is not None else catalog()
    conf: dict[str, str | int | float | bool] = (
        {"bootstrap.servers": bootstrap_servers} if isinstance(bootstrap_servers, str) else dict(bootstrap_servers))
    admin = AdminClient(conf)
    existing = _existing(admin, timeout_s)
    to_create = [s for s in specs if s.name not in existing]
    created: set[str] = set()
    if create and to_create:
        futures = admin.create_topics(
            [NewTopic(s.name, num_partitions=s.partitions, replication_factor=-1, config=s.configs) for s in to_create],
            operation_timeout=timeout_s,
        )
        for name, fut in futures.items():
            try:
                fut.result(timeout=timeout_s)
                created.add(name)
                log.info("created topic %s", name)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
        existing = _existing(admin, timeout_s)
    checks = []
    for s in specs:
        have = existing.get(s.name)
        if s.name in created:
            state = "created"
        elif have is None:
            state = "missing"
        elif have != s.partitions:
            state = "wrong_partitions"
        else:
            state = "exists"
        checks.append(TopicCheck(s.name, state, have, s.partitions))
    bad = [c for c in checks if c.state == "wrong_partitions"]
    if bad:
        raise TopicsMismatch(
            "; ".join(f"{c.name} has {c.partitions} partitions, catalogue says {c.expected_partitions}" for c in bad)
        )
    return checks
