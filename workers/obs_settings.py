"""The ``[drift]`` and ``[tracing]`` settings sections (fields of :class:`rtaudit.workers.settings.Settings`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class DriftSettings(BaseModel):
    """Drift of each stage's traffic, per tenant (:mod:`rtaudit.engine.drift`, docs/observability.md).
    Tenants the settings do not name are pooled as ``other`` (bounded label cardinality).

    Attributes:
        enabled: the text worker embeds a sample of its items and every modality worker keeps the
            PSI of its category scores; exported as ``rtaudit_drift_*`` gauges and in the heartbeat.
        window: items per semantic-drift window (the score compares consecutive windows' mean
            embeddings; at 256 two samples of Davidson tweets scored at most 0.0053 in 20 seeded runs, a switch to Chinese posts 0.53).
        sample: share of text items embedded for the semantic score, ``(0, 1]``: the embedding is a
            second MiniLM pass (about 2 ms per item on one CPU core), run in a background thread.
        hold_windows: the semantic score reported (gauge, heartbeat) is the highest of this many last
            windows: consecutive windows differ only across a switch, so the score falls back once
            both windows hold the new traffic; holding it lets the alert's ``for:`` see it.
        reference_size: items a model version scores after it goes live that form the PSI's reference.
        psi_window: items in the PSI's current window.
    """

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    window: int = Field(default=256, ge=8, le=100_000)
    sample: float = Field(default=0.1, gt=0.0, le=1.0)
    hold_windows: int = Field(default=8, ge=1, le=10_000)
    reference_size: int = Field(default=1000, ge=10, le=1_000_000)
    psi_window: int = Field(default=1000, ge=10, le=1_000_000)


class TracingSettings(BaseModel):
    """OpenTelemetry traces through Kafka (``workers/tracing.py``, docs/observability.md).

    Attributes:
        exporter: ``none`` (default: no SDK object is created and nothing is read from the
            headers), ``console`` (spans as JSON on stdout), ``otlp`` (OTLP/HTTP protobuf to
            ``endpoint``) or ``file`` (one JSON line per span, the SDK's ``ReadableSpan.to_json``, in
            ``<file_dir>/<service>-<pid>.jsonl``: one file per process; for tests and benches).
        endpoint: OTLP/HTTP traces URL, e.g. ``http://otel-collector:4318/v1/traces``.
        file_dir: the folder the ``file`` exporter writes into.
        sampling_ratio: share of new traces sampled at the client, ``[0, 1]``; later hops follow
            the parent's decision (W3C ``sampled`` flag), so a trace is whole or absent.
        max_queue_size: spans the batch processor holds before it drops (per process).
        max_export_batch_size: spans per export call.
    """

    model_config = ConfigDict(extra="forbid")
    exporter: Literal["none", "console", "otlp", "file"] = "none"
    endpoint: str = "http://localhost:4318/v1/traces"
    file_dir: str = ".rtaudit/traces"
    sampling_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    max_queue_size: int = Field(default=65_536, ge=512, le=10_000_000)
    max_export_batch_size: int = Field(default=2048, ge=1, le=100_000)
