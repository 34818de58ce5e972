"""Every Prometheus metric of the fleet, declared once. Labels stay low-cardinality
(role, stage, model, topic, status, decision — never request ids)."""

from __future__ import annotations

from collections.abc import Collection

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
EXPLANATIONS = Counter(
    "rtaudit_explanations_total", "Evidence records of the explain role, per trigger (verdict|on_demand) and status "
    "(ok|unavailable|error).", ["trigger", "status"],
)
EXPLAIN_SECONDS = Histogram(
    "rtaudit_explain_seconds", "Time to decode an image and compute its heatmap in the explain role, seconds.", ["method"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
EXPLAIN_HELD_BYTES = Gauge("rtaudit_explain_held_bytes", "Raw image-task bytes the explain role holds in memory.")
FETCH_GAPS = Counter(
    "rtaudit_fetch_gaps_total",
    "Offsets a fetch skipped, per role and topic: 'reread' (the consumer was sought back to them) or "
    "'accepted' (still missing after the re-reads: compaction or a transaction marker).",
    ["role", "topic", "action"],
)
INTAKE_BACKPRESSURE_PAUSES = Counter(
    "rtaudit_intake_backpressure_pauses_total",
    "Times a modality worker's intake paused every partition (polling on) because its batcher lane was full.",
    ["role"],
)
FUSION_DROPPED = Counter(
    "rtaudit_fusion_dropped_records_total",
    "Scores records fusion dropped without effect: 'decided' (their request has its verdict: a duplicate "
    "or a replay) or 'late' (a partial past deadline + grace + retention of a request fusion no longer knows).",
    ["reason"],
)
FUSION_PENDING = Gauge(
    "rtaudit_fusion_pending_requests", "Requests in fusion's table still waiting for a verdict (this process)."
)
CONSUMER_LAG = Gauge(
    "rtaudit_consumer_lag_messages",
    "High watermark seen while fetching minus the worker's position (next offset to process), clamped at 0.",
    ["role", "topic", "partition"],
)
BATCH_WINDOW_SECONDS = Gauge(
    "rtaudit_batch_window_seconds", "Micro-batch window in force (grows with consumer lag and model occupancy), seconds.", ["stage"]
)
BATCH_SIZE_LIMIT = Gauge(
    "rtaudit_batch_size_limit", "Micro-batch size limit in force (grows with consumer lag and model occupancy), items.", ["stage"]
)
MODEL_OCCUPANCY = Gauge(
    "rtaudit_model_occupancy_ratio",
    "Share of the last second the model spent inferring (0..1); above the profile's busy_low the batch "
    "window and size limit grow.", ["stage"],
)
BATCH_LAST_SIZE = Gauge("rtaudit_batch_last_size", "Live items in the last micro-batch formed.", ["stage"])
BATCHER_LAG = Gauge(
    "rtaudit_batcher_lag_messages", "Lag the batcher adapts to: consumer lag plus items it holds, messages.", ["stage"]
)
BATCHER_QUEUED = Gauge("rtaudit_batcher_queued_items", "Items held by the batcher, per lane.", ["stage", "lane"])
LO_LANE_PAUSED = Gauge(
    "rtaudit_lo_lane_paused", "1 while the low lane's partitions are paused for the high lane, else 0.", ["stage"]
)
BATCH_CLOSES = Counter(
    "rtaudit_batch_closes_total", "Micro-batches formed, per reason (size|window|deadline|expired).", ["stage", "reason"]
)
OVER_QUOTA = Counter(
    "rtaudit_over_quota_requests_total",
    "Requests beyond their tenant's quota at the router, per tenant and action (lower_lane|throttle). "
    "Tenants outside the settings count as 'other'.",
    ["tenant", "action"],
)
SLO_MISSES = Counter(
    "rtaudit_slo_misses_total",
    "Deadline misses: a part expired before inference (kind=expired, modality workers) or a verdict "
    "was decided after its deadline (kind=late_verdict, fusion). Tenants outside the settings count as 'other'.",
    ["role", "tenant", "lane", "kind"],
)


RESTARTS = Counter(
    "rtaudit_restarts_total",
    "Processes restarted by the fleet supervisor (rtaudit up), per role (broker: the embedded broker).", ["role"]
)

CONTROL_REJECTED = Counter(
    "rtaudit_control_rejected_total",
    "audit.control records this process rejected (malformed, stale, cas_conflict), per role and code.", ["role", "code"]
)
CONTROL_APPLIED_OFFSET = Gauge(
    "rtaudit_control_applied_offset", "Next audit.control offset this process will apply.", ["role"]
)
MODEL_SWAPS = Counter(
    "rtaudit_model_swaps_total", "Model versions made ready (loaded, verified, warmed, golden set passed), per stage.",
    ["stage", "outcome"]
)
CANARY_ACTIONS = Counter(
    "rtaudit_canary_actions_total", "Automatic canary promotions and rollbacks published by this process.",
    ["stage", "action"]
)


def tenant_label(tenant_id: str, known: Collection[str]) -> str:
    """``tenant_id`` when the settings name it (a bounded set), else ``other``: keeps label cardinality low."""
    return tenant_id if tenant_id in known else "other"


#: exit status of a worker whose metrics port is taken (``EX_CONFIG`` of sysexits.h): `rtaudit up`'s
#: supervisor restarts such a worker on another free port instead of on the same one.
EXIT_METRICS_PORT_TAKEN = 78


def serve(port: int, host: str = "127.0.0.1") -> None:
    """Expose ``/metrics`` on ``host:port`` (port 0 = do nothing). Loopback by default:
    set ``metrics_host`` (e.g. ``0.0.0.0`` in a container) for a scraper elsewhere.

    Raises:
        OSError: the port cannot be bound (taken, or a privileged port); :func:`port_taken_line` says so.
    """
    if port:
        start_http_server(port, addr=host)


def port_taken_line(who: str, host: str, port: int, exc: OSError) -> str:
    """The one line that says ``who`` (``the supervisor``, ``router worker``) cannot serve its metrics on
    ``host:port`` and which setting fixes it."""
    return (f"{who} cannot serve its metrics on {host}:{port} ({exc.strerror or exc}): set metrics_port "
            "(RTAUDIT_METRICS_PORT) to a free port, or 0 for no metrics")


# -- over_quota = "delay" at the router (engine/delay.py) ------------------------------------
QUOTA_DELAYED = Counter(
    "rtaudit_quota_delayed_requests_total",
    "Requests over quota of tenants whose over_quota is 'delay', per tenant and outcome: routed (held, then "
    "routed when its tenant's bucket could pay), throttled_max_delay (its wait would exceed max_delay_ms), "
    "throttled_deadline (its wait would end after its deadline), throttled_max_held (the router held its "
    "maximum), dropped (held on a partition revoked from this router: its next owner replays it). "
    "Tenants outside the settings count as 'other'.",
    ["tenant", "outcome"],
)
QUOTA_DELAY_SECONDS = Histogram(
    "rtaudit_quota_delay_seconds",
    "Time a request over quota was held by the router (over_quota = 'delay'), from the router reading it to "
    "routing it, seconds. Tenants outside the settings count as 'other'.",
    ["tenant"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30),
)
QUOTA_HELD = Gauge(
    "rtaudit_quota_held_requests", "Requests this router holds for their tenant's quota (over_quota = 'delay')."
)
DRIFT_SEMANTIC = Gauge(
    "rtaudit_drift_semantic",
    "Semantic drift of a stage's traffic per tenant: 1 - cosine similarity of consecutive windows' mean "
    "embeddings (engine/drift.py); alert above 0.3.", ["stage", "tenant"],
)
DRIFT_PSI = Gauge(
    "rtaudit_drift_psi",
    "Population stability index of a category score against the reference window of the model version in force, "
    "per stage, tenant and category (engine/drift.py); > 0.25 is a major shift.", ["stage", "tenant", "category"],
)
DRIFT_WINDOWS = Counter(
    "rtaudit_drift_windows_total", "Semantic-drift windows closed, per stage and tenant.", ["stage", "tenant"],
)
DRIFT_DROPPED = Counter(
    "rtaudit_drift_dropped_items_total",
    "Sampled items the drift monitor dropped because its embedding queue was full, per stage.", ["stage"],
)
TRACE_SPANS_DROPPED = Counter(
    "rtaudit_trace_spans_dropped_total",
    "Spans dropped because the process's span queue ([tracing] max_queue_size) was full (workers/tracing.py).",
)
