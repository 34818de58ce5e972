"""The ``rtaudit`` command line (Typer)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from rtaudit.workers.cli_common import fail, settings_or_exit
from rtaudit.workers.settings import Settings

app = typer.Typer(help="rtaudit: real-time multimodal content moderation on Kafka.", no_args_is_help=True)
topics_app = typer.Typer(help="Create or verify the topic catalogue.", no_args_is_help=True)
schemas_app = typer.Typer(help="Export or check the JSON Schema files.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")
app.add_typer(schemas_app, name="schemas")
text_app = typer.Typer(help="Build and train the text models (engine/text).", no_args_is_help=True)
app.add_typer(text_app, name="text")
from rtaudit.workers.cli_control import control_app  # noqa: E402  (rtaudit control rollout|policy|priority|status|history)
app.add_typer(control_app, name="control")
from rtaudit.workers.cli_model import model_app  # noqa: E402  (rtaudit model package|publish|list|verify)
app.add_typer(model_app, name="model")
#: ../shared/data beside the repository, the default for --data.
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DataOpt = Annotated[Path, typer.Option("--data", help="root of the labeled data (holds text/davidson, text/olid, ...)")]
console = Console(width=max(140, Console().width))
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="settings file (default: $RTAUDIT_CONFIG or ./rtaudit.toml)")]


def _settings(config: Path | None) -> Settings:
    return settings_or_exit(config)


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


@app.command()
def broker(
    port: Annotated[Optional[int], typer.Option(help="loopback port (default: embedded_port of the settings)")] = None,
    config: ConfigOpt = None,
) -> None:
    """Run the embedded tansu broker in the foreground (memory-only) until Ctrl-C or SIGTERM;
    it stops with this command whatever ends it. Refuses a port another process holds."""
    from rtaudit.workers.broker import EmbeddedBroker
    from rtaudit.workers.children import raise_keyboard_interrupt_on
    from rtaudit.workers.fleet_record import Claim, FleetRecord, new_run_id

    s = _settings(config)
    s = s.model_copy(update={"bootstrap_servers": None, "embedded_port": port or s.embedded_port})
    claim = _claim_or_exit(Claim(s, FleetRecord.ours(s, "broker", new_run_id(), None)))
    raise_keyboard_interrupt_on()
    try:
        with EmbeddedBroker(s.embedded_port) as b:
            console.print(f"embedded broker on {b.bootstrap}, pid {b.process.pid} (Ctrl-C stops it; all data is lost)")  # type: ignore[union-attr]
            try:
                code = b.process.wait()  # type: ignore[union-attr]
                console.print(f"[red]the broker exited ({code})[/red]")
                raise typer.Exit(1)
            except KeyboardInterrupt:
                pass
    finally:
        claim.release()


def _claim_or_exit(claim):  # type: ignore[no-untyped-def]
    """Take ``claim`` (:class:`rtaudit.workers.fleet_record.Claim`) or exit 1 with the one line that names
    the fleet or process holding the broker address and how to stop it."""
    from rtaudit.workers.fleet_record import FleetConflict

    try:
        return claim.acquire()
    except FleetConflict as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def _run_log_dir(s, run_id: str) -> Path:  # type: ignore[no-untyped-def]
    """``<state_dir>/logs/<run id>/``: one folder per run, never another run's files;
    ``<state_dir>/logs/latest`` points at the newest."""
    root = Path(s.state_dir) / "logs"
    log_dir = root / run_id
    log_dir.mkdir(parents=True, exist_ok=True)
    latest = root / "latest"
    try:
        tmp = root / f".latest-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_id)
        tmp.replace(latest)
    except OSError:
        pass
    return log_dir


def _start_supervised(s, config, replicas: dict[str, int], log_dir: Path):  # type: ignore[no-untyped-def]
    """A supervised :class:`rtaudit.workers.fleet.Fleet` that reports its progress on the console;
    started and ready, or exit 1 with the reason. SIGTERM and SIGHUP unwind like Ctrl-C."""
    from rtaudit.workers.children import raise_keyboard_interrupt_on
    from rtaudit.workers.fleet import Fleet, FleetNotReady
    from rtaudit.workers.metrics import serve

    raise_keyboard_interrupt_on()
    fleet = Fleet(s, config=config, replicas=replicas, log_dir=log_dir, supervise=True,
                  on_event=lambda msg: console.print(f"  {msg}", markup=False, highlight=False))
    if s.metrics_port:
        serve(s.metrics_port, s.metrics_host)
        console.print(f"  supervisor metrics (rtaudit_restarts_total) on {s.metrics_host}:{s.metrics_port}")
    started = time.monotonic()
    try:
        fleet.start()
    except FleetNotReady as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM or SIGHUP while starting: start() stopped what it started
        console.print("interrupted while starting: the fleet is stopped")
        raise typer.Exit(130) from None
    console.print(f"fleet ready in {time.monotonic() - started:.1f} s on {s.bootstrap} ({s.profile} profile); "
                  f"logs in {log_dir}")
    ports = [f"broker {s.bootstrap}"] + [f"{slot.name} {s.metrics_host}:{slot.metrics_port}" for slot in fleet.slots if slot.metrics_port]
    console.print(f"ports: {', '.join(ports)}{'' if s.metrics_port else ' (worker metrics off: metrics_port = 0)'}")
    return fleet


def _print_checks(checks) -> None:  # type: ignore[no-untyped-def]
    table = Table("topic", "state", "partitions")
    for c in checks:
        table.add_row(c.name, c.state, f"{c.partitions}/{c.expected_partitions}")
    console.print(table)


@topics_app.command("create")
def topics_create(config: ConfigOpt = None) -> None:
    """Create missing topics and verify partition counts (idempotent)."""
    from rtaudit.topics.admin import ensure_topics
    from rtaudit.topics.catalog import catalog

    from rtaudit.workers.kafka import client_config

    s = _settings(config)
    _print_checks(ensure_topics(client_config(s), catalog(s.partitions)))


@topics_app.command("verify")
def topics_verify(config: ConfigOpt = None) -> None:
    """Check that every topic exists with its partition count; exit 1 if not."""
    from rtaudit.topics.admin import ensure_topics
    from rtaudit.topics.catalog import catalog

    from rtaudit.workers.kafka import client_config

    s = _settings(config)
    checks = ensure_topics(client_config(s), catalog(s.partitions), create=False)
    _print_checks(checks)
    if any(c.state != "exists" for c in checks):
        raise typer.Exit(1)


@schemas_app.command("export")
def schemas_export() -> None:
    """Rewrite ``schemas/json/*.schema.json`` from the models."""
    from rtaudit.schemas.export import export

    for p in export():
        console.print(str(p))


@app.command()
def worker(role: Annotated[str, typer.Argument(help="router | text | image | ocr | fusion")]) -> None:
    """Run one worker in the foreground (same as ``faust -A workers.<role> worker -l info``)."""
    from rtaudit.workers.fleet import ROLES, faust_executable

    if role not in ROLES:
        raise typer.BadParameter(f"role must be one of {', '.join(ROLES)}")
    os.execv(faust_executable(), [faust_executable(), "-A", f"rtaudit.workers.{role}", "worker", "-l", "info", "--without-web"])


def _parse_replicas(values: list[str]) -> dict[str, int]:
    """``ROLE=N`` pairs; raises ``typer.BadParameter`` for an unknown role or N < 1."""
    from rtaudit.workers.fleet import ROLES

    out = {}
    for v in values:
        role, _, n = v.partition("=")
        if role not in ROLES:
            raise typer.BadParameter(f"unknown role {role!r} in {v!r}: roles are {', '.join(ROLES)}", param_hint="--replicas")
        if not n.isdigit() or int(n) < 1:
            raise typer.BadParameter(f"--replicas takes ROLE=N with N >= 1, got {v!r}", param_hint="--replicas")
        out[role] = int(n)
    return out


@app.command()
def up(
    config: ConfigOpt = None,
    replicas: Annotated[list[str], typer.Option("--replicas", "-r", help="ROLE=N, e.g. ocr=2")] = [],  # noqa: B006
) -> None:
    """Start the embedded broker (unless KAFKA_BOOTSTRAP_SERVERS is set), the topics and every worker;
    wait until a probe request gets a complete verdict; run until Ctrl-C or SIGTERM.

    Supervised: a worker that exits is restarted with backoff (each restart printed), the
    embedded broker too (with its topics and every worker); no child outlives this command.
    Refuses a broker address that another fleet or process holds (``rtaudit down`` stops one)."""
    from rtaudit.workers.fleet_record import Claim, FleetRecord, new_run_id

    s = _settings(config)
    parsed = _parse_replicas(replicas)
    run_id = new_run_id()
    log_dir = _run_log_dir(s, run_id)
    record = FleetRecord.ours(s, "fleet", run_id, log_dir)
    claim = _claim_or_exit(Claim(s, record))
    (log_dir / "fleet.json").write_text(json.dumps(dataclasses.asdict(record), indent=1))
    console.print(f"rtaudit up: run {run_id}, pid {os.getpid()}, {s.bootstrap} ({s.profile} profile), logs in {log_dir}")
    fleet = None
    try:
        fleet = _start_supervised(s, config, parsed, log_dir)
        console.print(f"Ctrl-C, `kill {os.getpid()}` or `rtaudit down` stops the fleet; a worker that exits is restarted")
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        console.print("stopping the fleet…")
    finally:
        if fleet is not None:
            fleet.stop()
            if fleet.restarts:
                console.print(f"restarts during the run: {fleet.restarts}")
        claim.release()


@app.command()
def down(
    config: ConfigOpt = None,
    port: Annotated[Optional[int], typer.Option(help="embedded broker port (default: embedded_port of the settings)")] = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for it to stop")] = 30.0,
) -> None:
    """Stop the rtaudit fleet (or broker) that holds the broker address: SIGTERM to its
    `rtaudit up`, which stops its workers and broker."""
    import signal as signals

    from rtaudit.workers.broker import is_listening
    from rtaudit.workers.fleet_record import read_claim

    s = _settings(config)
    if port is not None:
        s = s.model_copy(update={"bootstrap_servers": None, "embedded_port": port})
    owner = read_claim(s)
    if owner is None:
        busy = s.bootstrap_servers is None and is_listening("127.0.0.1", s.embedded_port)
        console.print(f"no rtaudit fleet holds {s.bootstrap}{' (something else listens there)' if busy else ''}")
        raise typer.Exit(1 if busy else 0)
    console.print(f"stopping {owner.describe()}")
    os.kill(owner.pid, signals.SIGTERM)
    deadline = time.monotonic() + timeout
    while read_claim(s) is not None:
        if time.monotonic() > deadline:
            console.print(f"[red]still running after {timeout:.0f} s: `kill -9 {owner.pid}` ends it and its children[/red]")
            raise typer.Exit(1)
        time.sleep(0.2)
    console.print("stopped")


def _fail(message: str, code: int = 1) -> typer.Exit:
    """One red line on stderr (:func:`rtaudit.workers.cli_common.fail`); here the default code is 1."""
    return fail(message, code)


def _quiet_librdkafka() -> None:
    """librdkafka's own log lines only with -v (the commands report errors in one line)."""
    from rtaudit.workers.kafka import LIBRDKAFKA_LOG

    if not logging.getLogger().isEnabledFor(logging.INFO):
        LIBRDKAFKA_LOG.setLevel(logging.CRITICAL)


def _missing_hint(s) -> str:  # type: ignore[no-untyped-def]
    """Why verdicts may not come: roles with no running worker, else the fleet is slow."""
    from rtaudit.workers.fleet import ROLES
    from rtaudit.workers.kafka import groups_without_members

    idle = groups_without_members(s, [f"rtaudit-{r}" for r in ROLES])
    if idle:
        roles = ", ".join(g.removeprefix("rtaudit-") for g in idle)
        fix = "start the fleet with `rtaudit up`" if s.bootstrap_servers is None else "start those workers (`rtaudit worker ROLE`)"
        return f"no {roles} worker running on {s.bootstrap}: {fix}"
    if idle is None:
        return f"is the fleet running on {s.bootstrap}? `rtaudit up` starts it; else wait longer (--wait)"
    return "the fleet is running but has not answered yet: wait longer (--wait) or read the worker logs"


@app.command()
def submit(
    paths: Annotated[list[Path], typer.Argument(help="text files (UTF-8), .jsonl requests, images (.png, .jpg, ...)")],
    tenant: Annotated[str, typer.Option(help="tenant id")] = "default",
    priority: Annotated[Optional[str], typer.Option(help="high | normal | low")] = None,
    wait: Annotated[float, typer.Option(help="seconds to wait for the verdicts (0: don't)")] = 0.0,
    config: ConfigOpt = None,
) -> None:
    """Publish files to audit.requests ("submitted ID" once the broker acknowledged each);
    optionally wait and print their verdicts. Exit 1 when the broker, the topics, an
    acknowledgement or a verdict is missing (one line says what and how to fix it), 2 for a bad file."""
    from rtaudit.schemas.errors import AuditError
    from rtaudit.topics.catalog import REQUESTS, VERDICTS
    from rtaudit.workers.client import AuditClient, DeliveryError, VerdictTimeout, request_from_path, verdict_reader
    from rtaudit.workers.demo import verdict_line
    from rtaudit.workers.kafka import ClusterError, check_cluster

    _quiet_librdkafka()
    s = _settings(config)
    extra = {"priority": priority} if priority else {}
    requests = []
    for p in paths:
        try:
            requests += request_from_path(p, tenant, **extra)
        except OSError as exc:
            raise _fail(f"{p}: {exc.strerror or exc}", 2) from None
        except AuditError as exc:
            raise _fail(exc.message if str(p) in exc.message else f"{p}: {exc.message}", 2) from None
        except ValueError as exc:
            raise _fail(str(exc) if str(p) in str(exc) else f"{p}: {exc}", 2) from None
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
            try:
                reader.wait_all({r.request_id for r in requests}, wait,
                                on_record=lambda v, a: print(verdict_line(v, a), flush=True))
            except VerdictTimeout as exc:
                raise _fail(f"{exc}: {_missing_hint(s)}") from None
    finally:
        if reader is not None:
            reader.close()


@app.command()
def verdicts(
    config: ConfigOpt = None,
    from_beginning: Annotated[bool, typer.Option(help="print verdicts already on the topic too (with their own latency, decided - created)")] = False,
    count: Annotated[int, typer.Option(help="stop after N verdicts (0: follow forever)")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print each verdict as JSON")] = False,
    raw: Annotated[bool, typer.Option("--raw", help="also print repeated verdicts of a request id (the fleet is at-least-once)")] = False,
) -> None:
    """Follow audit.verdicts and print one line per request id (repeats dropped unless --raw).

    Latency in brackets: for a verdict decided after this command started, created to arrival
    here; for an older one (--from-beginning), its own latency (decided - created)."""
    from rtaudit.workers.client import verdict_reader
    from rtaudit.workers.demo import verdict_line
    from rtaudit.workers.kafka import ClusterError
    from rtaudit.engine.clock import now_ms

    _quiet_librdkafka()
    s = _settings(config)
    try:
        reader = verdict_reader(s, dedupe=not raw)
    except ClusterError as exc:
        raise _fail(str(exc)) from None
    started = now_ms()
    since = 0 if from_beginning else started - 1000
    n = 0
    with reader:
        try:
            for v, arrived in reader.stream():
                if v.decided_at_ms < since:
                    continue
                live = v.decided_at_ms >= started
                print(v.model_dump_json(exclude_none=True) if as_json else verdict_line(v, arrived if live else None), flush=True)
                n += 1
                if count and n >= count:
                    break
        except KeyboardInterrupt:
            pass
        if reader.duplicates_dropped:
            Console(stderr=True).print(f"{reader.duplicates_dropped} repeated verdicts dropped (--raw shows them)", highlight=False)


@app.command()
def demo(
    config: ConfigOpt = None,
    timeout: Annotated[float, typer.Option(help="seconds to wait for all verdicts")] = 300.0,
) -> None:
    """Start the broker and fleet (supervised, like `rtaudit up`) unless this checkout's fleet already
    runs with the same settings, stream the demo corpus, print verdicts and a summary. Refuses
    a broker address held by another fleet or process."""
    from rtaudit.engine.clock import now_ms
    from rtaudit.workers.client import AuditClient, dlq_reader, verdict_reader
    from rtaudit.workers.demo import build_corpus, summarize, summary_tables, verdict_line
    from rtaudit.workers.fleet import Fleet, FleetNotReady
    from rtaudit.workers.fleet_record import Claim, FleetConflict, FleetRecord, new_run_id

    s = _settings(config)
    run_id = new_run_id()
    log_dir = _run_log_dir(s, run_id)
    record = FleetRecord.ours(s, "fleet", run_id, log_dir)
    claim = Claim(s, record)
    fleet = None
    try:
        claim.acquire()
    except FleetConflict as exc:
        if exc.record is None or not exc.record.same_fleet(record):
            why = f" (not this checkout's fleet: {'; '.join(exc.record.differences(record))})" if exc.record else ""
            Console(stderr=True).print(f"[red]{exc}{why}[/red]", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
        claim = None
        console.print(f"using this checkout's fleet (same code and settings): {exc.record.describe()}")
        try:
            Fleet(s, config=config).wait_ready(timeout_s=120)
        except FleetNotReady as not_ready:
            console.print(f"[red]{not_ready}[/red]")
            raise typer.Exit(1) from None
    if claim is not None:
        console.print(f"starting the embedded broker and the fleet ({s.profile} profile), logs in {log_dir}…")
        try:
            fleet = _start_supervised(s, config, {}, log_dir)
        except BaseException:
            claim.release()
            raise
    try:
        items = build_corpus()
        reader, dlq = verdict_reader(s), dlq_reader(s)
        client = AuditClient(s)
        started = now_ms()
        for item in items:
            client.submit_raw(item.request_id.encode(), item.raw)
        client.flush()
        console.print(f"submitted {len(items)} requests; verdicts:")
        got = reader.wait_for(
            {i.request_id for i in items if i.expects_verdict}, timeout,
            on_record=lambda v, a: print(verdict_line(v, a), flush=True),
        )
        dead = dlq.wait_for({i.request_id for i in items if i.expects_dlq}, timeout_s=15)
        reader.close()
        dlq.close()
        summary = summarize(items, got, started, dlq=len(dead))
        for table in summary_tables(items, got, summary):
            console.print(table)
        if summary.received < summary.expected_verdicts or summary.dlq < summary.expected_dlq:
            console.print(f"[red]missing: {summary.expected_verdicts - summary.received} verdicts, "
                          f"{summary.expected_dlq - summary.dlq} DLQ records after {timeout} s[/red]")
            raise typer.Exit(1)
    except KeyboardInterrupt:
        console.print("interrupted")
        raise typer.Exit(130) from None
    finally:
        if fleet is not None:
            fleet.stop()
        if claim is not None:
            claim.release()


def _parse_slo(values: list[str]) -> dict[str, float]:
    out = {}
    for v in values:
        target, _, ms = v.partition("=")
        try:
            out[target] = float(ms)
        except ValueError:
            raise typer.BadParameter(f"--slo takes TARGET=MS (text|image|ocr|mixed), got {v!r}") from None
    return out


@app.command()
def bench(
    quick: Annotated[bool, typer.Option("--quick", help="text stage only, short steps: under a minute on 2 cores")] = False,
    stage: Annotated[list[str], typer.Option("--stage", "-s", help="text | image | ocr (repeat; default: all, --quick: text)")] = [],  # noqa: B006
    mixed: Annotated[Optional[bool], typer.Option("--mixed/--no-mixed", help="also the whole fleet end to end (default: on unless --quick)")] = None,
    naive: Annotated[bool, typer.Option("--naive/--no-naive", help="measure the naive one-at-a-time consumer")] = True,
    lanes: Annotated[bool, typer.Option("--lanes/--no-lanes", help="high lane at low rate while the low lane is saturated")] = True,
    profile: Annotated[list[str], typer.Option("--profile", "-p", help="named batching profile to bench on the text stage (repeat; default: every profile when the text stage is benched, none with --quick)")] = [],  # noqa: B006
    peers: Annotated[bool, typer.Option("--peers", help="also the peers, stepped like the worker in the same run: Faust's stream.take() batching and "
                                        "Ray Serve's @serve.batch (Ray: pip install -e \".[bench-peers]\"); default stage text, no mixed, no profiles")] = False,
    slo: Annotated[list[str], typer.Option("--slo", help="TARGET=MS latency bound of the knee and of SLO misses, e.g. text=500")] = [],  # noqa: B006
    out: Annotated[Path, typer.Option(help="folder for bench.json, bench.png and worker logs")] = Path(".rtaudit/bench"),
    max_seconds: Annotated[Optional[float], typer.Option(help="no step starts after this (default 50 with --quick, 240 with --quick --peers, 1500)")] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="the overhead bench instead: text model null | lexical | minilm; "
                                                 "router, text, fusion and the fleet at saturation and at 10 % load, against the raw client")] = None,
    role: Annotated[list[str], typer.Option("--role", "-r", help="with --model: router | text | fusion | fleet (repeat; default: all)")] = [],  # noqa: B006
    records: Annotated[Optional[int], typer.Option(help="with --model: requests produced at once per target (default 20000, --quick 5000)")] = None,
    config: ConfigOpt = None,
) -> None:
    """Stepped open-loop load per model stage and for the whole fleet, against the model's
    batched limit and a naive consumer, on a private embedded broker (loopback only).
    Prints the tables and target ratios; writes bench.json and bench.png.
    With --model: the overhead bench (workers/bench/overhead.py), overhead.json."""
    from rtaudit.workers import bench as b
    from rtaudit.workers.bench.report import plot, tables, write_json

    for name in ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS", "RTAUDIT_KAFKA_PROFILE"):
        if os.environ.pop(name, None) is not None:
            console.print(f"[yellow]bench runs on its own embedded broker on loopback: ignoring {name}[/yellow]")
    out = out.resolve()
    os.environ["RTAUDIT_STATE_DIR"] = str(out / "state")
    if config is not None:
        os.environ["RTAUDIT_CONFIG"] = str(config.resolve())
    s = _settings(config)
    if model is not None:
        if stage or profile or slo or mixed is not None:
            raise typer.BadParameter("--stage, --profile, --slo and --mixed are for the stepped bench, not --model")
        _bench_overhead(s, model, tuple(role), records, quick, out, config)
        return
    if role or records is not None:
        raise typer.BadParameter("--role and --records go with --model (the overhead bench)")
    stages = tuple(stage) or (("text",) if quick or peers else b.STAGES)
    bad = [x for x in stages if x not in b.STAGES]
    if bad:
        raise typer.BadParameter(f"--stage must be among {', '.join(b.STAGES)}, got {bad}")
    # profiles are text-stage series: by default only when the text stage is benched
    profiles = tuple(profile) if profile else (() if quick or peers or "text" not in stages else b.available_profiles())
    unknown = [p for p in profiles if p not in b.available_profiles()]
    if unknown:
        raise typer.BadParameter(f"--profile must be among {', '.join(b.available_profiles())}, got {unknown}")
    opts = b.BenchOptions(
        stages=stages, mixed=(not quick and not peers) if mixed is None else mixed, naive=naive, lanes=lanes, profiles=profiles,
        peers=b.PEERS if peers else (),
        quick=quick, out_dir=out, config=config.resolve() if config else None,
        max_seconds=max_seconds if max_seconds is not None else ((240.0 if peers else 50.0) if quick else 1500.0),
        slo_ms=_parse_slo(slo), stop_after=1 if quick else 2, refine=1 if quick else 2,
    )
    console.print(f"rtaudit bench: stages {', '.join(stages)}{' + mixed' if opts.mixed else ''}{'; peers ' + ', '.join(opts.peers) if opts.peers else ''}"
                  f"{'; profiles ' + ', '.join(profiles) if profiles else ''}; budget {opts.max_seconds:.0f} s; results in {out}")

    def on_step(step) -> None:  # type: ignore[no-untyped-def]
        console.print(f"  {step.target:28} offered {step.offered_per_s:9.2f}/s  achieved {step.achieved_per_s:9.2f}/s  "
                      f"P50 {step.p50_ms:7.0f}  P99 {step.p99_ms:7.0f} ms  miss {step.slo_misses}/{step.sent}  "
                      f"CPU% {' '.join(f'{k} {v:.0f}' for k, v in step.cpu_pct.items())}", markup=False)

    # SIGTERM (e.g. `timeout`) and SIGHUP unwind like Ctrl-C: the workers and the broker are
    # stopped; whatever else ends this process, its children die with it (workers/children.py)
    from rtaudit.workers.children import raise_keyboard_interrupt_on

    raise_keyboard_interrupt_on()
    run = b.Bench(opts, s, on_step, lambda msg: console.print(msg, markup=False)).run()
    if run.interrupted:
        console.print("[yellow]interrupted: results of the targets finished before[/yellow]")
    for table in tables(run):
        console.print(table)
    console.print(f"wrote {write_json(run, out / 'bench.json')} and {plot(run, out / 'bench.png')} "
                  f"({run.wall_s:.0f} s)")


def _bench_overhead(s: Settings, model: str, roles: tuple[str, ...], records: Optional[int], quick: bool, out: Path, config: Optional[Path]) -> None:
    """``rtaudit bench --model``: the overhead table on stdout, overhead.json in ``out``."""
    from rtaudit.workers.children import raise_keyboard_interrupt_on
    from rtaudit.workers.bench.overhead import MODELS, TARGETS, OverheadBench, OverheadOptions
    from rtaudit.workers.bench.report import overhead_table, write_overhead_json

    if model not in MODELS:
        raise typer.BadParameter(f"--model must be one of {', '.join(MODELS)}, got {model!r}")
    bad = [r for r in roles if r not in TARGETS]
    if bad:
        raise typer.BadParameter(f"--role must be among {', '.join(TARGETS)}, got {bad}")
    values: dict[str, object] = {"model": model, "targets": roles or TARGETS, "out_dir": out, "config": config.resolve() if config else None}
    if records is not None:
        values["records"] = records
    opts = OverheadOptions.quick(**values) if quick else OverheadOptions(**values)  # type: ignore[arg-type]
    console.print(f"rtaudit bench --model {model}: {', '.join(opts.targets)}; {opts.records:,} requests per target; results in {out}")
    raise_keyboard_interrupt_on()
    run = OverheadBench(opts, s, lambda msg: console.print(msg, markup=False)).run()
    if run.interrupted:
        console.print("[yellow]interrupted: results of the targets finished before[/yellow]")
    console.print(overhead_table(run))
    console.print(f"wrote {write_overhead_json(run, out / 'overhead.json')} ({run.wall_s:.0f} s)")


@text_app.command("build-encoder")
def text_build_encoder(
    force: Annotated[bool, typer.Option(help="rebuild even if cached")] = False,
    precision: Annotated[str, typer.Option(help="which graphs: all | fp32 | int8 (int8 is built from fp32)")] = "all",
) -> None:
    """Export MiniLM-L6 (+ mean pooling + L2 norm) from the installed wheel to ONNX in the cache directory,
    and its dynamic int8 quantization beside it (``text_encoder_precision`` picks which one serves)."""
    from rtaudit.engine.text import encoder

    if precision not in ("all", *encoder.PRECISIONS):
        raise typer.BadParameter(f"--precision must be all, fp32 or int8, not {precision!r}")
    for p in encoder.PRECISIONS if precision == "all" else (precision,):
        if not force:
            path = encoder.ensure_encoder_onnx(p)
        elif p == "fp32":
            path = encoder.export_encoder_onnx(encoder.onnx_path(p))
        else:  # from the cached fp32 (rebuilt just before with --precision all)
            path = encoder.quantize_encoder_onnx(encoder.onnx_path(p))
        console.print(f"{p}: {path} ({path.stat().st_size / 1e6:.1f} MB, source sha256 {encoder.source_sha256()[:12]}"
                      f"{'' if p == 'fp32' else ', recipe ' + encoder.INT8_RECIPE})", markup=False, soft_wrap=True)


@text_app.command("train")
def text_train(
    data: DataOpt = DEFAULT_DATA,
    embed_budget_s: Annotated[Optional[float], typer.Option(help="stop embedding new texts after this many seconds "
                                                            "and fit on the rows embedded so far (dev rows come first)")] = None,
) -> None:
    """Train the English head and the Chinese model; write engine/text/artifacts/ and its manifest."""
    from rtaudit.engine.text.train import train_all

    manifest = train_all(data, embed_budget_s)
    table = Table("artifact", "sha256", "bytes", "dev report")
    for name, a in manifest["artifacts"].items():
        table.add_row(name, a["sha256"][:16], str(a["bytes"]), str(a["report"]))
    console.print(table)
    console.print(f"training time: {manifest['training_time_s']}")


def _f(x: float) -> str:
    return f"{x:.3f}"


@app.command("eval")
def eval_text(
    data: DataOpt = DEFAULT_DATA,
    quick: Annotated[bool, typer.Option("--quick", help="fixed samples; under a minute")] = False,
    max_rows: Annotated[Optional[int], typer.Option(help="cap each dev split at its first N rows (seeded hash order)")] = None,
) -> None:
    """Text model quality: P/R/F1 per dataset and category vs alt-profanity-check, evidence F1, evasion, throughput.

    Needs the labeled datasets under ``--data`` (default ``../shared/data`` beside the
    repository); without them it prints one line on stderr saying what is missing and where
    to put it, and exits with status 2, before any model loads.
    """
    from rtaudit.engine.text import data as D
    from rtaudit.engine.text import evaluation as ev
    from rtaudit.engine.text.scoring import TextScorer

    needed = [p for name in dict(ev.EVAL_SETS) for p in D.data_files(data)[name]]
    missing = [p for p in needed if not p.is_file()]
    if missing:
        where = f"{data} does not exist" if not data.is_dir() else (
            f"{len(missing)} of {len(needed)} dataset files missing under {data} "
            f"(e.g. {missing[0].relative_to(data)})")
        Console(stderr=True).print(
            f"evaluation data not found: {where}; put the shared data (text/davidson, text/olid, text/hatexplain, "
            f"text/cold, text/jigsaw_sample) at {DEFAULT_DATA}, or pass --data DIR",
            markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(2)
    started = time.perf_counter()
    scorer = TextScorer()
    memo = scorer.encoder.use_cache()  # embeddings memoised on disk: reruns and post-training evals are fast
    console.print(f"rtaudit-text {scorer.version}{' (quick: samples)' if quick else ''}")
    cats, sets = ev.classification(scorer, data, quick=quick, max_rows=max_rows)
    t = Table("dataset", "split", "category", "n", "pos", "P", "R", "F1", "baseline P", "baseline R", "baseline F1",
              title="Classification (score >= 0.5; baseline = alt-profanity-check >= 0.5)")
    for r in cats:
        t.add_row(r.dataset, r.split, r.category, str(r.model.n), str(r.model.support), _f(r.model.precision),
                  _f(r.model.recall), _f(r.model.f1), _f(r.baseline.precision), _f(r.baseline.recall), _f(r.baseline.f1))
    console.print(t)
    t = Table("dataset", "split", "n", "macro-F1", "baseline macro-F1", "delta", "target +0.10", title="Macro-F1 per split")
    for r in sets:
        d = r.macro_f1 - r.baseline_macro_f1
        t.add_row(r.dataset, r.split, str(r.n), _f(r.macro_f1), _f(r.baseline_macro_f1), f"{d:+.3f}",
                  "[green]met[/green]" if d >= 0.10 else "[red]not met[/red]")
    console.print(t)
    m, b, n = ev.evidence_f1(scorer, data, quick=quick)
    t = Table("evidence (HateXplain dev rationales)", "posts", "P", "R", "F1", title="Evidence: token-level F1")
    t.add_row("rtaudit-text spans", str(n), _f(m.precision), _f(m.recall), _f(m.f1))
    t.add_row("alt-profanity-check word spans", str(n), _f(b.precision), _f(b.recall), _f(b.f1))
    console.print(t)
    ours, base = ev.evasion(scorer, data, quick=quick)
    t = Table("technique", "recall", "relative to clean", "baseline recall", "baseline relative",
              title=f"Evasion suite ({ours.n_offensive} offensive dev texts; target relative >= 0.95)")
    for name in ours.recall:
        rel = "" if name == "clean" else _f(ours.relative[name])
        brel = "" if name == "clean" else _f(base.relative[name])
        t.add_row(name, _f(ours.recall[name]), rel, _f(base.recall[name]), brel)
    t.add_row("benign FP rate", _f(ours.benign_fp_rate), f"n={ours.n_benign}, target <= 0.010", _f(base.benign_fp_rate), "")
    console.print(t)
    if ours.benign_flagged:
        console.print(f"benign texts flagged: {list(ours.benign_flagged)}")
    memo.save()
    scorer.encoder.memo = None  # throughput is measured without the memo
    tp = ev.throughput(scorer, data, quick=quick)
    t = Table(*tp.keys(), title="Text scorer throughput with evidence (texts/s; target speedup >= 5)")
    t.add_row(*(f"{v:.1f}" for v in tp.values()))
    console.print(t)
    console.print(f"eval took {time.perf_counter() - started:.1f} s")


@app.command()
def fuzz(
    count: Annotated[Optional[int], typer.Option("--count", "-n", help="requests to send (default 10,000; --quick 1,000)")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="1,000 requests")] = False,
    seed: Annotated[int, typer.Option(help="seed of the mutations: the same seed sends the same requests")] = 0,
    timeout: Annotated[float, typer.Option(help="seconds to wait for every answer after the last send")] = 120.0,
    out: Annotated[Path, typer.Option(help="folder for each run's settings, state and worker logs")] = Path(".rtaudit/fuzz"),
) -> None:
    """Mutated requests (wrong types, missing/extra fields, huge numbers, deep nesting, invalid
    UTF-8, lone surrogates, megabyte strings, empty values, null keys, id mismatches, wrong
    content types, media URIs of every scheme, base64 garbage) through a router + text + fusion
    fleet on a private embedded broker. Prints, per mutation kind, verdicts and DLQ records;
    exits 1 unless every request got an answer (a verdict whenever an id is readable) and no
    worker crashed."""
    from rtaudit.workers.children import raise_keyboard_interrupt_on
    from rtaudit.workers.fuzz.harness import FuzzOptions, run, tables

    for name in ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS", "RTAUDIT_KAFKA_PROFILE", "RTAUDIT_CONFIG"):
        if os.environ.pop(name, None) is not None:
            console.print(f"[yellow]fuzz runs on its own embedded broker and settings: ignoring {name}[/yellow]")
    n = count if count is not None else (1_000 if quick else 10_000)
    if n < 1:
        raise typer.BadParameter(f"--count must be at least 1, got {n}")
    raise_keyboard_interrupt_on()
    try:
        report = run(FuzzOptions(count=n, seed=seed, out_dir=out, timeout_s=timeout),
                     on_event=lambda msg: console.print(msg, markup=False, highlight=False))
    except KeyboardInterrupt:
        console.print("interrupted: the fleet and its broker were stopped")
        raise typer.Exit(130) from None
    except RuntimeError as exc:
        raise _fail(str(exc)) from None
    for table in tables(report):
        console.print(table)
    for line in report.failures:
        console.print(line, style="red", markup=False, highlight=False)
    console.print(f"worker logs: {report.log_dir}")
    if not report.ok:
        raise typer.Exit(1)


@app.command()
def chaos(
    kills: Annotated[Optional[int], typer.Option("--kills", help="kill -9 faults, random workers every few seconds (default 20, --quick 5)")] = None,
    duration: Annotated[Optional[float], typer.Option("--duration", help="seconds of load (default 180, --quick 45)")] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed of the fault plan and of the load")] = 1,
    quick: Annotated[bool, typer.Option("--quick", help="under a minute of load: 5 kills, no rolling restart")] = False,
    rate: Annotated[float, typer.Option("--rate", help="requests/s (3 % with a drawn image, 1 % an image of words)")] = 5.0,
    rolling: Annotated[Optional[bool], typer.Option("--rolling/--no-rolling", help="rolling SIGTERM restart of every role (default: on unless --quick)")] = None,
    slo_ms: Annotated[int, typer.Option("--slo-ms", help="each request's SLO, ms")] = 10_000,
    out: Annotated[Path, typer.Option(help="folder for chaos runs (logs, chaos.json)")] = Path(".rtaudit/chaos"),
    config: ConfigOpt = None,
) -> None:
    """Steady mixed load (text, images, OCR) through a supervised fleet on a private embedded
    broker while random workers are killed with kill -9 (and, unless --quick, every role is
    restarted with SIGTERM in turn); then audit.verdicts is read whole and the table says what
    was lost or repeated. Exit 1 when a request was lost or the client saw a duplicate."""
    from rtaudit.workers import chaos as c
    from rtaudit.workers.children import raise_keyboard_interrupt_on

    for name in ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS", "RTAUDIT_KAFKA_PROFILE"):
        if os.environ.pop(name, None) is not None:
            console.print(f"[yellow]chaos runs on its own embedded broker on loopback: ignoring {name}[/yellow]")
    if config is not None:
        os.environ["RTAUDIT_CONFIG"] = str(config.resolve())
    s = _settings(config)
    base = c.ChaosOptions.quick() if quick else c.ChaosOptions()
    kw: dict[str, object] = dict(seed=seed, rate=rate, slo_ms=slo_ms, out_dir=out.resolve(), config=config.resolve() if config else None)
    if kills is not None:
        kw["kills"] = kills
    if duration is not None:
        kw["duration_s"] = duration
    if rolling is not None:
        kw["rolling"] = c.ROLES if rolling else ()
    opts = dataclasses.replace(base, **kw)  # type: ignore[arg-type]
    raise_keyboard_interrupt_on()
    try:
        run = c.Chaos(opts, s, lambda msg: console.print(msg, markup=False, highlight=False)).run()
    except ValueError as exc:
        raise _fail(str(exc), 2) from None
    table = Table("measure", "value", title=f"rtaudit chaos ({run.run_id}, seed {opts.seed}, {run.load_s:.0f} s of load)")
    for name, value in c.result_rows(run.result, opts.slo_ms):
        table.add_row(name, value)
    console.print(table)
    for rid, records in list(run.repeated.items())[:3]:
        console.print(f"repeated {rid}: " + " | ".join(
            f"{'complete' if v.complete else 'incomplete'} {v.decision} at {v.decided_at_ms}: {'; '.join(v.reasons[:2])}" for v in records),
            markup=False, highlight=False)
    console.print(f"restarts by the supervisor: {run.restarts}; wrote {c.write_json(run, out.resolve() / run.run_id / 'chaos.json')}; "
                  f"worker logs in {run.log_dir} ({run.wall_s:.0f} s in all)", markup=False, highlight=False)
    if not run.result.ok:
        raise typer.Exit(1)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
