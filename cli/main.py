"""The ``rtaudit`` command line (Typer)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from rtaudit.cli.common import fail, settings_or_exit
from rtaudit.workers.settings import Settings

if TYPE_CHECKING:
    from rtaudit.schemas.messages import Verdict

app = typer.Typer(help="rtaudit: real-time multimodal content moderation on Kafka.", no_args_is_help=True)
topics_app = typer.Typer(help="Create or verify the topic catalogue.", no_args_is_help=True)
schemas_app = typer.Typer(help="Export or check the JSON Schema files.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")
app.add_typer(schemas_app, name="schemas")
from rtaudit.cli.text import eval_text, text_app  # noqa: E402  (rtaudit text build-encoder|train, rtaudit eval)
app.add_typer(text_app, name="text")
from rtaudit.cli.multilingual import text_train_multilingual  # noqa: E402  (rtaudit text train-multilingual)
text_app.command("train-multilingual")(text_train_multilingual)
from rtaudit.cli.e5 import text_train_e5  # noqa: E402  (rtaudit text train-e5)
text_app.command("train-e5")(text_train_e5)
app.command("eval")(eval_text)
from rtaudit.cli.harness import bench, chaos, fuzz  # noqa: E402  (rtaudit bench|fuzz|chaos)
for _harness in (bench, fuzz, chaos):
    app.command()(_harness)
from rtaudit.cli.breaker import breaker_app  # noqa: E402  (rtaudit control breaker set|trip|reset|clear)
from rtaudit.cli.control import control_app  # noqa: E402  (rtaudit control rollout|policy|priority|status|history)

control_app.add_typer(breaker_app, name="breaker")
app.add_typer(control_app, name="control")
from rtaudit.cli.model import model_app  # noqa: E402  (rtaudit model package|publish|list|verify)
app.add_typer(model_app, name="model")
from rtaudit.cli.dlq import dlq  # noqa: E402  (rtaudit dlq)
app.command()(dlq)
from rtaudit.cli.explain import explain  # noqa: E402  (rtaudit explain REQUEST_ID)
app.command()(explain)
from rtaudit.cli.top import top  # noqa: E402  (rtaudit top)
app.command()(top)
from rtaudit.cli.common import ConfigOpt, console  # noqa: E402


def _settings_source(config: Path | None) -> str:
    """Which settings file the fleet runs with, or that none was found (tenant policies then
    come from the defaults: ``--tenant acme`` gets the default policy)."""
    from rtaudit.workers.settings import config_path

    path = config_path(config)
    if path is None:
        return ("settings: no rtaudit.toml here and no --config or $RTAUDIT_CONFIG: built-in defaults and "
                "RTAUDIT_* variables only (every tenant gets the default policy)")
    return f"settings: {path.resolve()}"


def _settings(config: Path | None) -> Settings:
    return settings_or_exit(config)


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _quiet_librdkafka(verbose)


@app.command()
def broker(
    port: Annotated[Optional[int], typer.Option(help="loopback port (default: embedded_port of the settings)")] = None,
    config: ConfigOpt = None,
) -> None:
    """Run the embedded tansu broker in the foreground (memory-only) until Ctrl-C or SIGTERM;
    it stops with this command whatever ends it. Refuses a port another process holds."""
    from rtaudit.tools.fleet.broker import EmbeddedBroker
    from rtaudit.tools.fleet.children import raise_keyboard_interrupt_on
    from rtaudit.tools.fleet.record import Claim, FleetRecord, new_run_id

    s = _settings(config)
    s = s.model_copy(update={"bootstrap_servers": None, "embedded_port": port or s.embedded_port})
    claim = _claim_or_exit(Claim(s, FleetRecord.ours(s, "broker", new_run_id(), None)))
    raise_keyboard_interrupt_on()
    try:
        with EmbeddedBroker(s.embedded_port) as b:
            console.print(f"embedded broker on {b.bootstrap}, pid {b.process.pid} (Ctrl-C stops it; all data is lost)")  # type: ignore[union-attr]  # the embedded broker's process is set once it started (the line above)
            try:
                code = b.process.wait()  # type: ignore[union-attr]  # the embedded broker's process is set once it started
                console.print(f"[red]the broker exited ({code})[/red]")
                raise typer.Exit(1)
            except KeyboardInterrupt:
                pass
    finally:
        claim.release()


def _claim_or_exit(claim):
    """Take ``claim`` (:class:`rtaudit.tools.fleet.record.Claim`) or exit 1 with the one line that names
    the fleet or process holding the broker address and how to stop it."""
    from rtaudit.tools.fleet.record import FleetConflict

    try:
        return claim.acquire()
    except FleetConflict as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def _run_log_dir(s, run_id: str) -> Path:
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


def _start_supervised(s, config, replicas: dict[str, int], log_dir: Path):
    """A supervised :class:`rtaudit.tools.fleet.local.Fleet` that reports its progress on the console;
    started and ready, or exit 1 with the reason. SIGTERM and SIGHUP unwind like Ctrl-C."""
    from rtaudit.tools.fleet.children import raise_keyboard_interrupt_on
    from rtaudit.tools.fleet.local import Fleet, FleetNotReady, explain_unavailable, fleet_roles
    from rtaudit.workers.kafka import ClusterError
    from rtaudit.workers.metrics import port_taken_line, serve

    raise_keyboard_interrupt_on()
    if s.explain.enabled and (why := explain_unavailable()):
        console.print(f"  explain role not started: {why} (`make setup` installs it)")
    fleet = Fleet(s, config=config, roles=fleet_roles(s), replicas=replicas, log_dir=log_dir, supervise=True,
                  on_event=lambda msg: console.print(f"  {msg}", markup=False, highlight=False))
    if s.metrics_port:
        try:
            serve(s.metrics_port, s.metrics_host)
        except OSError as exc:
            raise fail(port_taken_line("the supervisor", s.metrics_host, s.metrics_port, exc), 1) from None
        console.print(f"  supervisor metrics (rtaudit_restarts_total) on {s.metrics_host}:{s.metrics_port}")
    started = time.monotonic()
    try:
        fleet.start()
    except ClusterError as exc:  # the user's broker does not answer
        raise fail(str(exc), 1) from None
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


def _print_checks(checks) -> None:
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

    s = _cluster(config)
    _print_checks(ensure_topics(client_config(s), catalog(s.partitions)))


@topics_app.command("verify")
def topics_verify(config: ConfigOpt = None) -> None:
    """Check that every topic exists with its partition count; exit 1 if not."""
    from rtaudit.topics.admin import ensure_topics
    from rtaudit.topics.catalog import catalog

    from rtaudit.workers.kafka import client_config

    s = _cluster(config)
    checks = ensure_topics(client_config(s), catalog(s.partitions), create=False)
    bad = [c for c in checks if c.state != "exists"]
    if bad:
        raise _fail(f"{len(bad)} of {len(checks)} topics not as declared on {s.bootstrap}: "
                    + ", ".join(f"{c.name} {c.state} ({c.partitions}/{c.expected_partitions} partitions)" for c in bad)
                    + ": `rtaudit topics create` creates the missing ones (a partition count cannot change: recreate that topic)")
    _print_checks(checks)


def _cluster(config: Path | None) -> Settings:
    """The settings, and a broker that answers at their address (else one line, exit 1)."""
    from rtaudit.workers.kafka import ClusterError, check_cluster

    s = _settings(config)
    try:
        check_cluster(s, [])
    except ClusterError as exc:
        raise _fail(str(exc)) from None
    return s


@schemas_app.command("export")
def schemas_export() -> None:
    """Rewrite ``schemas/json/*.schema.json`` and the AsyncAPI document ``schemas/asyncapi.json`` from the models."""
    from rtaudit.schemas import asyncapi
    from rtaudit.schemas.export import export

    for p in [*export(), asyncapi.export()]:
        console.print(str(p))


@app.command()
def worker(role: Annotated[str, typer.Argument(help="router | text | image | ocr | audio | video | fusion | explain")]) -> None:
    """Run one worker in the foreground (same as ``faust -A rtaudit.workers.<role> worker -l info``)."""
    from rtaudit.tools.fleet.local import faust_command
    from rtaudit.workers.roles import OPTIONAL_ROLES, ROLES

    if role not in ROLES + OPTIONAL_ROLES:
        raise typer.BadParameter(f"role must be one of {', '.join(ROLES + OPTIONAL_ROLES)}")
    s = _settings(None)  # bad settings: one line here rather than faust's traceback
    _broker_or_exit(s)  # no broker: one line here rather than librdkafka's and aiokafka's
    os.execv(sys.executable, [*faust_command(), "-A", f"rtaudit.workers.{role}", "worker", "-l", "info", "--without-web"])


def _broker_or_exit(s: Settings, config: Path | None = None) -> None:
    """Exit 1 with one line when no broker answers at ``s.bootstrap`` (the check `rtaudit up` makes:
    :func:`rtaudit.workers.kafka.check_cluster`): the address tried, the setting it came from, the fix."""
    from rtaudit.workers.kafka import ClusterError, check_cluster, start_hint

    try:
        check_cluster(s, [])
    except ClusterError as exc:
        if s.bootstrap_servers is None and exc.fix == start_hint(s) == "start one with `rtaudit up`":
            fix = ("start one with `rtaudit broker` (or the whole fleet with `rtaudit up`), or point at "
                   "your cluster with KAFKA_BOOTSTRAP_SERVERS")
        elif s.bootstrap_servers is None:
            fix = exc.fix
        else:
            fix = "check that address, the network and the [security] settings"
        raise _fail(f"{exc.problem}; the address is {_bootstrap_source(s, config)}: {fix}") from None


def _bootstrap_source(s: Settings, config: Path | None) -> str:
    """Which setting names the broker address: ``KAFKA_BOOTSTRAP_SERVERS``, ``bootstrap_servers`` in a file,
    ``RTAUDIT_EMBEDDED_PORT``, ``embedded_port`` in a file, or the default embedded port."""
    from rtaudit.workers.settings import BOOTSTRAP_ENV, config_path

    env = {k.upper() for k in os.environ}
    path = config_path(config)
    if s.bootstrap_servers is not None:
        name = next((n for n in BOOTSTRAP_ENV if n in env), None)
        return f"from {name}" if name else f"bootstrap_servers in {path}"
    if "RTAUDIT_EMBEDDED_PORT" in env:
        return "the embedded broker's, port from RTAUDIT_EMBEDDED_PORT"
    if path is not None and "embedded_port" in _toml_keys(path):
        return f"the embedded broker's, port from embedded_port in {path}"
    return f"the embedded broker's default (embedded_port {s.embedded_port}; RTAUDIT_EMBEDDED_PORT changes it)"


def _toml_keys(path: Path) -> set[str]:
    """The top-level keys of the TOML file ``path`` (none when it cannot be read or parsed)."""
    import tomllib

    try:
        return set(tomllib.loads(path.read_text()))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return set()


def _parse_replicas(values: list[str]) -> dict[str, int]:
    """``ROLE=N`` pairs; raises ``typer.BadParameter`` for an unknown role or N < 1."""
    from rtaudit.workers.roles import OPTIONAL_ROLES, ROLES

    out = {}
    for v in values:
        role, _, n = v.partition("=")
        if role not in ROLES + OPTIONAL_ROLES:
            raise typer.BadParameter(f"unknown role {role!r} in {v!r}: roles are {', '.join(ROLES + OPTIONAL_ROLES)}", param_hint="--replicas")
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
    from rtaudit.tools.fleet.record import Claim, FleetRecord, new_run_id

    s = _settings(config)
    parsed = _parse_replicas(replicas)
    run_id = new_run_id()
    log_dir = _run_log_dir(s, run_id)
    record = FleetRecord.ours(s, "fleet", run_id, log_dir)
    claim = _claim_or_exit(Claim(s, record))
    (log_dir / "fleet.json").write_text(json.dumps(dataclasses.asdict(record), indent=1))
    console.print(f"rtaudit up: run {run_id}, pid {os.getpid()}, {s.bootstrap} ({s.profile} profile), logs in {log_dir}")
    console.print(_settings_source(config))
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
                console.print("restarts during the run: " + ", ".join(f"{role} {n}" for role, n in sorted(fleet.restarts.items())))
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

    from rtaudit.tools.fleet.broker import is_listening
    from rtaudit.tools.fleet.record import read_claim

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
    """One red line on stderr (:func:`rtaudit.cli.common.fail`); here the default code is 1."""
    return fail(message, code)


def _quiet_librdkafka(verbose: bool) -> None:
    """librdkafka's own log lines only with -v (every command reports errors in one line); the
    logger (:data:`rtaudit.workers.kafka.LIBRDKAFKA_LOG`) is named here so that confluent-kafka
    is imported only by the commands that need it."""
    logging.getLogger("rtaudit.workers.kafka.librdkafka").setLevel(logging.NOTSET if verbose else logging.CRITICAL)


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


@app.command()
def submit(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="text files (UTF-8), .jsonl requests, images, audio or video (judged by content: .png, .gif, .mp3, .wav, .mp4, ...)")] = None,
    uri: Annotated[Optional[list[str]], typer.Option("--uri", help="an image by reference, file:// or http(s):// (repeatable): the fleet "
                                                     "fetches it if [media] allowed_file_roots / allowed_http_hosts allow it")] = None,
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
    (wrapped). --slo or --deadline applies to every request (.jsonl ones too). An empty file of any kind is refused. Exit 1 when the broker, the topics, an
    acknowledgement or a verdict is missing (one line says what and how to fix it), 2 for a bad file or option."""
    from rtaudit.schemas.errors import AuditError
    from rtaudit.topics.catalog import REQUESTS, VERDICTS
    from pydantic import ValidationError

    from rtaudit.schemas.codec import validation_summary
    from rtaudit.workers.client import (
        AuditClient, DeliveryError, VerdictTimeout, request_from_path, request_from_uri, verdict_reader,
    )
    from rtaudit.tools.demo.corpus import verdict_line
    from rtaudit.workers.kafka import ClusterError, check_cluster

    s = _settings(config)
    extra = {"priority": priority} if priority else {}
    if not paths and not uri:
        raise _fail("nothing to submit: give files, or --uri for media by reference", 2)
    timing = _timing(slo, deadline)
    requests = []
    for u in uri or ():
        try:
            requests.append(request_from_uri(u, tenant, **extra))
        except ValidationError as exc:
            raise _fail(f"--uri {u}: {validation_summary(exc)}", 2) from None
    for p in paths or ():
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
    requests = [r.model_copy(update=timing) for r in requests]  # .jsonl requests too
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
                                on_record=lambda v, a: print("\n".join([verdict_line(v, a), *reason_lines(v)]), flush=True))
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

    s = _settings(config)
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
    from rtaudit.tools.demo.corpus import build_corpus, summarize, summary_tables, verdict_line
    from rtaudit.tools.fleet.local import Fleet, FleetNotReady
    from rtaudit.tools.fleet.record import Claim, FleetConflict, FleetRecord, new_run_id

    s = _settings(config)
    run_id = new_run_id()
    log_dir = _run_log_dir(s, run_id)
    record = FleetRecord.ours(s, "fleet", run_id, log_dir)
    ours = Claim(s, record)
    claim: Claim | None = ours
    fleet = None
    try:
        ours.acquire()
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
        console.print(_settings_source(config))
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
        from rtaudit.tools.fleet.local import fleet_roles

        if "explain" in fleet_roles(s):
            from rtaudit.cli.explain import demo_explanations

            demo_explanations(s, items, got, log_dir)
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


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
