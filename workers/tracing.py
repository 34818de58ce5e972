"""OpenTelemetry traces through Kafka: one trace per request, from the client to the verdict.

W3C trace context (``traceparent: 00-<trace id>-<span id>-<flags>``, https://www.w3.org/TR/trace-context/)
rides in a Kafka header of every record of a request. The spans are made here, by the runtime, with
the extracted context as the parent (not by ``opentelemetry-instrumentation-confluent-kafka``, whose
consumer span starts a new trace linked to the producer's and stays open until the next poll):

==================  ==========  =================================================================
span                process     parent; interval
==================  ==========  =================================================================
``submit``          client      none (the root; or the caller's ``traceparent``); the publish call
``route``           router      ``submit``; decoding, planning and handing the tasks to the producer
``queue``           modality    ``route``; from entering the batcher to the batch forming (one per item)
``infer``           modality    none (its own trace), **linked** to every item's ``queue`` span; one
                                per batch: the model call and the partials' encoding
``fusion.wait``     fusion      ``route``; from the manifest's arrival to the decision
``emit``            fusion      ``fusion.wait``; handing the verdict to the producer
==================  ==========  =================================================================

The verdict names its trace (``Verdict.trace_id``) and carries the ``emit`` span's context. No span is
made for a poll that returned nothing (spans are made per record or batch, never per poll).

**Cost.** ``[tracing] exporter = "none"`` (the default) creates no SDK object and reads no header: every
call site returns at its first line. When tracing is on, the hot path only parses headers and appends one
tuple of plain numbers per span (ids from ``random.getrandbits``, times from ``time.time_ns``) to a
bounded deque; a daemon thread turns them into SDK :class:`~opentelemetry.sdk.trace.ReadableSpan` objects
every :data:`EXPORT_INTERVAL_S` and hands them to the SDK's exporter (``OTLPSpanExporter`` over HTTP,
``ConsoleSpanExporter``, or a per-process JSON-lines file). Sampling is decided once, at the client, by
the SDK's ``TraceIdRatioBased`` rule on the trace id; later hops follow the ``sampled`` flag, so a trace
is whole or absent. A full queue drops spans (counted in ``rtaudit_trace_spans_dropped_total``), never blocks.

Call sites (one line each): :func:`configure` (process start), :func:`submit_headers` (client),
:func:`begin` / :func:`end` and :func:`current_headers` (router and fusion loops), :func:`batch_spans`
(modality worker after a batch), :func:`fusion_arrived` / :func:`fusion_emit` (fusion).
"""

from __future__ import annotations

import atexit
import logging
import os
import random
import threading
import time
from collections import OrderedDict, deque
from pathlib import Path
from typing import Any

from rtaudit.workers import metrics
from rtaudit.workers.obs_settings import TracingSettings

log = logging.getLogger(__name__)
#: seconds between two exports of the recorded spans.
EXPORT_INTERVAL_S = 0.5
#: requests fusion remembers the trace context of (their manifest arrived, no verdict yet); oldest dropped.
FUSION_PENDING_MAX = 200_000
HEADER = "traceparent"

#: a context: ``(trace id, span id, sampled)`` as integers.
Ctx = tuple[int, int, bool]
#: a recorded span: name, kind, trace id, span id, parent span id (0: root), start ns, end ns,
#: attributes (or None), links (``[(trace id, span id)]`` or None).
Rec = tuple[str, int, int, int, int, int, int, Any, Any]

KIND_INTERNAL, KIND_PRODUCER, KIND_CONSUMER = 0, 1, 2


class _State:
    """The process's tracer: settings, the span queue, the export thread, the thread-local current hop."""

    def __init__(self, settings: TracingSettings, service: str) -> None:
        from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

        self.settings, self.service = settings, service
        self.bound = TraceIdRatioBased.get_bound_for_rate(settings.sampling_ratio)
        self.spans: deque[Rec] = deque(maxlen=settings.max_queue_size)
        self.recorded = 0
        self.local = threading.local()
        self.fusion: OrderedDict[str, tuple[Ctx, int]] = OrderedDict()
        self.exporter = _exporter(settings, service)
        self.flush_lock = threading.Lock()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="trace-export", daemon=True)
        self.thread.start()

    def record(self, rec: Rec) -> None:
        self.recorded += 1
        if len(self.spans) == self.spans.maxlen:
            metrics.TRACE_SPANS_DROPPED.inc()
        self.spans.append(rec)

    def _run(self) -> None:
        while not self._stop.wait(EXPORT_INTERVAL_S):
            self.flush()

    def flush(self) -> int:
        """Export every span recorded so far; returns how many."""
        with self.flush_lock:
            taken: list[Rec] = []
            try:
                while True:
                    taken.append(self.spans.popleft())
            except IndexError:
                pass
            if not taken:
                return 0
            try:
                size = self.settings.max_export_batch_size
                readable = _readable(taken, self.service)
                for lo in range(0, len(readable), size):
                    self.exporter.export(readable[lo:lo + size])
            except Exception:  # an unreachable collector must not take the worker down
                log.warning("trace export of %d spans failed", len(taken), exc_info=True)
            return len(taken)

    def shutdown(self) -> None:
        self._stop.set()
        self.flush()
        try:
            self.exporter.shutdown()
        except Exception:
            pass


_STATE: _State | None = None


def configure(settings: TracingSettings, service: str) -> None:
    """Start tracing for this process as ``service`` (``rtaudit-<role>``, ``rtaudit-client``) unless the
    exporter is ``none`` or tracing is already configured (the first call wins). Raises ``ImportError``
    naming the package when the OpenTelemetry SDK is missing."""
    global _STATE
    if settings.exporter == "none" or _STATE is not None:
        return
    _STATE = _State(settings, service)
    atexit.register(_STATE.shutdown)


def shutdown() -> None:
    """Export what is recorded and stop (tests; a process's exit does it by itself)."""
    global _STATE
    if _STATE is not None:
        atexit.unregister(_STATE.shutdown)
        _STATE.shutdown()
        _STATE = None


def enabled() -> bool:
    return _STATE is not None


def flush() -> int:
    """Export every span recorded so far (blocking); returns how many."""
    return _STATE.flush() if _STATE is not None else 0


# ---------------------------------------------------------------------------------------- W3C context

def traceparent(trace_id: int, span_id: int, sampled: bool = True) -> bytes:
    """The W3C ``traceparent`` value for a context (version 00)."""
    return b"00-%032x-%016x-%s" % (trace_id, span_id, b"01" if sampled else b"00")


def parse(value: bytes | str | None) -> Ctx | None:
    """``(trace id, span id, sampled)`` of a ``traceparent`` value; ``None`` when absent or malformed
    (an all-zero id, a wrong length, a non-hex digit, version ff)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if len(value) < 55 or value[2] != "-" or value[35] != "-" or value[52] != "-" or value[:2] == "ff":
        return None
    try:
        trace_id, span_id, flags = int(value[3:35], 16), int(value[36:52], 16), int(value[53:55], 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return trace_id, span_id, bool(flags & 1)


def context_of(message: Any) -> Ctx | None:
    """The trace context in a confluent-kafka message's headers (``None``: none, or not parseable)."""
    headers = message.headers()
    if not headers:
        return None
    for k, v in headers:
        if k == HEADER:
            return parse(v)
    return None


def _id() -> int:
    return random.getrandbits(64) or 1


# ---------------------------------------------------------------------------------------- client

def submit_headers(request_id: str, parent: bytes | str | None = None) -> list[tuple[str, bytes]] | None:
    """Headers for a request being published: a new trace (or the caller's ``parent`` ``traceparent``),
    sampled by the ratio, and its ``submit`` span. ``None`` when tracing is off, or when a new trace is
    sampled out (then nothing downstream reads a header or records a span)."""
    st = _STATE
    if st is None:
        return None
    now = time.time_ns()
    ctx = parse(parent)
    if ctx is not None:
        trace_id, parent_id, sampled = ctx
    else:
        trace_id, parent_id = random.getrandbits(128) or 1, 0
        sampled = (trace_id & 0xFFFFFFFFFFFFFFFF) < st.bound  # the SDK's TraceIdRatioBased rule
    if not sampled:
        # no header at all: no hop parses one, produces one or records anything (a sampled-out request
        # costs nothing past this point; its verdict names no trace). A caller's unsampled parent is
        # passed on as it came.
        return [(HEADER, traceparent(trace_id, parent_id, False))] if ctx is not None else None
    span_id = _id()
    st.record(("submit", KIND_PRODUCER, trace_id, span_id, parent_id, now, time.time_ns(),
               {"rtaudit.request_id": request_id}, None))
    return [(HEADER, traceparent(trace_id, span_id, True))]


# ---------------------------------------------------------------------------------------- router / fusion hop

def begin(name: str, message: Any) -> None:
    """Start the span ``name`` for one consumed record (child of its header's context) as this thread's
    current hop; records produced until :func:`end` carry it (:func:`current_headers`)."""
    st = _STATE
    if st is None:
        return
    ctx = context_of(message)
    if ctx is None:
        st.local.hop = None
        return
    if not ctx[2]:  # not sampled: pass the decision on, record nothing
        st.local.hop = (ctx, 0, 0, traceparent(ctx[0], ctx[1], False))
        return
    span_id = _id()
    st.local.hop = (ctx, span_id, time.time_ns(), traceparent(ctx[0], span_id))
    st.local.name = name


def current_headers() -> list[tuple[str, bytes]] | None:
    """Headers for a record produced inside the current hop (``None``: no hop, or tracing off)."""
    st = _STATE
    if st is None:
        return None
    hop = getattr(st.local, "hop", None)
    if hop is None or not hop[3]:
        return None
    return [(HEADER, hop[3])]


def end(**attributes: Any) -> None:
    """End the current hop's span (a no-op without one)."""
    st = _STATE
    if st is None:
        return
    hop = getattr(st.local, "hop", None)
    st.local.hop = None
    if hop is None or not hop[1]:
        return
    ctx, span_id, start, _ = hop
    st.record((st.local.name, KIND_CONSUMER, ctx[0], span_id, ctx[1], start, time.time_ns(), attributes or None, None))


def fusion_arrived(message: Any, record: Any) -> None:
    """Fusion read ``record`` from ``message``: a manifest's trace context starts the request's wait."""
    st = _STATE
    if st is None or getattr(record, "kind", None) != "manifest":
        return
    ctx = context_of(message)
    if ctx is None or not ctx[2]:
        return
    st.fusion[record.request_id] = (ctx, time.time_ns())
    if len(st.fusion) > FUSION_PENDING_MAX:
        st.fusion.popitem(last=False)


def fusion_emit(verdict: Any) -> Any:
    """The verdict to produce, named with its trace id (``trace_id``), and this thread's current hop set to
    its ``emit`` span (the record produced next carries it; :func:`end` closes it). Records the
    ``fusion.wait`` span. Returns ``verdict`` unchanged when the request was not traced."""
    st = _STATE
    if st is None:
        return verdict
    pending = st.fusion.pop(verdict.request_id, None)
    if pending is None:
        return verdict
    (trace_id, parent_id, _), arrived = pending
    now = time.time_ns()
    wait_id, emit_id = _id(), _id()
    st.record(("fusion.wait", KIND_INTERNAL, trace_id, wait_id, parent_id, arrived, now,
               {"rtaudit.complete": verdict.complete, "rtaudit.parts": len(verdict.parts)}, None))
    st.local.hop = ((trace_id, wait_id, True), emit_id, now, traceparent(trace_id, emit_id))
    st.local.name = "emit"
    return verdict.model_copy(update={"trace_id": f"{trace_id:032x}"})


# ---------------------------------------------------------------------------------------- modality worker

def batch_spans(stage: str, batch: Any) -> None:
    """Spans of one inferred :class:`~rtaudit.engine.batcher.Batch` (call it once the batch is scored):
    a ``queue`` span per traced item (from its ``enqueued_ms`` to the batch's ``formed_ms``; the item's
    ``payload.message`` is the consumed record) and one ``infer`` span (from ``formed_ms`` to now) linked
    to all of them. Each traced item's ``payload`` gets the headers its partial carries (:func:`headers_of`)."""
    st = _STATE
    if st is None:
        return
    formed = int(batch.formed_ms * 1_000_000)
    links = []
    for p in (*batch.items, *batch.expired):
        ctx = context_of(p.payload.message)
        if ctx is None:
            continue
        if not ctx[2]:
            p.payload.trace_headers = [(HEADER, traceparent(ctx[0], ctx[1], False))]
            continue
        span_id = _id()
        st.record(("queue", KIND_CONSUMER, ctx[0], span_id, ctx[1], int(p.enqueued_ms * 1_000_000), formed,
                   None, None))
        links.append((ctx[0], span_id))
        p.payload.trace_headers = [(HEADER, traceparent(ctx[0], span_id))]
    if links:
        st.record(("infer", KIND_INTERNAL, random.getrandbits(128) or 1, _id(), 0, formed, time.time_ns(),
                   {"rtaudit.stage": stage, "rtaudit.batch_size": len(batch.items)}, links))


def headers_of(work: Any) -> list[tuple[str, bytes]] | None:
    """The headers :func:`batch_spans` gave ``work``'s output (``None``: not traced, or tracing off)."""
    return getattr(work, "trace_headers", None) if _STATE is not None else None


# ---------------------------------------------------------------------------------------- export side

def _exporter(settings: TracingSettings, service: str) -> Any:
    if settings.exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=settings.endpoint)
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    if settings.exporter == "console":
        return ConsoleSpanExporter(service_name=service)
    folder = Path(settings.file_dir)
    folder.mkdir(parents=True, exist_ok=True)
    out = open(folder / f"{service}-{os.getpid()}.jsonl", "a", encoding="utf-8")  # noqa: SIM115  (closed by shutdown)
    return ConsoleSpanExporter(service_name=service, out=out, formatter=lambda span: span.to_json(indent=None) + "\n")


_KINDS: list[Any] = []
_RESOURCES: dict[str, Any] = {}


def _readable(recs: list[Rec], service: str) -> list[Any]:
    """SDK ``ReadableSpan`` objects for recorded tuples (export thread)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags

    if not _KINDS:
        _KINDS.extend([SpanKind.INTERNAL, SpanKind.PRODUCER, SpanKind.CONSUMER])
    resource = _RESOURCES.get(service)
    if resource is None:
        resource = _RESOURCES[service] = Resource.create({"service.name": service, "process.pid": os.getpid()})
    scope = InstrumentationScope("rtaudit.workers.tracing")
    sampled = TraceFlags(TraceFlags.SAMPLED)
    out = []
    for name, kind, trace_id, span_id, parent_id, start, end_, attrs, links in recs:
        out.append(ReadableSpan(
            name=name, context=SpanContext(trace_id, span_id, False, sampled),
            parent=SpanContext(trace_id, parent_id, True, sampled) if parent_id else None,
            resource=resource, attributes=attrs, kind=_KINDS[kind], start_time=start, end_time=end_,
            links=[Link(SpanContext(t, s, True, sampled)) for t, s in links] if links else (),
            instrumentation_scope=scope,
        ))
    return out
