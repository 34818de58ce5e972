"""Faust app factory shared by every role, with the local (tansu) and production client profiles.

Commit order (Faust's consumer, unchanged): an event is acked only after the agent
has moved past it, which our agents do only after producing its outputs; at each
commit interval Faust (1) publishes attached messages, (2) flushes the producer,
(3) commits the acked offsets. So offsets never run ahead of produced output
(at-least-once); fusion deduplicates.
"""

from __future__ import annotations

import base64
import logging
import os
from typing import Any, TypeVar, overload

import faust

from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.messages import MAX_DLQ_ORIGINAL_BYTES, DLQRecord
from rtaudit.topics.catalog import MAX_MESSAGE_BYTES
from rtaudit.workers import faust_local, metrics, tracing
from rtaudit.workers.security import faust_credentials
from rtaudit.workers.settings import Settings, load_settings

log = logging.getLogger(__name__)


def faust_options(settings: Settings, role: str) -> dict[str, Any]:
    """Faust settings for ``role`` under the settings' client profile, with the cluster's
    TLS/SASL credentials (``broker_credentials``) when ``settings.security`` sets any."""
    local = settings.profile == "local"
    opts: dict[str, Any] = dict(
        broker=f"{'tansu' if local else 'kafka'}://{settings.bootstrap}",
        value_serializer="raw",
        key_serializer="raw",
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor or (1 if local else 3),
        web_enabled=False,
        datadir=str(settings.state_dir / role),
        store="memory://",
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        producer_max_request_size=MAX_MESSAGE_BYTES,
        consumer_max_fetch_size=MAX_MESSAGE_BYTES,
        producer_acks=-1,
        stream_wait_empty=False,
    )
    credentials = faust_credentials(settings.security)  # TLS / SASL of a real cluster (workers/security.py)
    if credentials is not None:
        opts["broker_credentials"] = credentials
    if local:
        # docs/broker.md: tansu holds each JoinGroup ~ceil(session/2) s; 2 s / 0.5 s joins in ~2.4 s.
        opts.update(broker_session_timeout=2.0, broker_heartbeat_interval=0.5, broker_commit_interval=0.5)
        # A worker emits a micro-batch of partials at once; with Faust's 16 KB batches and no
        # linger, aiokafka waits for one produce round trip per ~40 partials per partition
        # (one request in flight per partition), and after an overload the worker fell
        # behind on its own output. 1 MB batches with a 5 ms linger: steps at 300/s right
        # after a 900/s overload kept up 4/4 times (P99 218-402 ms) vs 2/4 (P99 407-1501 ms).
        opts.update(producer_max_batch_size=1024 * 1024, producer_linger=0.005)
    return opts


AppT = TypeVar("AppT", bound=faust.App)


@overload
def make_app(role: str, settings: Settings | None = None, app_id: str | None = None) -> tuple[faust.App, Settings]: ...
@overload
def make_app(role: str, settings: Settings | None = None, app_id: str | None = None, *,
             app_class: type[AppT]) -> tuple[AppT, Settings]: ...
def make_app(role: str, settings: Settings | None = None, app_id: str | None = None, *,
             app_class: type[faust.App] = faust.App) -> tuple[faust.App, Settings]:
    """A Faust app (an ``app_class``) whose id (consumer group) is ``app_id`` (default
    ``rtaudit-<role>``), and the settings it was built from. A role that consumes with its own
    confluent-kafka group (:mod:`rtaudit.workers.runtime`) gives Faust another id: Faust always
    joins its app's group."""
    settings = settings or load_settings()
    tracing.configure(settings.tracing, f"rtaudit-{role}")
    faust_local.register()
    (settings.state_dir / role).mkdir(parents=True, exist_ok=True)
    app = app_class(app_id or f"rtaudit-{role}", **faust_options(settings, role))

    @app.task
    async def _start_metrics() -> None:
        serve_metrics_or_exit(role, settings)

    return app, settings


def serve_metrics_or_exit(role: str, settings: Settings) -> None:
    """Serve ``/metrics`` on ``settings.metrics_port``; when the port cannot be bound, log one CRITICAL line
    (:func:`rtaudit.workers.metrics.port_taken_line`) and end the process at once with
    :data:`~rtaudit.workers.metrics.EXIT_METRICS_PORT_TAKEN` (no traceback). Records read so far are read
    again by the next owner: offsets are committed only after outputs were acknowledged."""
    try:
        metrics.serve(settings.metrics_port, settings.metrics_host)
    except OSError as exc:
        log.critical("%s", metrics.port_taken_line(f"the {role} worker", settings.metrics_host, settings.metrics_port, exc))
        logging.shutdown()  # flush the line before the hard exit
        os._exit(metrics.EXIT_METRICS_PORT_TAKEN)


def dead_letter_record(
    raw: bytes, topic: str, partition: int, offset: int, key: bytes | None, role: str, error: AuditError, now: int
) -> DLQRecord:
    """The DLQ record for one bad input record. Originals over :data:`MAX_DLQ_ORIGINAL_BYTES`
    are cut (a DLQ record must stay producible whatever arrived); messages are capped at 2000 chars."""
    return DLQRecord(
        original_b64=base64.b64encode(raw[:MAX_DLQ_ORIGINAL_BYTES]).decode("ascii"),
        original_size_bytes=len(raw), original_truncated=len(raw) > MAX_DLQ_ORIGINAL_BYTES,
        source_topic=topic, source_partition=partition, source_offset=offset,
        source_key=key.decode("utf-8", "replace")[:256] if isinstance(key, bytes) else None,
        role=role, error_code=str(error.code), error=error.message[:2000],
        request_id=error.request_id, failed_at_ms=now,
    )
