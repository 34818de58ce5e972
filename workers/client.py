"""Producer-side client: submit requests to ``audit.requests`` and await their verdicts.

>>> settings = load_settings()
>>> check_cluster(settings, [REQUESTS, VERDICTS])      # BrokerUnavailable / TopicsMissing: one line each
>>> with verdict_reader(settings) as verdicts:
...     client = AuditClient(settings)
...     client.submit(AuditRequest(request_id="r1", tenant_id="acme", created_at_ms=now_ms(), text="hi"))
...     client.flush()                                  # DeliveryError unless the broker acknowledged it
...     got = verdicts.wait_all({"r1"}, timeout_s=30)   # VerdictTimeout lists the ids still missing

The fleet is at-least-once: a request id can have more than one verdict record, all
identical by design. Readers drop the repeats (first wins) with a bounded memory of seen
ids (:class:`SeenIds`) and count them (``duplicates_dropped``); ``dedupe=False`` shows them.
"""

from __future__ import annotations

import base64
import mimetypes
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.engine.media import MediaPolicy
from rtaudit.schemas.codec import decode, encode
from rtaudit.schemas.errors import AuditError, MediaTooLarge
from pydantic import BaseModel

from rtaudit.schemas.messages import MAX_INLINE_MEDIA_BYTES, AuditRequest, DLQRecord, MediaItem, Verdict
from rtaudit.schemas.explain import Explanation, ExplainRequest
from rtaudit.topics.catalog import DLQ, EXPLAIN_REQUESTS, EXPLANATIONS, REQUESTS, VERDICTS
from rtaudit.workers.kafka import ErrorRecorder, check_cluster, consumer_config, producer_config
from rtaudit.workers.offsets import OffsetGapGuard
from rtaudit.workers.producer import RecoveringProducer
from rtaudit.workers.settings import Settings
from rtaudit.workers import tracing

__all__ = [
    "AuditClient", "BadLines", "DeliveryError", "InputFileError", "RecordReader", "SeenIds", "VerdictTimeout",
    "check_cluster", "dlq_reader", "request_from_path", "request_from_uri", "verdict_reader",
]

R = TypeVar("R", bound=BaseModel)
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp"}
#: Bad lines of a ``.jsonl`` file named in :class:`BadLines`' message; the rest are counted.
BAD_LINES_SHOWN = 20
#: How many request ids a reader remembers to drop repeated verdicts (about 100 MB at most).
SEEN_IDS_CAPACITY = 1_000_000


class DeliveryError(RuntimeError):
    """The broker did not acknowledge every request within the flush timeout (one-line message:
    how many, and the last error librdkafka reported)."""


class VerdictTimeout(TimeoutError):
    """Not every awaited record arrived in time.

    Attributes:
        missing: the ids still missing, sorted.
        got: ``{id: (record, arrived_at_ms)}`` of those that arrived.
        timeout_s: how long was waited, seconds.
    """

    def __init__(self, missing: Iterable[str], got: dict[str, tuple[object, int]], timeout_s: float) -> None:
        self.missing = tuple(sorted(missing))
        self.got, self.timeout_s = got, timeout_s
        shown = ", ".join(self.missing[:5]) + (f" (+{len(self.missing) - 5} more)" if len(self.missing) > 5 else "")
        total = len(self.missing) + len(got)
        super().__init__(f"{len(self.missing)} of {total} verdicts not in within {timeout_s:g} s (missing: {shown})")


class InputFileError(ValueError):
    """A file given to :func:`request_from_path` cannot become a request (an empty file, or
    binary data that is neither an image nor UTF-8 text)."""


class BadLines(InputFileError):
    """Lines of a ``.jsonl`` file given to :func:`request_from_path` that are not requests (not JSON,
    or not the request schema). The message names each, ``path:line: reason``, one a line after a
    count; past :data:`BAD_LINES_SHOWN` it ends with ``... and N more``.

    Attributes:
        lines: ``(line number from 1, reason)`` of every bad line, in order.
        total: the non-blank lines of the file.
    """

    def __init__(self, path: Path, lines: list[tuple[int, str]], total: int) -> None:
        self.lines, self.total = lines, total
        shown = [f"{path}:{n}: {why}" for n, why in lines[:BAD_LINES_SHOWN]]
        if len(lines) > BAD_LINES_SHOWN:
            shown.append(f"... and {len(lines) - BAD_LINES_SHOWN} more")
        super().__init__("\n".join([f"{path}: {len(lines)} of {total} lines are not valid requests:", *shown]))


class AuditClient:
    """Publishes requests, keyed by ``request_id``; :meth:`flush` waits for the broker's acks.
    The producer survives broker restarts (:class:`rtaudit.workers.producer.RecoveringProducer`:
    a new instance resends what was not acknowledged).

    ``on_delivered(request_id)`` is called for each request once the broker acknowledged it
    (from :meth:`submit`'s polling or :meth:`flush`), so a caller reports "submitted" only then.
    """

    def __init__(self, settings: Settings, on_delivered: Callable[[str], None] | None = None) -> None:
        self._errors = ErrorRecorder()
        self._producer = RecoveringProducer(producer_config(settings, self._errors), name="client")
        tracing.configure(settings.tracing, "rtaudit-client")
        self._bootstrap = settings.bootstrap
        self._failed: list[str] = []
        self._on_delivered = on_delivered
        self.delivered = 0

    @property
    def producer_recreations(self) -> int:
        """Producer instances created since start after a fatal error or a stall (broker restarts)."""
        return self._producer.recreated

    def _on_delivery(self, err, msg) -> None:
        key = msg.key().decode("utf-8", "replace") if msg.key() is not None else "<no key>"
        if err is not None:
            self._failed.append(f"{key}: {err.str()}")
            return
        self.delivered += 1
        if self._on_delivered is not None:
            self._on_delivered(key)

    def submit_raw(self, key: bytes | None, value: bytes, topic: str = REQUESTS,
                   headers: list[tuple[str, bytes]] | None = None) -> None:
        """Publish raw bytes as is (used to send malformed input on purpose); ``headers``: Kafka headers."""
        while True:
            try:
                self._producer.produce(topic, key=key, value=value, on_delivery=self._on_delivery, headers=headers)
                break
            except BufferError:
                self._producer.poll(0.05)
        self._producer.poll(0)

    def submit(self, request: AuditRequest, traceparent: str | None = None) -> None:
        """Publish one request (asynchronous: :meth:`flush` waits for the acknowledgement). With
        ``[tracing]`` on, it starts the request's trace (or continues ``traceparent``, a W3C value) and
        sends the context in the ``traceparent`` header (:mod:`rtaudit.workers.tracing`)."""
        self.submit_raw(request.request_id.encode(), encode(request),
                        headers=tracing.submit_headers(request.request_id, traceparent))

    def request_explanation(self, request_id: str, part: str | None = None) -> None:
        """Ask the explain role for heatmaps of ``request_id``'s image parts (all, or ``part``,
        e.g. ``"image:0"``); they come on ``audit.explanations`` (:func:`explanation_reader`),
        ``trigger="on_demand"``. Asynchronous, as :meth:`submit`."""
        ask = ExplainRequest(request_id=request_id, part=part, requested_at_ms=now_ms())
        self.submit_raw(request_id.encode(), encode(ask), EXPLAIN_REQUESTS)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait up to ``timeout_s`` seconds for every acknowledgement.

        Raises:
            DeliveryError: a request was refused, or not acknowledged in time.
        """
        left = self._producer.flush(timeout_s)
        if left or self._failed:
            failed, self._failed = self._failed, []
            why = failed[-1] if failed else (self._errors.reason() or "no acknowledgement")
            raise DeliveryError(
                f"{left + len(failed)} requests not acknowledged by {self._bootstrap} within {timeout_s:g} s (last error: {why})"
            )


def request_from_path(path: Path, tenant_id: str, *, media: MediaPolicy | None = None, **fields: object) -> list[AuditRequest]:
    """Requests for a file: ``.jsonl`` → one per line (validated), image (by suffix) → one
    inline image request, UTF-8 text → its text, anything else judged by its content
    (:func:`rtaudit.engine.media_kind.sniff`): an image, audio or video → one inline media request
    whose ``mime`` is the content's, whatever the file's name says. ``media``: the fleet's media
    settings, named in the hint of a file too large to send inline.

    Raises:
        BadLines: ``.jsonl`` lines that are not requests, every one of them (``path:line: reason``),
            before any request is returned.
        MediaTooLarge: a media file over :data:`MAX_INLINE_MEDIA_BYTES` (8 MiB) bytes; the message
            says how to send it by URI (``rtaudit submit --uri``) and what the fleet allows.
        InputFileError: an empty file of any kind (0 bytes, or only white space and invisible characters,
            such as U+200B ZERO WIDTH SPACE, for text and ``.jsonl``), or a file that is neither media nor UTF-8 text.
        OSError: the file cannot be read.
    """
    suffix = path.suffix.lower()
    data = path.read_bytes()
    blank = "" if not data else None if suffix in IMAGE_SUFFIXES else _blank_text(data)
    if blank is not None:
        raise InputFileError(f"{path} is empty{f' (only invisible characters: {blank})' if blank else ''}: "
                             "nothing to moderate (a request needs text or at least one media item)")
    if suffix == ".jsonl":
        out, bad_lines = [], []
        lines = [(n, line) for n, line in enumerate(data.splitlines(), 1) if line.strip()]
        for n, line in lines:
            try:
                out.append(decode(line, AuditRequest))
            except AuditError as exc:
                bad_lines.append((n, exc.message))
        if bad_lines:
            raise BadLines(path, bad_lines, len(lines))
        return out
    rid = f"{path.stem[:40]}-{uuid.uuid4().hex[:12]}"
    common = dict(request_id=rid, tenant_id=tenant_id, created_at_ms=now_ms(), **fields)
    if suffix in IMAGE_SUFFIXES:
        return [AuditRequest(media=[_inline(path, data, "image", mimetypes.guess_type(path.name)[0], media)], **common)]
    try:
        text: str | None = data.decode("utf-8")
        bad = "holds NUL bytes" if "\x00" in text else None  # type: ignore[operator]  # text is a str on this line (the decode above succeeded)
    except UnicodeDecodeError as exc:
        text, bad = None, f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
    if text is not None and bad is None:
        return [AuditRequest(text=text, **common)]
    from rtaudit.engine.media_kind import sniff

    found = sniff(data)
    if found is None:
        raise InputFileError(
            f"{path} {bad} and not an image, audio or video file FFmpeg or Pillow can read: submit text as UTF-8, "
            f"images, audio or video as they are"
        )
    kind, mime = found
    return [AuditRequest(media=[_inline(path, data, kind, mime, media)], **common)]


def _blank_text(data: bytes) -> str | None:
    """``None`` unless ``data`` is UTF-8 text that shows nothing: only white space (``str.isspace``) and
    invisible characters (zero-width and other format characters, category Cf:
    :func:`rtaudit.engine.text.normalize.is_invisible`). Then ``""`` for white space alone, else the
    invisible characters it holds, named: ``U+200B ZERO WIDTH SPACE, ...`` (3, then ``and N more``)."""
    import unicodedata

    from rtaudit.engine.text.normalize import is_invisible

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not all(c.isspace() or is_invisible(c) for c in text):
        return None
    names = [f"U+{ord(c):04X} {unicodedata.name(c, 'format character')}" for c in dict.fromkeys(text) if not c.isspace()]
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _inline(path: Path, data: bytes, kind: str, mime: str | None, media: MediaPolicy | None = None) -> MediaItem:
    """``data`` as an inline media item of ``kind``. Raises :class:`MediaTooLarge` over the inline limit,
    with :func:`by_reference_hint` for ``media``."""
    if len(data) > MAX_INLINE_MEDIA_BYTES:
        raise MediaTooLarge(
            f"{path} is {len(data)} bytes ({len(data) / 2**20:.1f} MiB), over the {MAX_INLINE_MEDIA_BYTES} bytes "
            f"({MAX_INLINE_MEDIA_BYTES // 2**20} MiB) limit of inline media: {by_reference_hint(path, len(data), media)}"
        )
    return MediaItem(type=kind, data_b64=base64.b64encode(data).decode("ascii"), mime=mime, name=path.name)


def by_reference_hint(path: Path, size: int, media: MediaPolicy | None) -> str:
    """How to send a file too large to inline: ``rtaudit submit --uri file://...``, and what the
    fleet's ``[media]`` settings (``media``; unknown when ``None``) must allow for it."""
    uri = path.resolve().as_uri()
    if media is None:
        return (f"send it by reference with `rtaudit submit --uri {uri}`; the fleet fetches it only from a folder in "
                f"[media] allowed_file_roots and up to [media] max_bytes")
    roots = ", ".join(str(r) for r in media.allowed_file_roots) or "none"
    inside = any(path.resolve().is_relative_to(Path(r).resolve()) for r in media.allowed_file_roots)
    needs = []
    if not inside:
        needs.append(f"its folder in [media] allowed_file_roots (now: {roots})")
    if size > media.max_bytes:
        needs.append(f"[media] max_bytes of at least {size} (now {media.max_bytes})")
    return (f"send it by reference with `rtaudit submit --uri {uri}`"
            + (f"; the fleet fetches it only with {' and '.join(needs)}" if needs else ""))


def request_from_uri(uri: str, tenant_id: str, **fields: object) -> AuditRequest:
    """A request for one image by reference (``file://`` or ``http(s)://``): the router checks the
    URI against ``[media] allowed_file_roots`` / ``allowed_http_hosts`` and the worker fetches it.

    Raises:
        pydantic.ValidationError: not a ``file``, ``http`` or ``https`` URI, or longer than 2048 characters.
    """
    name = uri.rstrip("/").rsplit("/", 1)[-1][:40] or "uri"
    rid = f"{''.join(c if c.isalnum() or c in '._-' else '-' for c in name)}-{uuid.uuid4().hex[:12]}"
    item = MediaItem(type="image", uri=uri, mime=mimetypes.guess_type(name)[0], name=name or None)
    return AuditRequest(request_id=rid, tenant_id=tenant_id, created_at_ms=now_ms(), media=[item], **fields)


class SeenIds:
    """The last ``capacity`` ids seen, least recently seen dropped first (an LRU set on
    :class:`collections.OrderedDict`): memory stays bounded however long a reader runs."""

    def __init__(self, capacity: int = SEEN_IDS_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._ids: OrderedDict[str, None] = OrderedDict()

    def seen(self, key: str) -> bool:
        """Record ``key``; ``True`` when it was already among the remembered ids."""
        if key in self._ids:
            self._ids.move_to_end(key)
            return True
        self._ids[key] = None
        if len(self._ids) > self.capacity:
            self._ids.popitem(last=False)
        return False

    def __len__(self) -> int:
        return len(self._ids)


class RecordReader(Generic[R]):
    """Reads a topic from the beginning of every partition (no consumer group, so no join
    delay; nothing committed), decoding each record into ``model``. Records are yielded with
    their arrival time (ms); ``key_of`` names the id records are matched and deduplicated on.

    With ``dedupe`` (the default), a record whose id was already yielded is dropped and
    counted in :attr:`duplicates_dropped` (ids remembered: the last ``seen_capacity``).
    A context manager: leaving the ``with`` block closes the consumer.

    Raises (constructor): :class:`rtaudit.workers.kafka.BrokerUnavailable` when no broker answers within
    ``timeout_s`` seconds, :class:`rtaudit.workers.kafka.TopicsMissing` when ``topic`` does not exist.
    """

    def __init__(
        self, settings: Settings, topic: str = VERDICTS, model: type[R] = Verdict,  # type: ignore[assignment]  # a TypeVar's default: Verdict is R when no model is given
        key_of: Callable[[R], str | None] = lambda r: getattr(r, "request_id", None),
        dedupe: bool = True, seen_capacity: int = SEEN_IDS_CAPACITY, timeout_s: float = 5.0,
    ) -> None:
        self.topic, self.model, self.key_of = topic, model, key_of
        self._seen = SeenIds(seen_capacity) if dedupe else None
        #: records dropped because their id was already yielded.
        self.duplicates_dropped = 0
        check_cluster(settings, [topic], timeout_s)
        self._consumer = Consumer(consumer_config(
            settings, group_id=f"rtaudit-reader-{uuid.uuid4().hex[:8]}", errors=ErrorRecorder()))
        self._closed = False
        md = self._consumer.list_topics(topic, timeout=timeout_s)
        count = len(md.topics[topic].partitions)
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(count)])
        #: re-reads a record a fetch skipped (the embedded broker's race, :class:`OffsetGapGuard`).
        self._gaps = OffsetGapGuard(self._consumer, "reader")

    def __enter__(self) -> "RecordReader[R]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stream(self, timeout_s: float | None = None, idle_s: float = 0.5) -> Iterator[tuple[R, int]]:
        """Yield ``(record, arrived_at_ms)`` until ``timeout_s`` seconds pass (``None``: forever).
        Records that do not decode, and repeats of an id already yielded (with ``dedupe``), are skipped."""
        end = None if timeout_s is None else time.monotonic() + timeout_s
        while end is None or time.monotonic() < end:
            wait = idle_s if end is None else max(0.0, min(idle_s, end - time.monotonic()))
            msg = self._consumer.poll(wait)
            if msg is None or msg.error() or not self._gaps.filter([msg]):
                continue
            try:
                record = decode(msg.value() or b"", self.model)
            except AuditError:
                continue
            if self._seen is not None:
                key = self.key_of(record)
                if key is not None and self._seen.seen(key):
                    self.duplicates_dropped += 1
                    continue
            yield record, now_ms()

    def wait_for(
        self, ids: Iterable[str], timeout_s: float, on_record: Callable[[R, int], None] | None = None,
    ) -> dict[str, tuple[R, int]]:
        """Collect the first record of each id until all arrived or ``timeout_s`` seconds passed.
        Returns ``{id: (record, arrived_at_ms)}`` for those that arrived (possibly fewer than
        asked: :meth:`wait_all` raises instead); ``on_record`` is called for each as it arrives."""
        wanted = set(ids)
        got: dict[str, tuple[R, int]] = {}
        if not wanted:
            return got
        for record, arrived in self.stream(timeout_s):
            key = self.key_of(record)
            if key in wanted and key not in got:
                got[key] = (record, arrived)
                if on_record is not None:
                    on_record(record, arrived)
                if len(got) == len(wanted):
                    break
        return got

    def wait_all(
        self, ids: Iterable[str], timeout_s: float, on_record: Callable[[R, int], None] | None = None,
    ) -> dict[str, tuple[R, int]]:
        """As :meth:`wait_for`, but every id must arrive.

        Raises:
            VerdictTimeout: some ids did not arrive within ``timeout_s`` seconds (it lists them
                and carries those that did arrive).
        """
        wanted = set(ids)
        got = self.wait_for(wanted, timeout_s, on_record)
        if len(got) < len(wanted):
            raise VerdictTimeout(wanted - set(got), dict(got), timeout_s)
        return got

    def close(self) -> None:
        """Close the consumer (idempotent)."""
        if not self._closed:
            self._closed = True
            self._consumer.close()


def verdict_reader(settings: Settings, dedupe: bool = True) -> RecordReader[Verdict]:
    """Reader of ``audit.verdicts`` keyed by request id; drops repeated verdicts unless ``dedupe=False``."""
    return RecordReader(settings, VERDICTS, Verdict, dedupe=dedupe)


def explanation_key(e: Explanation) -> str:
    """``"<request_id>/<part>/<trigger>"``: the id explanation readers match and deduplicate on."""
    return f"{e.request_id}/{e.part}/{e.trigger}"


def explanation_reader(settings: Settings, dedupe: bool = True) -> RecordReader[Explanation]:
    """Reader of ``audit.explanations``, keyed by :func:`explanation_key` (one record per request
    id, image part and trigger unless ``dedupe=False``); join them to verdicts on ``request_id``."""
    return RecordReader(settings, EXPLANATIONS, Explanation, key_of=explanation_key, dedupe=dedupe)


def dlq_reader(settings: Settings) -> RecordReader[DLQRecord]:
    """Reader of ``audit.dlq`` keyed by the request id, else the source record's key (every record
    shown: the same bad input sent twice is two DLQ records)."""
    return RecordReader(settings, DLQ, DLQRecord, key_of=lambda r: r.request_id or r.source_key, dedupe=False)
