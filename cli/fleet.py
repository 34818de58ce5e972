"""The fleet commands of ``rtaudit``: ``broker``, ``up``, ``down``, ``worker`` and ``demo`` (the local
fleet of :mod:`rtaudit.tools.fleet`, its broker claim and logs); registered on the app by :mod:`rtaudit.cli.main`."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from rtaudit.cli.common import ConfigOpt, console, fail, settings_or_exit
from rtaudit.workers.settings import Settings


def _settings_source(config: Path | None) -> str:
    """Which settings file the fleet runs with, or that none was found (tenant policies then
    come from the defaults: ``--tenant acme`` gets the default policy)."""
    from rtaudit.workers.settings import config_path

    path = config_path(config)
    if path is None:
        return ("settings: no rtaudit.toml here and no --config or $RTAUDIT_CONFIG: built-in defaults and "
                "RTAUDIT_* variables only (every tenant gets the default policy)")
    return f"settings: {path.resolve()}"



def _fail(message: str, code: int = 1) -> typer.Exit:
    """One red line on stderr (:func:`rtaudit.cli.common.fail`); here the default code is 1."""
    return fail(message, code)


def broker(
    port: Annotated[Optional[int], typer.Option(help="loopback port (default: embedded_port of the settings)")] = None,
    config: ConfigOpt = None,
) -> None:
    """Run the embedded tansu broker in the foreground (memory-only) until Ctrl-C or SIGTERM;
    it stops with this command whatever ends it. Refuses a port another process holds."""
    from rtaudit.tools.fleet.broker import EmbeddedBroker
    from rtaudit.tools.fleet.children import raise_keyboard_interrupt_on
    from rtaudit.tools.fleet.record import Claim, FleetRecord, new_run_id

    s = settings_or_exit(config)
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



def worker(role: Annotated[str, typer.Argument(help="router | text | image | ocr | audio | video | fusion | explain")]) -> None:
    """Run one worker in the foreground (same as ``faust -A rtaudit.workers.<role> worker -l info``)."""
    from rtaudit.tools.fleet.local import faust_command
    from rtaudit.workers.roles import OPTIONAL_ROLES, ROLES

    if role not in ROLES + OPTIONAL_ROLES:
        raise typer.BadParameter(f"role must be one of {', '.join(ROLES + OPTIONAL_ROLES)}")
    s = settings_or_exit(None)  # bad settings: one line here rather than faust's traceback
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

    s = settings_or_exit(config)
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

    s = settings_or_exit(config)
    if port is not None:
        s = s.model_copy(update={"bootstrap_servers": None, "embedded_port": port})
    owner = read_claim(s)
    loopback = _loopback_port(s.bootstrap_servers)
    if owner is None and loopback is not None:  # KAFKA_BOOTSTRAP_SERVERS exported to reach an embedded fleet
        s = s.model_copy(update={"bootstrap_servers": None, "embedded_port": loopback})
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


def _loopback_port(bootstrap: str | None) -> int | None:
    """The port of a bootstrap address that is one loopback ``host:port`` (where an embedded
    broker listens), else ``None``."""
    host, _, port = (bootstrap or "").rpartition(":")
    return int(port) if host in ("127.0.0.1", "localhost") and port.isdigit() else None


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

    s = settings_or_exit(config)
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

