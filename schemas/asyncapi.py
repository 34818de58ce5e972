"""The AsyncAPI 3.0 document of every topic, generated from the same pydantic models as ``schemas/json/``.

``python -m rtaudit.schemas.asyncapi`` rewrites ``schemas/asyncapi.json``; ``tests/unit/test_asyncapi.py``
fails when the file, the models, the JSON Schema files or the topic catalogue drift apart.

What it holds (https://www.asyncapi.com/docs/reference/specification/v3.0.0):

* one **channel** per topic of :func:`rtaudit.topics.catalog.catalog` (address = topic name), with its
  Kafka channel binding (partitions, ``cleanup.policy``, ``retention.ms``, ``max.message.bytes``;
  Kafka bindings 0.5.0) and the messages it carries;
* one **message** per contract of :data:`rtaudit.schemas.export.CONTRACTS`: its payload schema, its
  key (Kafka message binding) and its headers (the W3C ``traceparent`` of workers/tracing.py);
* **operations**: who sends and who receives on each channel (the fleet's roles and the producers);
* the payload schemas under ``components.schemas``, built by pydantic in one pass with references
  rewritten to ``#/components/schemas/<Model>`` (the same definitions as the JSON Schema files).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic.json_schema import models_json_schema

from rtaudit.schemas.export import CONTRACTS
from rtaudit.topics.catalog import (
    CONTROL, DLQ, EXPLAIN_REQUESTS, EXPLANATIONS, LANES, MODALITIES, REQUESTS, SCORES, STATUS, VERDICTS, catalog,
    lane_topic,
)

ASYNCAPI_PATH = Path(__file__).parent / "asyncapi.json"
REF = "#/components/schemas/{model}"
BINDING_VERSION = "0.5.0"
#: W3C trace context header (https://www.w3.org/TR/trace-context/#traceparent-header-field-values).
TRACEPARENT = {
    "type": "string", "pattern": "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$",
    "description": "W3C trace context of the span that produced the record (present when [tracing] is on; "
                   "workers/tracing.py). Kafka header value, ASCII.",
}

#: contract → (record key, how producers partition it).
KEYS: dict[str, tuple[str, str]] = {
    "audit_request": ("request_id", "by key (murmur2 of the request id)"),
    "modality_task": ("request_id", "by key"),
    "manifest": ("request_id", "by key: a request's manifest and partials share an audit.scores partition"),
    "partial_score": ("request_id", "by key"),
    "fusion_tick": ("request_id", "by key"),
    "verdict": ("request_id", "the audit.scores partition number of the request (fusion reads it back from there)"),
    "dlq_record": ("request_id when readable, else null", "by key"),
    "control_message": ("subject: model:<stage> | rollout:<stage> | policy:<tenant> | priority:<tenant> | "
                        "breaker:<tenant>", "one partition (total order)"),
    "heartbeat": ("worker id", "one partition"),
    "explain_request": ("request_id", "by key"),
    "explanation": ("request_id", "by key"),
}
#: channel (topic) → (contracts it carries, roles that send, roles that receive).
FLOWS: dict[str, tuple[list[str], list[str], list[str]]] = {
    REQUESTS: (["audit_request"], ["client"], ["router"]),
    **{lane_topic(m, lane): (["modality_task"], ["router", "video"], {"image": ["image", "ocr", "explain"]}.get(m, [m]))
       for m in MODALITIES for lane in LANES},
    SCORES: (["manifest", "partial_score", "fusion_tick"], ["router", "text", "image", "ocr", "audio", "video"], ["fusion"]),
    VERDICTS: (["verdict"], ["fusion", "router"], ["client", "explain"]),
    DLQ: (["dlq_record"], ["router", "text", "image", "ocr", "audio", "video", "fusion"], ["operator"]),
    EXPLAIN_REQUESTS: (["explain_request"], ["client"], ["explain"]),
    EXPLANATIONS: (["explanation"], ["explain"], ["client"]),
    CONTROL: (["control_message"], ["operator", "text", "image", "ocr"], ["router", "text", "image", "ocr", "audio",
                                                                        "video", "fusion", "explain"]),
    STATUS: (["heartbeat"], ["router", "text", "image", "ocr", "audio", "video", "fusion", "explain"], ["operator"]),
}


def _channel_id(topic: str) -> str:
    return topic.replace(".", "_")


def _message_id(contract: str) -> str:
    return "".join(w.capitalize() for w in contract.split("_"))


def schemas() -> dict[str, Any]:
    """``components.schemas``: every contract's model and the models they use, references rewritten."""
    _, top = models_json_schema([(m, "validation") for m in CONTRACTS.values()], ref_template=REF)
    return dict(sorted(top.get("$defs", {}).items()))


def document() -> dict[str, Any]:
    """The AsyncAPI 3.0 document (a JSON-able dict)."""
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for spec in catalog():
        contracts, senders, receivers = FLOWS[spec.name]
        cid = _channel_id(spec.name)
        config: dict[str, Any] = {"cleanup.policy": spec.configs.get("cleanup.policy", "delete").split(",")}
        for name in ("retention.ms", "max.message.bytes"):
            if name in spec.configs:
                config[name] = int(spec.configs[name])
        channels[cid] = {
            "address": spec.name,
            "description": f"key: {spec.key}; value: {spec.value}",
            "messages": {_message_id(c): {"$ref": f"#/components/messages/{_message_id(c)}"} for c in contracts},
            "bindings": {"kafka": {"topic": spec.name, "partitions": spec.partitions, "topicConfiguration": config,
                                   "bindingVersion": BINDING_VERSION}},
        }
        refs = [{"$ref": f"#/channels/{cid}/messages/{_message_id(c)}"} for c in contracts]
        operations[f"send_{cid}"] = {"action": "send", "channel": {"$ref": f"#/channels/{cid}"}, "messages": refs,
                                     "description": f"produced by: {', '.join(senders)}"}
        operations[f"receive_{cid}"] = {"action": "receive", "channel": {"$ref": f"#/channels/{cid}"}, "messages": refs,
                                        "description": f"consumed by: {', '.join(receivers)}"}
    messages = {}
    for contract, model in CONTRACTS.items():
        key, partitioning = KEYS[contract]
        messages[_message_id(contract)] = {
            "name": model.__name__, "title": model.__name__, "contentType": "application/json",
            "summary": (model.__doc__ or "").strip().split("\n")[0],
            "payload": {"$ref": REF.format(model=model.__name__)},
            "headers": {"type": "object", "properties": {"traceparent": TRACEPARENT}},
            "bindings": {"kafka": {"key": {"type": "string", "description": f"{key}; partitioning: {partitioning}"},
                                   "bindingVersion": BINDING_VERSION}},
        }
    return {
        "asyncapi": "3.0.0",
        "info": {"title": "rtaudit", "version": "0.1.0",
                 "description": "Real-time multimodal content moderation on Kafka: every topic, its records, keys, "
                                "headers, partitioning and retention. Generated by rtaudit.schemas.asyncapi."},
        "defaultContentType": "application/json",
        "servers": {"kafka": {"host": "localhost:19092", "protocol": "kafka",
                              "description": "the embedded broker of `rtaudit up` (production: KAFKA_BOOTSTRAP_SERVERS)"}},
        "channels": channels, "operations": operations,
        "components": {"messages": messages, "schemas": schemas()},
    }


def render() -> bytes:
    return orjson.dumps(document(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def export(path: Path = ASYNCAPI_PATH) -> Path:
    path.write_bytes(render())
    return path


if __name__ == "__main__":
    print(export())
