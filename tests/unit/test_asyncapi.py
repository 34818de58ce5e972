"""schemas/asyncapi.json: the AsyncAPI 3.0 document of every topic agrees with the models, with the
JSON Schema files in schemas/json/ and with the topic catalogue; a change to any of them without
``python -m rtaudit.schemas.asyncapi`` (and ``rtaudit schemas export``) fails here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rtaudit.schemas.asyncapi import ASYNCAPI_PATH, KEYS, document, render
from rtaudit.schemas.export import CONTRACTS, SCHEMA_DIR
from rtaudit.topics.catalog import catalog

DOC = json.loads(ASYNCAPI_PATH.read_text())


def test_the_file_is_what_the_models_generate() -> None:
    assert ASYNCAPI_PATH.read_bytes() == render(), "schemas/asyncapi.json is stale: run python -m rtaudit.schemas.asyncapi"


@pytest.mark.parametrize("contract", sorted(CONTRACTS))
def test_each_payload_is_the_json_schema_file(contract: str) -> None:
    """The JSON Schema file and the AsyncAPI payload are the same definitions (refs aside)."""
    text = (SCHEMA_DIR / f"{contract}.schema.json").read_text().replace("#/$defs/", "#/components/schemas/")
    file_schema = json.loads(text)
    defs = file_schema.pop("$defs", {})
    file_schema.pop("$schema")
    components = DOC["components"]["schemas"]
    assert components[CONTRACTS[contract].__name__] == file_schema
    for name, schema in defs.items():
        assert components[name] == schema, f"{contract}: {name} differs"


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def _resolve(ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = DOC
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def test_every_reference_resolves() -> None:
    refs = _refs(DOC)
    assert len(refs) > 50
    for ref in refs:
        _resolve(ref)


def test_every_topic_is_a_channel_with_its_partitioning_and_retention() -> None:
    assert DOC["asyncapi"] == "3.0.0" and DOC["info"]["title"] and DOC["info"]["version"]
    by_address = {c["address"]: c for c in DOC["channels"].values()}
    for spec in catalog():
        ch = by_address[spec.name]
        kafka = ch["bindings"]["kafka"]
        assert kafka["partitions"] == spec.partitions
        assert kafka["topicConfiguration"]["cleanup.policy"] == spec.configs["cleanup.policy"].split(",")
        if "retention.ms" in spec.configs:
            assert kafka["topicConfiguration"]["retention.ms"] == int(spec.configs["retention.ms"])
    assert set(by_address) == {s.name for s in catalog()}


def test_every_message_has_a_key_and_the_trace_header_and_is_carried_somewhere() -> None:
    carried = {ref.split("/")[-1] for c in DOC["channels"].values() for ref in _refs(c["messages"])}
    messages = DOC["components"]["messages"]
    assert set(KEYS) == set(CONTRACTS)
    for name, msg in messages.items():
        assert name in carried, f"{name} is on no channel"
        assert msg["bindings"]["kafka"]["key"]["type"] == "string"
        assert "traceparent" in msg["headers"]["properties"]
    for op in DOC["operations"].values():
        assert op["action"] in ("send", "receive")
        channel = _resolve(op["channel"]["$ref"])
        for ref in _refs(op["messages"]):
            assert ref.startswith(op["channel"]["$ref"] + "/messages/"), "an operation's messages are its channel's"
            assert _resolve(ref) in channel["messages"].values()


def test_a_model_change_shows_as_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import create_model

    from rtaudit.schemas import asyncapi

    changed = create_model("Verdict", __base__=CONTRACTS["verdict"], extra_field=(int, 0))
    monkeypatch.setitem(asyncapi.CONTRACTS, "verdict", changed)
    assert "extra_field" in json.dumps(document()["components"]["schemas"]["Verdict"])
    assert render() != ASYNCAPI_PATH.read_bytes()
