"""Typed errors with behaviour flags.

Callers decide on the flags (``to_dlq``, ``retriable``), never on long
``isinstance`` chains (the pattern of aiokafka's ``errors.py``). The ``code`` is
the stable, low-cardinality string that appears in DLQ records, verdict reasons
and the ``error_code`` metric label.
"""

from __future__ import annotations

import copy
import re
from enum import StrEnum

#: A default object repr (``<_io.BytesIO object at 0x7f...>``), as library messages embed them
#: (Pillow: "cannot identify image file <_io.BytesIO object at ...>").
_OBJECT_REPR = re.compile(r"\s*<[\w.]+ object at 0x[0-9a-fA-F]+>")


def readable(message: str) -> str:
    """``message`` without default object reprs: error texts reach verdicts, DLQ records and
    users, where a memory address says nothing."""
    return _OBJECT_REPR.sub("", message)


def describe(exc: BaseException, limit_chars: int = 500) -> str:
    """``"<ExceptionType>: <message>"`` for an exception a library raised, fit for a verdict or
    a DLQ record: never empty (an empty message, as RapidOCR's ``ResizeImgError()`` has, falls
    back to the exception's cause, else to the type name alone), object reprs removed,
    whitespace collapsed to one line, cut at ``limit_chars`` characters."""
    text = " ".join(readable(str(exc)).split())
    cause = exc.__cause__ or exc.__context__
    if not text and cause is not None and cause is not exc:
        text = f"caused by {describe(cause, limit_chars)}"
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line if len(line) <= limit_chars else line[: limit_chars - 1] + "…"


class ErrorCode(StrEnum):
    """Stable error codes written into DLQ records and verdict reasons."""

    INVALID_JSON = "invalid_json"
    SCHEMA_VIOLATION = "schema_violation"
    MEDIA_TOO_LARGE = "media_too_large"
    MEDIA_UNDECODABLE = "media_undecodable"
    URI_NOT_ALLOWED = "uri_not_allowed"
    MEDIA_FETCH_FAILED = "media_fetch_failed"
    MODALITY_UNSUPPORTED = "modality_unsupported"
    INFERENCE_FAILED = "inference_failed"
    ROUTING_FAILED = "routing_failed"
    THROTTLED = "throttled"
    CONTROL_REJECTED = "control_rejected"
    NO_SPEECH = "no_speech"
    RECOGNITION_FAILED = "recognition_failed"


class AuditError(Exception):
    """Base of every error the fleet handles on purpose.

    Attributes:
        code: stable error code (:class:`ErrorCode`).
        to_dlq: the offending record goes to ``audit.dlq`` with its original bytes.
        retriable: trying again may succeed (a network fetch): :func:`rtaudit.engine.stage.process_batch`
            prepares such an item once more, within its deadline, before it fails it (error partial, DLQ).
    """

    code: ErrorCode = ErrorCode.SCHEMA_VIOLATION
    to_dlq: bool = True
    retriable: bool = False

    def __init__(self, message: str, *, request_id: str | None = None) -> None:
        message = readable(message).strip() or f"{type(self).__name__} (no message)"
        super().__init__(message)
        self.message = message
        #: request id when it could be read from the bad input, else ``None``.
        self.request_id = request_id

    def for_request(self, request_id: str) -> AuditError:
        """A copy of this error addressed to ``request_id``: each failed item gets its own
        instance, so setting one item's id never relabels another's DLQ record."""
        twin = copy.copy(self)
        twin.request_id = request_id
        return twin


class InvalidJSON(AuditError):
    code = ErrorCode.INVALID_JSON


class SchemaViolation(AuditError):
    code = ErrorCode.SCHEMA_VIOLATION


class MediaTooLarge(AuditError):
    code = ErrorCode.MEDIA_TOO_LARGE


class MediaUndecodable(AuditError):
    code = ErrorCode.MEDIA_UNDECODABLE


class URINotAllowed(AuditError):
    code = ErrorCode.URI_NOT_ALLOWED


class MediaFetchFailed(AuditError):
    code = ErrorCode.MEDIA_FETCH_FAILED
    retriable = True


class InferenceFailed(AuditError):
    """A model call failed, or a library raised something untyped. Not ``retriable``: a failing batch is
    already inferred again in halves down to the failing item (:func:`rtaudit.engine.stage.infer_isolated`)."""

    code = ErrorCode.INFERENCE_FAILED


class RoutingFailed(AuditError):
    """An unexpected error while routing one record (a bug, not bad input): the record goes
    to the DLQ with the error's type and message, and the router keeps running instead of
    crash-looping on it."""

    code = ErrorCode.ROUTING_FAILED


class Throttled(AuditError):
    """A request beyond its tenant's quota whose policy is ``over_quota = "throttle"``: it gets
    an immediate verdict (the tenant's ``on_throttled``) saying so. Not bad input: no DLQ record."""

    code = ErrorCode.THROTTLED
    to_dlq = False


class NoSpeech(AuditError):
    """Audio (or a video's audio track) in which voice activity detection found no speech: the
    item is reported as such, never scored as clean. Not bad input: no DLQ record."""

    code = ErrorCode.NO_SPEECH
    to_dlq = False


class RecognitionFailed(AuditError):
    """Speech was detected but the recognizer returned no words (noise, music, another language):
    reported, never scored as clean. Not bad input: no DLQ record."""

    code = ErrorCode.RECOGNITION_FAILED
    to_dlq = False


class ControlRejected(AuditError):
    """An ``audit.control`` record that is malformed, stale or fails its compare-and-swap
    (:mod:`rtaudit.engine.control`): it goes to the DLQ with the reason; the subject keeps its version in force."""

    code = ErrorCode.CONTROL_REJECTED
