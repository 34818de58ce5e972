"""Every Prometheus metric of the fleet, declared once. Labels stay low-cardinality
(role, stage, model, topic, status, decision — never request ids)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

MESSAGES_CONSUMED = Counter(
    "rtaudit_messages_consumed_total", "Records consumed by a worker role, per source topic.", ["role", "topic"]
)
DLQ_RECORDS = Counter(
    "rtaudit_dlq_records_total", "Records routed to audit.dlq, per worker role and error code.", ["role", "error_code"]
)
BATCH_SIZE = Histogram(
    "rtaudit_batch_size", "Items per inference micro-batch.", ["stage"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)
INFERENCE_SECONDS = Histogram(
    "rtaudit_inference_seconds", "Wall time of one micro-batch through a model stage, seconds.", ["stage", "model"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
PARTIALS = Counter(
    "rtaudit_partials_total", "Partial scores produced, per stage and status (ok|error|expired).", ["stage", "status"]
)
VERDICTS = Counter(
    "rtaudit_verdicts_total", "Verdicts produced, per decision and completeness.", ["decision", "complete"]
)
END_TO_END_SECONDS = Histogram(
    "rtaudit_end_to_end_latency_seconds", "Request created_at to verdict produced, seconds.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
)
FUSION_PENDING = Gauge(
    "rtaudit_fusion_pending_requests", "Requests in fusion's table still waiting for a verdict (this process)."
)
CONSUMER_LAG = Gauge(
    "rtaudit_consumer_lag_messages", "High watermark minus committed offset, clamped at 0.", ["role", "topic", "partition"]
)


def serve(port: int) -> None:
    """Expose ``/metrics`` on ``port`` (0 = do nothing)."""
    if port:
        start_http_server(port)
