"""The fuzz harness: mutated requests (:mod:`rtaudit.tools.fuzz.mutations`) through a real fleet.

1. A private embedded broker on a free loopback port, the topic catalogue, and a
   supervised fleet of the router, the text worker (``lexical`` model by default: the
   text model is not what is fuzzed) and fusion, from a settings file written for the
   run (tenant ``fuzz``: short SLO; one allowed ``file://`` root holding an image and
   symlinks out of it).
2. Readiness: a text request comes back as a complete verdict.
3. Every case is produced to ``audit.requests`` as raw key/value bytes; the delivery
   report gives its partition and offset.
4. ``audit.verdicts`` and ``audit.dlq`` are read from the beginning until every case is
   answered (a verdict under its ``verdict_id``, or a DLQ record when no id is readable)
   or ``timeout_s`` passes, then drained to their end.
5. Per case: verdicts (by any id the case carries), DLQ records (by source position in
   ``audit.requests``, or by request id for those a modality worker wrote). Crashes are
   worker processes that exited (exit status), supervisor restarts, and Faust agents that
   crashed in-process (their log line). Leaks: every inline media payload sent
   (``data_b64``) is searched for in the verdicts and the worker logs: only the DLQ's
   original bytes may hold it.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from rich.table import Table

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.codec import decode
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.messages import AuditRequest, DLQRecord, Verdict
from rtaudit.topics.catalog import DLQ, REQUESTS, VERDICTS
from rtaudit.tools.fleet.broker import is_listening
from rtaudit.workers.client import AuditClient, verdict_reader
from rtaudit.tools.fleet.local import Fleet, describe_exit
from rtaudit.tools.fuzz.mutations import KINDS, TENANT, TINY_PNG, Case, generate
from rtaudit.workers.kafka import consumer_config, producer_config
from rtaudit.workers.settings import Settings, load_settings
from rtaudit.tools.fleet.supervision import RestartPolicy

log = logging.getLogger(__name__)
ROLES = ("router", "text", "fusion")
#: the fuzz tenant's SLO, ms: an image part (no image worker here) is answered at the deadline.
FUZZ_SLO_MS = 3000
#: log lines of a worker that crashed without exiting (a Faust agent that raised).
_CRASH_LINE = re.compile(rb"Crashed reason=|Traceback \(most recent call last\)")


@dataclass(frozen=True)
class FuzzOptions:
    """One run. ``out_dir``: each run writes a new folder in it (settings, state, logs);
    ``timeout_s``: longest wait for answers after the last send, seconds."""

    count: int = 10_000
    seed: int = 0
    out_dir: Path = Path(".rtaudit/fuzz")
    timeout_s: float = 120.0
    text_model: str = "lexical"
    ready_timeout_s: float = 180.0


@dataclass
class Outcome:
    """What came back for one case."""

    verdict_ids: Counter[str] = field(default_factory=Counter)
    dlq_codes: list[str] = field(default_factory=list)
    dlq_without_reason: int = 0

    @property
    def verdicts(self) -> int:
        return sum(self.verdict_ids.values())


@dataclass
class KindRow:
    """Totals of one mutation kind (or of the whole run)."""

    kind: str
    sent: int = 0
    verdict: int = 0
    dlq: int = 0
    both: int = 0
    neither: int = 0
    #: an id was readable (value or key) but no verdict came under it.
    verdict_missing: int = 0
    #: a DLQ record without an error code or message.
    dlq_without_reason: int = 0
    #: verdict records beyond the first for one id (at-least-once repeats; the client drops them).
    repeats: int = 0
    codes: Counter[str] = field(default_factory=Counter)

    def add(self, case: Case, out: Outcome) -> None:
        self.sent += 1
        got_verdict, got_dlq = out.verdicts > 0, bool(out.dlq_codes)
        self.verdict += got_verdict
        self.dlq += got_dlq
        self.both += got_verdict and got_dlq
        self.neither += not got_verdict and not got_dlq
        self.verdict_missing += case.verdict_id is not None and out.verdict_ids[case.verdict_id] == 0
        self.dlq_without_reason += out.dlq_without_reason
        self.repeats += sum(n - 1 for n in out.verdict_ids.values() if n > 1)
        self.codes.update(out.dlq_codes)


@dataclass
class FuzzReport:
    """The run's result: a row per kind and the total, crashes, and the cases that failed."""

    seed: int
    rows: list[KindRow]
    total: KindRow
    #: worker processes that exited, ``"router-0: exit 1"``.
    exits: list[str]
    #: role → supervisor restarts.
    restarts: dict[str, int]
    #: role → crash lines (tracebacks, crashed agents) in its log.
    crash_lines: dict[str, int]
    #: cases with neither a verdict nor a DLQ record, or a readable id without a verdict (first 20).
    failures: list[str]
    send_s: float
    answer_s: float
    log_dir: Path
    #: distinct inline media payloads sent (``data_b64`` strings).
    media_probes: int = 0
    #: place (``verdicts``, ``router-0 log``…) → media payloads found there; must be empty.
    media_leaks: dict[str, int] = field(default_factory=dict)

    @property
    def crashes(self) -> int:
        return len(self.exits) + sum(self.restarts.values()) + sum(self.crash_lines.values())

    @property
    def ok(self) -> bool:
        t = self.total
        return (t.neither == 0 and t.verdict_missing == 0 and t.dlq_without_reason == 0 and self.crashes == 0
                and not self.media_leaks)


def prepare_media_root(root: Path) -> Path:
    """The run's one allowed ``file://`` root: ``tiny.png`` inside, ``escape-link`` (a symlink
    to ``/etc/passwd``) and ``dir-link`` (to ``/etc``) pointing out of it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tiny.png").write_bytes(TINY_PNG)
    for name, target in (("escape-link", "/etc/passwd"), ("dir-link", "/etc")):
        link = root / name
        if not link.is_symlink():
            link.symlink_to(target)
    return root


def write_config(path: Path, port: int, state_dir: Path, media_root: Path, text_model: str) -> Path:
    """The fleet's settings file for a run (loopback embedded broker on ``port``)."""
    path.write_text(f"""# written by rtaudit fuzz
embedded_port = {port}
state_dir = "{state_dir}"
metrics_port = 0
inference_threads = 1
text_model = "{text_model}"
fusion_grace_ms = 250

[media]
allowed_file_roots = ["{media_root}"]
allowed_http_hosts = ["media.example.com"]

[tenants.{TENANT}]
version = "fuzz-1"
slo_ms = {FUZZ_SLO_MS}
on_incomplete = "review"
on_rejected = "review"
""")
    return path


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def private_settings(config: Path, port: int) -> Settings:
    """The run's settings from ``config`` on the private ``port``: the port wins over
    ``RTAUDIT_EMBEDDED_PORT`` (which the README has users export, and which overrides a settings
    file), and no exported ``KAFKA_BOOTSTRAP_SERVERS`` points it at another cluster, so the fuzz
    fleet never attaches to a fleet already running."""
    return load_settings(config).model_copy(update={"embedded_port": port, "bootstrap_servers": None})


@contextmanager
def fuzz_fleet(opts: FuzzOptions, run_dir: Path, on_event: Callable[[str], None] | None = None) -> Iterator[tuple[Fleet, Settings]]:
    """A supervised router + text + fusion fleet on a private embedded broker, ready;
    its settings file, state and logs in ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    while is_listening("127.0.0.1", port):
        port = free_port()
    config = write_config(run_dir / "rtaudit.toml", port, run_dir / "state", prepare_media_root(run_dir / "media"),
                          opts.text_model)
    settings = private_settings(config, port)
    fleet = Fleet(settings, config=config, roles=ROLES, log_dir=run_dir / "logs", supervise=True,
                  policy=RestartPolicy(base_s=0.5, cap_s=5.0), on_event=on_event,
                  env={"RTAUDIT_STATE_DIR": str(run_dir / "state"), "RTAUDIT_METRICS_PORT": "0",
                       "RTAUDIT_EMBEDDED_PORT": str(port)})
    fleet.launch()
    try:
        wait_text_ready(fleet, settings, opts.ready_timeout_s)
        yield fleet, settings
    finally:
        fleet.stop()


def wait_text_ready(fleet: Fleet, settings: Settings, timeout_s: float) -> float:
    """Send a text request every 15 s until one comes back complete; seconds waited."""
    started = time.monotonic()
    client = AuditClient(settings)
    with verdict_reader(settings) as reader:
        while time.monotonic() - started < timeout_s:
            if fleet.exited():
                raise RuntimeError(f"workers exited: {fleet.exited()}; logs in {fleet.log_dir}")
            probe = AuditRequest(request_id=f"fzprobe-{uuid.uuid4().hex[:10]}", tenant_id=TENANT,
                                 created_at_ms=now_ms(), slo_ms=60_000, text="fuzz probe")
            client.submit(probe)
            client.flush()
            got = reader.wait_for({probe.request_id}, timeout_s=15.0)
            if probe.request_id in got and got[probe.request_id][0].complete:
                return time.monotonic() - started
    raise RuntimeError(f"no complete verdict for a text probe within {timeout_s} s; logs in {fleet.log_dir}")


def send(settings: Settings, cases: list[Case]) -> dict[tuple[int, int], int]:
    """Produce every case to ``audit.requests``; ``(partition, offset)`` → case index.

    Raises:
        RuntimeError: a case was not acknowledged by the broker.
    """
    positions: dict[tuple[int, int], int] = {}
    failed: list[str] = []
    producer = Producer(producer_config(settings))

    def delivered(index: int):
        def on_delivery(err, msg) -> None:
            if err is not None:
                failed.append(f"case {index}: {err.str()}")
            else:
                positions[(msg.partition(), msg.offset())] = index
        return on_delivery

    for case in cases:
        while True:
            try:
                producer.produce(REQUESTS, key=case.key, value=case.value, on_delivery=delivered(case.index))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(60)
    if left or failed:
        raise RuntimeError(f"{left + len(failed)} fuzz cases not acknowledged (first: {failed[:1]})")
    return positions


class AnswerReader:
    """Reads ``audit.verdicts`` and ``audit.dlq`` whole (no group: assigned from the start)."""

    def __init__(self, settings: Settings) -> None:
        self.consumer = Consumer(consumer_config(
            settings, f"rtaudit-fuzz-{uuid.uuid4().hex[:8]}", **{"enable.partition.eof": True}))
        md = self.consumer.list_topics(timeout=10)
        self.partitions = [TopicPartition(t, p, OFFSET_BEGINNING) for t in (VERDICTS, DLQ) for p in md.topics[t].partitions]
        self.consumer.assign(self.partitions)
        self.at_end: set[tuple[str, int]] = set()
        self.undecodable = 0
        #: every verdict value as read, for the leak check.
        self.verdict_values: list[bytes] = []

    def poll(self, timeout_s: float) -> list[Verdict | DLQRecord]:
        out: list[Verdict | DLQRecord] = []
        for msg in self.consumer.consume(2000, timeout_s):
            where = (msg.topic(), msg.partition())
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    self.at_end.add(where)
                continue
            self.at_end.discard(where)
            if msg.topic() == VERDICTS:
                self.verdict_values.append(msg.value() or b"")
            try:
                out.append(decode(msg.value(), Verdict if msg.topic() == VERDICTS else DLQRecord))
            except AuditError:
                self.undecodable += 1
        return out

    def all_at_end(self) -> bool:
        return len(self.at_end) == len(self.partitions)

    def close(self) -> None:
        self.consumer.close()


def collect(settings: Settings, cases: list[Case], positions: dict[tuple[int, int], int],
            timeout_s: float) -> tuple[list[Outcome], bytes]:
    """Read answers until every case is answered or ``timeout_s`` passes, then to the end.
    Returns the outcomes and every verdict value read (newline-joined)."""
    by_id = {rid: case.index for case in cases for rid in case.ids}
    outcomes = [Outcome() for _ in cases]
    waiting = set(range(len(cases)))

    def answered(i: int) -> bool:
        case, out = cases[i], outcomes[i]
        if case.verdict_id is not None:
            return out.verdict_ids[case.verdict_id] > 0
        return out.verdicts > 0 or bool(out.dlq_codes)

    reader = AnswerReader(settings)
    try:
        end = time.monotonic() + timeout_s
        quiet_since = None
        while time.monotonic() < end:
            for record in reader.poll(0.5):
                if isinstance(record, Verdict):
                    i = by_id.get(record.request_id)
                    if i is not None:
                        outcomes[i].verdict_ids[record.request_id] += 1
                    continue
                if record.source_topic == REQUESTS:
                    i = positions.get((record.source_partition, record.source_offset))
                else:
                    i = by_id.get(record.request_id or "")
                if i is not None:
                    outcomes[i].dlq_codes.append(record.error_code or "<none>")
                    outcomes[i].dlq_without_reason += not (record.error_code and record.error.strip())
            waiting = {i for i in waiting if not answered(i)}
            if not waiting and reader.all_at_end():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 2.0:  # late DLQ records of answered cases
                    break
            else:
                quiet_since = None
    finally:
        reader.close()
    return outcomes, b"\n".join(reader.verdict_values)


def media_probes(cases: list[Case], min_chars: int = 16) -> set[bytes]:
    """The inline media (``data_b64`` strings of at least ``min_chars``) of every case whose
    value parses: none of them may show up in a verdict or a worker log."""
    probes: set[bytes] = set()
    for case in cases:
        try:
            body = orjson.loads(case.value)
        except orjson.JSONDecodeError:
            continue
        media = body.get("media") if isinstance(body, dict) else None
        for item in media if isinstance(media, list) else ():
            data = item.get("data_b64") if isinstance(item, dict) else None
            if isinstance(data, str) and len(data) >= min_chars:
                probes.add(data.encode())
    return probes


def leaks(probes: set[bytes], verdicts: bytes, log_dir: Path) -> dict[str, int]:
    """Where media bytes showed up: ``{"verdicts": n, "<role> log": n}`` (distinct probes found)."""
    found: dict[str, int] = {}
    places = {"verdicts": verdicts, **{f"{p.stem} log": p.read_bytes() for p in sorted(log_dir.glob("*.log"))}}
    for place, blob in places.items():
        n = sum(1 for probe in probes if probe in blob)
        if n:
            found[place] = n
    return found


def crash_lines(log_dir: Path) -> dict[str, int]:
    """role → lines in its logs that show a crash (traceback, crashed agent)."""
    out: Counter[str] = Counter()
    for path in sorted(log_dir.glob("*.log")):
        n = len(_CRASH_LINE.findall(path.read_bytes()))
        if n:
            out[path.stem.rsplit("-", 1)[0]] += n
    return dict(out)


def summarize(cases: list[Case], outcomes: list[Outcome]) -> tuple[list[KindRow], KindRow, list[str]]:
    rows = {kind: KindRow(kind) for kind in KINDS}
    total = KindRow("total")
    failures = []
    for case, out in zip(cases, outcomes):
        rows[case.kind].add(case, out)
        total.add(case, out)
        if (not out.verdicts and not out.dlq_codes) or (case.verdict_id and not out.verdict_ids[case.verdict_id]):
            what = "neither" if not out.verdicts and not out.dlq_codes else f"no verdict under {case.verdict_id}"
            failures.append(f"#{case.index} {case.kind} ({case.detail}): {what}")
    return [r for r in rows.values() if r.sent], total, failures


def run(opts: FuzzOptions, on_event: Callable[[str], None] | None = None) -> FuzzReport:
    """Generate, send and account for ``opts.count`` cases (see the module doc)."""
    say = on_event or (lambda msg: log.info("%s", msg))
    tag = uuid.uuid4().hex[:6]
    run_dir = opts.out_dir.resolve() / f"{time.strftime('%Y%m%d-%H%M%S')}-{tag}"
    say(f"starting the embedded broker, router, text and fusion; logs in {run_dir / 'logs'}")
    with fuzz_fleet(opts, run_dir, on_event) as (fleet, settings):
        cases = generate(opts.seed, opts.count, now_ms(), run_dir / "media", tag)
        say(f"fleet ready; sending {len(cases)} cases (seed {opts.seed}, {sum(len(c.value) for c in cases) / 1e6:.1f} MB)")
        started = time.monotonic()
        positions = send(settings, cases)
        send_s = time.monotonic() - started
        say(f"sent in {send_s:.1f} s; reading {VERDICTS} and {DLQ}")
        outcomes, verdict_values = collect(settings, cases, positions, opts.timeout_s)
        answer_s = time.monotonic() - started
        with fleet._lock:  # noqa: SLF001 - a snapshot of the slots before stop() clears them
            exits = [f"{s.name}: {describe_exit(s.proc.returncode)}" for s in fleet.slots if s.proc.poll() is not None]
        restarts = {role: n for role, n in fleet.restarts.items() if n}
        lines = crash_lines(fleet.log_dir)
    probes = media_probes(cases)
    leaked = leaks(probes, verdict_values, run_dir / "logs")
    rows, total, failures = summarize(cases, outcomes)
    return FuzzReport(opts.seed, rows, total, exits, restarts, lines, failures[:20], send_s, answer_s,
                      run_dir / "logs", len(probes), leaked)


def tables(report: FuzzReport) -> list[Table]:
    """The summary: a row per mutation kind and the total, then crashes and restarts."""
    t = Table("kind", "sent", "verdict", "DLQ", "both", "neither", "no verdict, id readable", "DLQ no reason",
              "repeats", "DLQ codes (top 3)", title=f"rtaudit fuzz: {report.total.sent} requests, seed {report.seed}")
    t.columns[0].no_wrap = True
    for row in [*report.rows, report.total]:
        codes = " ".join(f"{c}:{n}" for c, n in row.codes.most_common(3))
        bad = lambda n: f"[red]{n}[/red]" if n else "0"  # noqa: E731
        t.add_row(row.kind, str(row.sent), str(row.verdict), str(row.dlq), str(row.both), bad(row.neither),
                  bad(row.verdict_missing), bad(row.dlq_without_reason), str(row.repeats), codes,
                  end_section=row is report.rows[-1])
    c = Table("worker exits", "supervisor restarts", "crash lines in logs", "media bytes in verdicts/logs",
              "sent in", "all answered in", title="Crashes and leaks")
    c.add_row(", ".join(report.exits) or "0", ", ".join(f"{r} {n}" for r, n in report.restarts.items()) or "0",
              ", ".join(f"{r} {n}" for r, n in report.crash_lines.items()) or "0",
              (", ".join(f"{w} {n}" for w, n in report.media_leaks.items()) or "0") + f" of {report.media_probes} payloads",
              f"{report.send_s:.1f} s", f"{report.answer_s:.1f} s")
    return [t, c]
