"""``rtaudit dlq``: read ``audit.dlq``, the records no worker could process, with their reasons.

Every record is shown (the same bad input sent twice is two DLQ records); by default what is
on the topic now, oldest first (by failure time), then the command exits; ``--follow`` keeps reading. A line
holds when it failed, the role that refused it, the error code and message, the request id
(or the source record's key), where it came from (topic[partition]@offset) and its size; with
``--original`` the first bytes of the original record too, escaped so that no control byte
reaches the terminal. Who may read ``audit.dlq``: docs/security.md "Who sees what".
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Annotated

import typer

from rtaudit.schemas.messages import DLQRecord
from rtaudit.cli.common import ConfigOpt, fail, settings_or_exit

#: bytes of the original record ``--original`` prints.
ORIGINAL_PREVIEW_BYTES = 120
#: characters of a request id or key a line prints.
WHO_CHARS = 64


def printable(text: str, limit: int | None = None) -> str:
    """``text`` with every character the terminal would act on (ESC, CR, NUL, line breaks...) escaped
    Python-style (``\\x1b``), cut to ``limit`` characters with ``…``: keys and ids come from producers."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return out if limit is None or len(out) <= limit else out[:limit] + "…"


def dlq_line(r: DLQRecord, original: bool = False) -> str:
    """One readable line for a DLQ record (UTC time to the ms; ``original``: a preview of its
    first :data:`ORIGINAL_PREVIEW_BYTES` bytes, Python-escaped)."""
    when = dt.datetime.fromtimestamp(r.failed_at_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    who = printable(r.request_id or (f"key={r.source_key}" if r.source_key else "-"), WHO_CHARS)
    size = f"{r.original_size_bytes} B" + (" (truncated)" if r.original_truncated else "")
    line = f"{when} {r.role:7} {r.error_code:20} {who:34} {r.source_topic}[{r.source_partition}]@{r.source_offset} {size}: {printable(r.error)}"
    if original:
        try:
            raw = base64.b64decode(r.original_b64, validate=True)
        except ValueError:
            raw = b"<original not readable as base64>"
        preview = repr(raw[:ORIGINAL_PREVIEW_BYTES])[2:-1]
        line += f"\n    original: {preview}{'…' if len(raw) > ORIGINAL_PREVIEW_BYTES else ''}"
    return line


def dlq(
    config: ConfigOpt = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep reading new records (until Ctrl-C)")] = False,
    count: Annotated[int, typer.Option(help="stop after N records (0: all)")] = 0,
    role: Annotated[list[str] | None, typer.Option(help="only records refused by this role (repeatable)")] = None,
    code: Annotated[list[str] | None, typer.Option(help="only this error code, e.g. schema_violation (repeatable)")] = None,
    request_id: Annotated[str | None, typer.Option("--request-id", help="only the records of this request id")] = None,
    original: Annotated[bool, typer.Option("--original", help="also print the first bytes of each original record")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print each record as JSON (the original in base64)")] = False,
) -> None:
    """Read audit.dlq: what no worker could process, why, and where it came from (oldest first;
    exits once nothing more came for 2 s unless --follow)."""
    from rtaudit.workers.client import dlq_reader
    from rtaudit.workers.kafka import ClusterError

    s = settings_or_exit(config)
    try:
        reader = dlq_reader(s)
    except ClusterError as exc:
        raise fail(str(exc)) from None
    roles, codes, n = set(role or ()), set(code or ()), 0
    with reader:
        try:
            # what the topic holds now, oldest first (its partitions are read side by side); with
            # --follow, records as they come (in each partition's order)
            records = reader.stream() if follow else sorted(_until_idle(reader, 2.0), key=lambda rec: rec[0].failed_at_ms)
            for r, _ in records:
                if (roles and r.role not in roles) or (codes and r.error_code not in codes) or (
                        request_id and request_id not in (r.request_id, r.source_key)):
                    continue
                print(r.model_dump_json(exclude_none=True) if as_json else dlq_line(r, original), flush=True)
                n += 1
                if count and n >= count:
                    break
        except KeyboardInterrupt:
            pass
    if not follow and not as_json:
        typer.echo(f"{n} DLQ record{'s' if n != 1 else ''}", err=True)


def _until_idle(reader, idle_s: float):
    """The reader's records until none came for ``idle_s`` seconds (what the topic holds now)."""
    import time

    last = time.monotonic()
    while time.monotonic() - last < idle_s:
        got = False
        for record in reader.stream(0.25, idle_s=0.25):
            got = True
            yield record
        if got:
            last = time.monotonic()
