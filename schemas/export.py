"""Export the JSON Schema of every contract into ``schemas/json/``.

``python -m rtaudit.schemas.export`` (or ``rtaudit schemas export``) rewrites the files;
``tests/unit/test_schemas.py`` fails when the files drift from the models.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import BaseModel

from rtaudit.schemas import control, explain, messages

SCHEMA_DIR = Path(__file__).parent / "json"

#: file stem → model, one file per topic payload.
CONTRACTS: dict[str, type[BaseModel]] = {
    "audit_request": messages.AuditRequest,
    "modality_task": messages.ModalityTask,
    "manifest": messages.Manifest,
    "partial_score": messages.PartialScore,
    "fusion_tick": messages.FusionTick,
    "verdict": messages.Verdict,
    "dlq_record": messages.DLQRecord,
    "control_message": control.ControlMessage,
    "heartbeat": control.Heartbeat,
    "explain_request": explain.ExplainRequest,
    "explanation": explain.Explanation,
}


def render(model: type[BaseModel]) -> bytes:
    """The JSON Schema (draft 2020-12) of ``model`` as stable, indented bytes."""
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def export(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write one ``<name>.schema.json`` per contract; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in CONTRACTS.items():
        path = directory / f"{name}.schema.json"
        path.write_bytes(render(model))
        written.append(path)
    return written


if __name__ == "__main__":
    for p in export():
        print(p)
