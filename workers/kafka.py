"""confluent-kafka client configurations for the two profiles, and the cluster checks of the CLI.

``local`` handles the embedded tansu broker's measured quirks (docs/broker.md):
3 s session / 1 s heartbeat (joins in ~2 s instead of ~23 s), a 10 ms fetch
wait (tansu answers a fetch only when the wait expires: ~7 ms per hop instead of
~250 ms). ``production`` keeps librdkafka's defaults except what the fleet needs
everywhere (large records, Java-compatible partitioning, idempotent producer).

Every configuration carries the settings' TLS/SASL keys (:mod:`rtaudit.workers.security`) and
sends librdkafka's own log lines to the Python logger :data:`LIBRDKAFKA_LOG` (instead of
stderr: without a broker librdkafka writes a "Connection refused" line per retry).
An :class:`ErrorRecorder` as ``error_cb`` keeps the last client-level error, so a caller
can say in one line why the broker could not be reached.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from rtaudit.topics.catalog import MAX_MESSAGE_BYTES
from rtaudit.workers.security import librdkafka_config
from rtaudit.workers.settings import Settings

#: Where librdkafka's log lines go (its own levels mapped to Python's); the CLI silences it unless -v.
LIBRDKAFKA_LOG = logging.getLogger("rtaudit.workers.kafka.librdkafka")


class ErrorRecorder:
    """An ``error_cb`` that keeps the last client-level error (``KafkaError``) instead of printing it."""

    def __init__(self) -> None:
        self.last: KafkaError | None = None
        #: codes of every error seen (``KafkaError._ALL_BROKERS_DOWN`` comes once, among many ``_TRANSPORT``).
        self.codes: set[int] = set()

    def __call__(self, err: KafkaError) -> None:
        self.last = err
        self.codes.add(err.code())

    def reason(self) -> str:
        """The last error, short (``"connection refused"``, ``"SSL handshake failed: ..."``), or ``""``."""
        if self.last is None:
            return ""
        text = self.last.str()
        if "Connection refused" in text:
            return "connection refused"
        if self.last.code() == KafkaError._ALL_BROKERS_DOWN:
            return "all brokers down"
        return text


def client_config(settings: Settings, errors: ErrorRecorder | None = None) -> dict[str, Any]:
    """What every client shares: bootstrap servers, security keys, the logger and ``error_cb``."""
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap,
        "logger": LIBRDKAFKA_LOG,
        "log.connection.close": False,  # a broker stop is reported through delivery errors, not log noise
        **librdkafka_config(settings.security),
    }
    if errors is not None:
        conf["error_cb"] = errors
    return conf


def producer_config(settings: Settings, errors: ErrorRecorder | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        **client_config(settings, errors),
        "message.max.bytes": MAX_MESSAGE_BYTES + 1024 * 1024,
        # murmur2 is what Faust/aiokafka and the Java client use: a key lands on the
        # same partition whoever produces it.
        "partitioner": "murmur2_random",
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "none",
    }
    if settings.profile == "local":
        conf["linger.ms"] = 1
    return conf


def consumer_config(settings: Settings, group_id: str, errors: ErrorRecorder | None = None, **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {
        **client_config(settings, errors),
        "group.id": group_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": MAX_MESSAGE_BYTES * 2,
        "max.partition.fetch.bytes": MAX_MESSAGE_BYTES,
    }
    if settings.profile == "local":
        conf.update({"session.timeout.ms": 3000, "heartbeat.interval.ms": 1000, "fetch.wait.max.ms": 10})
    if settings.max_poll_interval_ms is not None:
        conf["max.poll.interval.ms"] = settings.max_poll_interval_ms
    conf.update(extra)
    return conf


_AUTH_ERRORS = (KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED)
_DOWN_ERRORS = frozenset({KafkaError._ALL_BROKERS_DOWN})


class ClusterError(RuntimeError):
    """The cluster cannot serve a command. ``str()`` is one line: what is wrong, then the
    command or setting that fixes it (``fix``)."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}: {fix}")
        self.problem, self.fix = problem, fix


class BrokerUnavailable(ClusterError):
    """No broker answered at the bootstrap address (or it refused our TLS/SASL credentials)."""


class TopicsMissing(ClusterError):
    """The broker answers but topics the command needs do not exist (``missing`` names them)."""

    def __init__(self, problem: str, fix: str, missing: tuple[str, ...]) -> None:
        super().__init__(problem, fix)
        self.missing = missing


def start_hint(settings: Settings) -> str:
    """How to get a broker: the embedded one locally, else the configuration to check."""
    if settings.bootstrap_servers is None:
        from rtaudit.tools.fleet.record import live_claims

        others = [r for r in live_claims() if r.bootstrap != settings.bootstrap]
        if others:
            port = others[0].bootstrap.rsplit(":", 1)[-1]
            return (f"{others[0].describe()} listens on {others[0].bootstrap}: point at it with "
                    f"RTAUDIT_EMBEDDED_PORT={port} (or embedded_port in the settings file), or start one here with `rtaudit up`")
        return "start one with `rtaudit up`"
    return "check bootstrap_servers (KAFKA_BOOTSTRAP_SERVERS), the network and the [security] settings"


def check_cluster(settings: Settings, topics: Iterable[str], timeout_s: float = 5.0) -> None:
    """Check that the broker answers and that ``topics`` exist (one metadata request,
    ``AdminClient.list_topics``).

    Raises:
        BrokerUnavailable: no metadata within ``timeout_s`` seconds, or authentication failed.
        TopicsMissing: a topic of ``topics`` does not exist.
    """
    errors = ErrorRecorder()
    admin = AdminClient(client_config(settings, errors))
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            md = admin.list_topics(timeout=max(0.1, min(0.5, deadline - time.monotonic())))
            break
        except KafkaException as exc:
            admin.poll(0)  # serve error_cb
            err = errors.last or exc.args[0]
            if err.code() in _AUTH_ERRORS:
                raise BrokerUnavailable(f"cannot authenticate to {settings.bootstrap} ({err.str()})",
                                        "check the [security] settings (RTAUDIT_SECURITY__*)") from None
            # every bootstrap broker refused or failed: no need to wait out the timeout
            if errors.codes & _DOWN_ERRORS or err.code() in _DOWN_ERRORS or time.monotonic() >= deadline:
                reason = errors.reason() or err.str()
                raise BrokerUnavailable(f"no broker at {settings.bootstrap} ({reason})", start_hint(settings)) from None
    missing = tuple(t for t in topics if t not in md.topics or md.topics[t].error is not None)
    if missing:
        raise TopicsMissing(
            f"topic{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing on {settings.bootstrap}",
            f"create {'them' if len(missing) > 1 else 'it'} with `rtaudit topics create` (or start the fleet with `rtaudit up`)",
            missing,
        )


def groups_without_members(settings: Settings, groups: Iterable[str], timeout_s: float = 5.0) -> list[str] | None:
    """The consumer groups of ``groups`` that have no live member (no worker of that role
    running), or ``None`` when the broker could not say (``DescribeGroups`` failed).

    A group counts as live when it lists members or its state is stable or rebalancing
    (tansu reports a live group as ``STABLE`` with an empty member list)."""
    from confluent_kafka import ConsumerGroupState

    live_states = {ConsumerGroupState.STABLE, ConsumerGroupState.PREPARING_REBALANCING,
                   ConsumerGroupState.COMPLETING_REBALANCING}
    groups = list(groups)
    admin = AdminClient(client_config(settings, ErrorRecorder()))
    try:
        futures = admin.describe_consumer_groups(groups, request_timeout=timeout_s)
        described = {g: futures[g].result(timeout=timeout_s) for g in groups}
    except (KafkaException, TimeoutError, ValueError):
        return None
    return [g for g, d in described.items() if not d.members and d.state not in live_states]
