"""The client commands of ``rtaudit``: ``submit`` (publish files, wait for their verdicts and print their
reasons whole) and ``verdicts`` (follow audit.verdicts); registered on the app by :mod:`rtaudit.cli.main`."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console

from rtaudit.cli.common import ConfigOpt, console, fail, settings_or_exit

if TYPE_CHECKING:
    from rtaudit.schemas.messages import AuditRequest, Verdict
    from rtaudit.workers.settings import Settings


def _fail(message: str, code: int = 1) -> typer.Exit:
    """One red line on stderr (:func:`rtaudit.cli.common.fail`); here the default code is 1."""
    return fail(message, code)


def _missing_hint(s) -> str:
    """Why verdicts may not come: roles with no running worker, else the fleet is slow."""
    from rtaudit.workers.roles import ROLES
    from rtaudit.workers.kafka import groups_without_members

    idle = groups_without_members(s, [f"rtaudit-{r}" for r in ROLES])
    if idle:
        roles = ", ".join(g.removeprefix("rtaudit-") for g in idle)
        fix = "start the fleet with `rtaudit up`" if s.bootstrap_servers is None else "start those workers (`rtaudit worker ROLE`)"
        return f"no {roles} worker running on {s.bootstrap}: {fix}"
    if idle is None:
        return f"is the fleet running on {s.bootstrap}? `rtaudit up` starts it; else wait longer (--wait)"
    return "the fleet is running but has not answered yet: wait longer (--wait) or read the worker logs"


#: the request schema's bounds on ``slo_ms`` (:class:`rtaudit.schemas.messages.AuditRequest`), ms.
MAX_SLO_MS = 3_600_000


def _timing(slo: int | None, deadline: str | None, now: int | None = None) -> dict[str, int]:
    """``slo_ms`` / ``deadline_ms`` fields for every request from ``--slo`` / ``--deadline``; a value outside
    the schema's bounds, a deadline in the past or more than :data:`MAX_SLO_MS` ahead, an unreadable time
    or both options exit 2 with one line."""
    from rtaudit.engine.clock import now_ms

    if slo is not None and deadline is not None:
        raise _fail("give --slo or --deadline, not both (a deadline wins over an SLO)", 2)
    if slo is not None:
        if not 1 <= slo <= MAX_SLO_MS:
            raise _fail(f"--slo {slo}: an SLO is 1 to {MAX_SLO_MS} ms (1 h), the request schema's bounds", 2)
        return {"slo_ms": slo}
    if deadline is None:
        return {}
    now = now_ms() if now is None else now
    at = _deadline_ms(deadline)
    if at <= now:
        raise _fail(f"--deadline {deadline} is {(now - at) / 1000:.1f} s in the past: give a time after now", 2)
    if at - now > MAX_SLO_MS:
        raise _fail(f"--deadline {deadline} is {(at - now) / 1000:.0f} s ahead: at most {MAX_SLO_MS // 1000} s (1 h), "
                    "like --slo", 2)
    return {"deadline_ms": at}


def _deadline_ms(value: str) -> int:
    """Epoch ms of ``--deadline``: digits are epoch ms; else ISO 8601 with a time zone."""
    from datetime import datetime

    if value.isdigit():
        return int(value)
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise _fail(f"--deadline {value!r}: not a time; give ISO 8601 with a time zone (2026-12-05T16:00:00Z) "
                    "or epoch ms", 2) from None
    if when.tzinfo is None:
        raise _fail(f"--deadline {value}: give a time zone (Z or +01:00): the fleet's clocks are UTC epoch ms", 2)
    return int(when.timestamp() * 1000)


def reason_lines(v: "Verdict", width: int | None = None) -> list[str]:
    """Every reason of the verdict ``v`` whole, one ``  reason: ...`` paragraph each, wrapped at ``width``
    columns (default: the terminal's, ``$COLUMNS``, at least 40); the verdict line itself cuts its evidence short."""
    import shutil
    import textwrap

    width = max(40, width or shutil.get_terminal_size().columns)
    return [line for reason in v.reasons for line in textwrap.wrap(
        reason, width, initial_indent="  reason: ", subsequent_indent=" " * 10, break_long_words=True, break_on_hyphens=False)]


def earlier_verdict_lines(v: "Verdict", sent_ms: dict[str, int]) -> list[str]:
    """A note when ``v`` was decided before its request was sent now (``sent_ms``: request id → the
    ``created_at_ms`` this submit stamped): the id was judged already, and the fleet keeps the first verdict of an
    id (replay protection), so the content just sent was not judged; ``[]`` otherwise."""
    sent = sent_ms.get(v.request_id)
    if sent is None or v.decided_at_ms >= sent:
        return []
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v.decided_at_ms / 1000))
    return [f"    note: this is the verdict of an earlier request with id {v.request_id!r} (decided {at}); an id is "
            "judged once, so what you sent now was not judged: send new content under a new request_id"]


def _requests(s: Settings, paths: list[Path], uris: list[str], tenant: str, extra: dict[str, str]) -> list[AuditRequest]:
    """The requests of ``--uri`` values and files; a bad one exits 2 with one line naming it (a ``.jsonl``
    file: a line per bad line of it, :class:`rtaudit.workers.client.BadLines`)."""
    from pydantic import ValidationError

    from rtaudit.schemas.codec import validation_summary
    from rtaudit.schemas.errors import AuditError
    from rtaudit.workers.client import request_from_path, request_from_uri

    requests = []
    for u in uris:
        try:
            requests.append(request_from_uri(u, tenant, **extra))
        except ValidationError as exc:
            raise _fail(f"--uri {u}: {validation_summary(exc)}", 2) from None
    for p in paths:
        try:
            requests += request_from_path(p, tenant, media=s.media.policy(), **extra)
        except OSError as exc:
            raise _fail(f"{p}: {exc.strerror or exc}", 2) from None
        except AuditError as exc:
            raise _fail(exc.message if str(p) in exc.message else f"{p}: {exc.message}", 2) from None
        except ValidationError as exc:  # e.g. an empty file: a request needs text or media
            raise _fail(f"{p}: {validation_summary(exc)}", 2) from None
        except ValueError as exc:
            raise _fail(str(exc) if str(p) in str(exc) else f"{p}: {exc}", 2) from None
    return requests


def submit(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="text files (UTF-8), .jsonl requests, images, audio or video (judged by content: .png, .gif, .mp3, .wav, .mp4, ...)")] = None,
    uri: Annotated[Optional[list[str]], typer.Option("--uri", help="an image by reference, file:// or http(s):// (repeatable): the fleet "
                                                     "fetches it if \\[media] allowed_file_roots / allowed_http_hosts allow it")] = None,
    tenant: Annotated[str, typer.Option(help="tenant id")] = "default",
    priority: Annotated[Optional[str], typer.Option(help="high | normal | low")] = None,
    wait: Annotated[float, typer.Option(help="seconds to wait for the verdicts (0: don't)")] = 0.0,
    slo: Annotated[Optional[int], typer.Option("--slo", metavar="MS", help="the requests' SLO in ms from their creation "
                                               f"(slo_ms, 1-{MAX_SLO_MS}; default: the tenant's)")] = None,
    deadline: Annotated[Optional[str], typer.Option("--deadline", metavar="TIME", help="the requests' absolute deadline "
                                                    "(deadline_ms): ISO 8601 with a time zone (2026-12-05T16:00:00Z) or epoch ms; "
                                                    "within the next hour")] = None,
    config: ConfigOpt = None,
) -> None:
    """Publish files (and --uri images by reference) to audit.requests ("submitted ID" once the
    broker acknowledged each); optionally wait and print their verdicts, each with its reasons whole
    (wrapped). --slo or --deadline applies to every request (.jsonl ones too). An empty file of any kind is refused, and
    a .jsonl file with bad lines (each is named, up to 20): nothing is sent. Exit 1 when the broker, the topics, an
    acknowledgement or a verdict is missing (one line says what and how to fix it), 2 for a bad file or option."""
    from rtaudit.topics.catalog import REQUESTS, VERDICTS
    from rtaudit.workers.client import AuditClient, DeliveryError, VerdictTimeout, verdict_reader
    from rtaudit.tools.demo.corpus import verdict_line
    from rtaudit.workers.kafka import ClusterError, check_cluster

    s = settings_or_exit(config)
    extra = {"priority": priority} if priority else {}
    if not paths and not uri:
        raise _fail("nothing to submit: give files, or --uri for media by reference", 2)
    timing = _timing(slo, deadline)
    requests = _requests(s, paths or [], uri or [], tenant, extra)
    requests = [r.model_copy(update=timing) for r in requests]  # .jsonl requests too
    counts = Counter(r.request_id for r in requests)
    repeated = [(rid, n) for rid, n in counts.items() if n > 1]
    if repeated:  # fusion gives one verdict per request id: the later requests would never be judged
        rid, n = repeated[0]
        raise _fail(f"request_id {rid!r} appears {n} times in what you submit"
                    f"{f' (and {len(repeated) - 1} more ids repeat)' if len(repeated) > 1 else ''}: "
                    "give each request its own id (one verdict is made per id)", 2)
    try:
        check_cluster(s, [REQUESTS, VERDICTS] if wait else [REQUESTS])
        reader = verdict_reader(s) if wait else None
    except ClusterError as exc:
        raise _fail(str(exc)) from None
    try:
        client = AuditClient(s, on_delivered=lambda rid: console.print(f"submitted {rid}", markup=False, highlight=False))
        for r in requests:
            client.submit(r)
        try:
            client.flush()
        except DeliveryError as exc:
            raise _fail(f"{exc}: {'is `rtaudit up` still running?' if s.bootstrap_servers is None else 'check the broker'}") from None
        if reader is not None:
            sent_ms = {r.request_id: r.created_at_ms for r in requests}
            try:
                reader.wait_all({r.request_id for r in requests}, wait,
                                on_record=lambda v, a: print("\n".join([verdict_line(v, a), *reason_lines(v),
                                                                        *earlier_verdict_lines(v, sent_ms)]), flush=True))
            except VerdictTimeout as exc:
                raise _fail(f"{exc}: {_missing_hint(s)}") from None
    finally:
        if reader is not None:
            reader.close()


def verdicts(
    config: ConfigOpt = None,
    from_beginning: Annotated[bool, typer.Option(help="print verdicts already on the topic too (with their own latency, decided - created)")] = False,
    count: Annotated[int, typer.Option(help="stop after N verdicts (0: follow forever)")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print each verdict as JSON")] = False,
    raw: Annotated[bool, typer.Option("--raw", help="also print repeated verdicts of a request id (the fleet is at-least-once)")] = False,
    explanations: Annotated[bool, typer.Option("--explanations", help="also print the explain role's heatmap "
                                               "records (audit.explanations), joined by request id")] = False,
) -> None:
    """Follow audit.verdicts and print one line per request id (repeats dropped unless --raw).

    Latency in brackets: for a verdict decided after this command started, created to arrival
    here; for an older one (--from-beginning), its own latency (decided - created).
    With --explanations, each evidence record of the explain role prints as an indented line
    naming its request id (it comes after its verdict: the role explains decided requests)."""
    from rtaudit.cli.explain import explanation_line
    from rtaudit.workers.client import explanation_reader, verdict_reader
    from rtaudit.tools.demo.corpus import verdict_line
    from rtaudit.workers.kafka import ClusterError
    from rtaudit.engine.clock import now_ms
    from rtaudit.topics.catalog import VERDICTS

    s = settings_or_exit(config)
    try:
        reader = verdict_reader(s, dedupe=not raw)
        evidence = explanation_reader(s, dedupe=not raw) if explanations else None
    except ClusterError as exc:
        raise _fail(str(exc)) from None
    started = now_ms()
    since = 0 if from_beginning else started - 1000
    n = 0
    Console(stderr=True).print(
        f"waiting for verdicts on {VERDICTS} at {s.bootstrap} ({'from the beginning' if from_beginning else 'new ones; --from-beginning for older'}"
        f"{f', stop after {count}' if count else ''}; Ctrl-C stops)", highlight=False, markup=False)
    with reader:
        try:
            while not (count and n >= count):
                # with --explanations, both topics in turns of half a second
                for v, arrived in reader.stream(timeout_s=0.5 if evidence else None):
                    if v.decided_at_ms < since:
                        continue
                    live = v.decided_at_ms >= started
                    print(v.model_dump_json(exclude_none=True) if as_json else verdict_line(v, arrived if live else None), flush=True)
                    n += 1
                    if count and n >= count:
                        break
                for e, _ in evidence.stream(timeout_s=0.05, idle_s=0.05) if evidence else ():
                    if e.produced_at_ms >= since:
                        print(e.model_dump_json(exclude_none=True) if as_json else explanation_line(e), flush=True)
        except KeyboardInterrupt:
            pass
        finally:
            if evidence is not None:
                evidence.close()
        if reader.duplicates_dropped:
            Console(stderr=True).print(f"{reader.duplicates_dropped} repeated verdicts dropped (--raw shows them)", highlight=False)

