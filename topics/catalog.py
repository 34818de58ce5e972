"""Every topic rtaudit uses: name, partitions, key and configs.

Partition counts are fixed up front: the embedded broker cannot add partitions
later, and fusion writes a request's verdict to the ``audit.verdicts`` partition
with the number of its ``audit.scores`` partition (it reads them back from there
when it rebuilds a partition), so the two must have the same count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Partitions of every keyed data topic; also Faust's ``topic_partitions``.
DEFAULT_PARTITIONS = 4
#: Retention of data topics, ms (7 days).
RETENTION_MS = 7 * 24 * 3600 * 1000
#: Largest record, bytes: inline media up to 8 MiB plus JSON and base64 overhead.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

REQUESTS = "audit.requests"
SCORES = "audit.scores"
VERDICTS = "audit.verdicts"
CONTROL = "audit.control"
STATUS = "audit.status"
#: Retention of ``audit.status`` heartbeats, ms (1 hour: only the latest per worker matters).
STATUS_RETENTION_MS = 3600 * 1000
DLQ = "audit.dlq"
#: on-demand explanation requests (``rtaudit explain``), consumed by the explain role.
EXPLAIN_REQUESTS = "audit.explain.requests"
#: the explain role's evidence records (heatmaps), joined to verdicts by request id.
EXPLANATIONS = "audit.explanations"
MODALITIES = ("text", "image", "audio", "video")
LANES = ("hi", "lo")


def lane_topic(modality: str, lane: str) -> str:
    """``audit.<modality>.<lane>``, e.g. ``audit.image.hi``."""
    return f"audit.{modality}.{lane}"


@dataclass(frozen=True)
class TopicSpec:
    """One topic of the catalogue.

    Attributes:
        name: topic name.
        partitions: partition count (cannot change once created on the embedded broker).
        key: what the record key is, for the docs.
        value: what the record value is (a model in :mod:`rtaudit.schemas.messages`).
        configs: topic configs passed to CreateTopics.
    """

    name: str
    partitions: int
    key: str
    value: str
    configs: dict[str, str] = field(default_factory=dict)


def _data(name: str, value: str, partitions: int = DEFAULT_PARTITIONS, key: str = "request_id") -> TopicSpec:
    return TopicSpec(
        name, partitions, key, value,
        {"cleanup.policy": "delete", "retention.ms": str(RETENTION_MS), "max.message.bytes": str(MAX_MESSAGE_BYTES)},
    )


def catalog(partitions: int = DEFAULT_PARTITIONS) -> list[TopicSpec]:
    """The full topic list, in creation order."""
    specs = [_data(REQUESTS, "AuditRequest JSON", partitions)]
    specs += [
        _data(lane_topic(m, lane), "ModalityTask JSON", partitions)
        for m in MODALITIES
        for lane in LANES
    ]
    specs += [
        _data(SCORES, "Manifest | PartialScore JSON (field 'kind')", partitions),
        _data(VERDICTS, "Verdict JSON", partitions),
        _data(DLQ, "DLQRecord JSON (original bytes base64 + reason)", partitions),
        # the explain role joins these with the image lanes and audit.verdicts by request id: same partition count
        _data(EXPLAIN_REQUESTS, "ExplainRequest JSON (rtaudit.schemas.explain)", partitions),
        _data(EXPLANATIONS, "Explanation JSON (rtaudit.schemas.explain): heatmap PNG base64, peak box", partitions),
        TopicSpec(
            CONTROL, 1, "subject: model:<stage> | rollout:<stage> | policy:<tenant> | priority:<tenant> | breaker:<tenant>",
            "ControlMessage JSON (rtaudit.schemas.control); null value = tombstone",
            {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"},
        ),
        TopicSpec(
            STATUS, 1, "worker id", "Heartbeat JSON (rtaudit.schemas.control), every few seconds from every worker",
            {"cleanup.policy": "delete", "retention.ms": str(STATUS_RETENTION_MS)},
        ),
    ]
    return specs
