"""Message contracts of rtaudit: pydantic models, the JSON codec and typed errors.

Every record that crosses a topic is one of the models in :mod:`rtaudit.schemas.messages`.
JSON Schema files exported from them live in ``schemas/json/`` so producers in any
language can validate before publishing (``rtaudit schemas export`` rewrites them;
a test fails when they drift from the code).
"""

from rtaudit.schemas.errors import AuditError, ErrorCode
from rtaudit.schemas.messages import (
    AuditRequest,
    DLQRecord,
    Evidence,
    FusionTick,
    Manifest,
    MediaItem,
    ModalityTask,
    ModelRef,
    PartialScore,
    Timings,
    Verdict,
)

__all__ = [
    "AuditError",
    "AuditRequest",
    "DLQRecord",
    "ErrorCode",
    "Evidence",
    "FusionTick",
    "Manifest",
    "MediaItem",
    "ModalityTask",
    "ModelRef",
    "PartialScore",
    "Timings",
    "Verdict",
]
