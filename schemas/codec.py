"""JSON codec for every topic: orjson for bytes, pydantic for validation.

Decoding distinguishes bytes that are not JSON (:class:`InvalidJSON`) from JSON
that breaks the contract (:class:`SchemaViolation`); both carry the request id
whenever it can still be read, so the producer gets a verdict that says why.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from schemas.errors import InvalidJSON, SchemaViolation
from schemas.messages import ScoresRecord

M = TypeVar("M", bound=BaseModel)

_scores_adapter: TypeAdapter[Any] = TypeAdapter(ScoresRecord)


def encode(message: BaseModel) -> bytes:
    """Serialize a contract model to compact UTF-8 JSON bytes (``None`` fields dropped)."""
    return orjson.dumps(message.model_dump(mode="json", exclude_none=True))


def _loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidJSON(f"not JSON: {exc}") from None


def readable_request_id(payload: Any) -> str | None:
    """The ``request_id`` of a decoded JSON payload if it is a usable string, else ``None``."""
    if isinstance(payload, dict):
        rid = payload.get("request_id")
        if isinstance(rid, str) and 0 < len(rid) <= 128 and rid.isprintable():
            return rid
    return None


def readable_fields(raw: bytes) -> dict[str, Any]:
    """``request_id``, ``tenant_id`` and ``created_at_ms`` of bad input, those that are readable."""
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    out: dict[str, Any] = {}
    rid = readable_request_id(payload)
    if rid is not None:
        out["request_id"] = rid
        tenant = payload.get("tenant_id")
        if isinstance(tenant, str) and tenant.replace("-", "").replace("_", "").replace(".", "").isalnum() and len(tenant) <= 64:
            out["tenant_id"] = tenant
        created = payload.get("created_at_ms")
        if isinstance(created, int) and 0 <= created <= 10**14:
            out["created_at_ms"] = created
    return out


def _summarize(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "<root>"
        parts.append(f"{where}: {err['msg']}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def decode(raw: bytes, model: type[M]) -> M:
    """Parse ``raw`` JSON bytes into ``model``.

    Raises:
        InvalidJSON: ``raw`` is not JSON.
        SchemaViolation: JSON that does not match ``model``; the message names
            the first offending fields, ``request_id`` is set when readable.
    """
    payload = _loads(raw)
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise SchemaViolation(_summarize(exc), request_id=readable_request_id(payload)) from None


def decode_scores_record(raw: bytes) -> Any:
    """Parse one ``audit.scores`` record into a Manifest, PartialScore or FusionTick.

    Raises:
        InvalidJSON, SchemaViolation: as :func:`decode`.
    """
    payload = _loads(raw)
    try:
        return _scores_adapter.validate_python(payload)
    except ValidationError as exc:
        raise SchemaViolation(_summarize(exc), request_id=readable_request_id(payload)) from None
