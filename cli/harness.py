"""``rtaudit bench``, ``rtaudit fuzz`` and ``rtaudit chaos``: the harnesses, each on a fleet of its own
on a private embedded broker (registered on the ``rtaudit`` app by :mod:`rtaudit.cli.main`)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from rtaudit.cli.common import ConfigOpt, console, fail, settings_or_exit
from rtaudit.workers.settings import Settings

if TYPE_CHECKING:
    from rtaudit.tools.chaos import ChaosOptions, ChaosRun


def _parse_slo(values: list[str]) -> dict[str, float]:
    out = {}
    for v in values:
        target, _, ms = v.partition("=")
        try:
            out[target] = float(ms)
        except ValueError:
            raise typer.BadParameter(f"--slo takes TARGET=MS (text|image|ocr|mixed), got {v!r}") from None
    return out


def bench(
    quick: Annotated[bool, typer.Option("--quick", help="text stage only, short steps: under a minute on 2 cores")] = False,
    stage: Annotated[list[str], typer.Option("--stage", "-s", help="text | image | ocr (repeat; default: all, --quick: text)")] = [],  # noqa: B006
    mixed: Annotated[Optional[bool], typer.Option("--mixed/--no-mixed", help="also the whole fleet end to end (default: on unless --quick)")] = None,
    naive: Annotated[bool, typer.Option("--naive/--no-naive", help="measure the naive one-at-a-time consumer")] = True,
    lanes: Annotated[bool, typer.Option("--lanes/--no-lanes", help="high lane at low rate while the low lane is saturated")] = True,
    profile: Annotated[list[str], typer.Option("--profile", "-p", help="named batching profile to bench on the text stage (repeat; default: every profile when the text stage is benched, none with --quick)")] = [],  # noqa: B006
    peers: Annotated[bool, typer.Option("--peers", help="also the peers, stepped like the worker in the same run: Faust's stream.take() batching and "
                                        "Ray Serve's @serve.batch (Ray: pip install -e \".\\[bench-peers]\"); default stage text, no mixed, no profiles")] = False,
    slo: Annotated[list[str], typer.Option("--slo", help="TARGET=MS latency bound of the knee and of SLO misses, e.g. text=500")] = [],  # noqa: B006
    out: Annotated[Path, typer.Option(help="folder for bench.json, bench.png and worker logs")] = Path(".rtaudit/bench"),
    max_seconds: Annotated[Optional[float], typer.Option(help="no step starts after this (default 50 with --quick, 240 with --quick --peers, 1500)")] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="the overhead bench instead: text model null | lexical | minilm; "
                                                 "router, text, fusion and the fleet at saturation and at 10 % load, against the raw client")] = None,
    role: Annotated[list[str], typer.Option("--role", "-r", help="with --model: router | text | fusion | fleet (repeat; default: all)")] = [],  # noqa: B006
    records: Annotated[Optional[int], typer.Option(help="with --model: requests produced at once per target (default 20000, --quick 5000)")] = None,
    isolation: Annotated[bool, typer.Option("--isolation", help="tenant isolation instead (tools/bench/isolation.py): a quiet tenant's P50/P99 alone "
                                            "and next to a tenant flooding at 5x the text stage's capacity, per quota configuration, through a real "
                                            "fleet: ~6 min on 2 cores, --quick ~3-4 min")] = False,
    config: ConfigOpt = None,
) -> None:
    """Stepped open-loop load per model stage and for the whole fleet, against the model's
    batched limit and a naive consumer, on a private embedded broker (loopback only).
    Prints the tables and target ratios; writes bench.json and bench.png.
    With --model: the overhead bench (tools/bench/overhead.py), overhead.json."""
    from rtaudit.tools import bench as b
    from rtaudit.tools.bench.report import plot, tables, write_json

    for name in ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS", "RTAUDIT_KAFKA_PROFILE"):
        if os.environ.pop(name, None) is not None:
            console.print(f"[yellow]bench runs on its own embedded broker on loopback: ignoring {name}[/yellow]")
    out = out.resolve()
    if isolation:
        from rtaudit.tools.bench.isolation import IsolationOptions, main as isolation_main
        from rtaudit.tools.fleet.children import raise_keyboard_interrupt_on

        raise_keyboard_interrupt_on()
        isolation_main((IsolationOptions.quick if quick else IsolationOptions)(out_dir=out / "isolation"),
                       lambda msg: console.print(msg, markup=False, soft_wrap=True))
        return
    os.environ["RTAUDIT_STATE_DIR"] = str(out / "state")
    if config is not None:
        os.environ["RTAUDIT_CONFIG"] = str(config.resolve())
    s = settings_or_exit(config)
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

    def on_step(step) -> None:
        console.print(f"  {step.target:28} offered {step.offered_per_s:9.2f}/s  achieved {step.achieved_per_s:9.2f}/s  "
                      f"P50 {step.p50_ms:7.0f}  P99 {step.p99_ms:7.0f} ms  miss {step.slo_misses}/{step.sent}  "
                      f"CPU% {' '.join(f'{k} {v:.0f}' for k, v in step.cpu_pct.items())}", markup=False)

    # SIGTERM (e.g. `timeout`) and SIGHUP unwind like Ctrl-C: the workers and the broker are
    # stopped; whatever else ends this process, its children die with it (tools/fleet/children.py)
    from rtaudit.tools.fleet.children import raise_keyboard_interrupt_on

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
    from rtaudit.tools.fleet.children import raise_keyboard_interrupt_on
    from rtaudit.tools.bench.overhead import MODELS, TARGETS, OverheadBench, OverheadOptions
    from rtaudit.tools.bench.report import overhead_table, write_overhead_json

    if model not in MODELS:
        raise typer.BadParameter(f"--model must be one of {', '.join(MODELS)}, got {model!r}")
    bad = [r for r in roles if r not in TARGETS]
    if bad:
        raise typer.BadParameter(f"--role must be among {', '.join(TARGETS)}, got {bad}")
    values: dict[str, object] = {"model": model, "targets": roles or TARGETS, "out_dir": out, "config": config.resolve() if config else None}
    if records is not None:
        values["records"] = records
    opts = OverheadOptions.quick(**values) if quick else OverheadOptions(**values)  # type: ignore[arg-type]  # CLI values keyed by field name, checked by the dataclass at run time
    console.print(f"rtaudit bench --model {model}: {', '.join(opts.targets)}; {opts.records:,} requests per target; results in {out}")
    raise_keyboard_interrupt_on()
    run = OverheadBench(opts, s, lambda msg: console.print(msg, markup=False)).run()
    if run.interrupted:
        console.print("[yellow]interrupted: results of the targets finished before[/yellow]")
    console.print(overhead_table(run))
    console.print(f"wrote {write_overhead_json(run, out / 'overhead.json')} ({run.wall_s:.0f} s)")


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
    from rtaudit.tools.fleet.children import raise_keyboard_interrupt_on
    from rtaudit.tools.fuzz.harness import FuzzOptions, run, tables

    for name in ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS", "RTAUDIT_KAFKA_PROFILE", "RTAUDIT_CONFIG"):
        if os.environ.pop(name, None) is not None:
            console.print(f"[yellow]fuzz runs on its own embedded broker and settings: ignoring {name}[/yellow]")
    n = count if count is not None else (1_000 if quick else 10_000)
    if n < 1:
        raise typer.BadParameter(f"--count must be at least 1, got {n}")
    settings_or_exit(None)  # the harness loads them with its own port: a bad variable is one line here
    raise_keyboard_interrupt_on()
    try:
        report = run(FuzzOptions(count=n, seed=seed, out_dir=out, timeout_s=timeout),
                     on_event=lambda msg: console.print(msg, markup=False, highlight=False))
    except KeyboardInterrupt:
        console.print("interrupted: the fleet and its broker were stopped")
        raise typer.Exit(130) from None
    except RuntimeError as exc:
        raise fail(str(exc), 1) from None
    for table in tables(report):
        console.print(table)
    for line in report.failures:
        console.print(line, style="red", markup=False, highlight=False)
    console.print(f"worker logs: {report.log_dir}")
    if not report.ok:
        raise typer.Exit(1)


def chaos(
    kills: Annotated[Optional[int], typer.Option("--kills", help="kill -9 faults, random workers every few seconds (default 20, --quick 5)")] = None,
    duration: Annotated[Optional[float], typer.Option("--duration", help="seconds of load (default 180, --quick 45)")] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed of the fault plan and of the load")] = 1,
    quick: Annotated[bool, typer.Option("--quick", help="under a minute of load: 5 kills, no rolling restart")] = False,
    rate: Annotated[float, typer.Option("--rate", help="requests/s (3 % with a drawn image, 1 % an image of words)")] = 5.0,
    rolling: Annotated[Optional[bool], typer.Option("--rolling/--no-rolling", help="rolling SIGTERM restart of every role (default: on unless --quick)")] = None,
    slo_ms: Annotated[int, typer.Option("--slo-ms", help="each request's SLO, ms")] = 10_000,
    out: Annotated[Path, typer.Option(help="folder for chaos runs (logs, chaos.json)")] = Path(".rtaudit/chaos"),
    scenario: Annotated[list[str], typer.Option("--scenario", "-S", help="kills | scale | slow | saturate | broker (repeat; default: all)")] = [],  # noqa: B006
    config: ConfigOpt = None,
) -> None:
    """Steady mixed load (text, images, OCR) through a supervised fleet on a private embedded
    broker while random workers are killed with kill -9 (and, unless --quick, every role is
    restarted with SIGTERM in turn); then, on a fleet of their own, a role scaled up and down, a
    stage slower than the poll interval, a saturated high lane and broker restarts under a
    long-running client (docs/chaos.md). One table row per scenario. Exit 1 when a target fails
    (a request lost, a crash, different verdicts for one id, a duplicate through the client,
    the low lane past its SLO, the client not delivering within 30 s of the broker's return)."""
    from rtaudit.tools import chaos as c
    from rtaudit.tools.chaos.extended import run_extended, write_extended
    from rtaudit.tools.chaos.rows import COLUMNS, table_rows
    from rtaudit.tools.chaos.scenarios import ScenarioOptions
    from rtaudit.tools.fleet.local import FleetNotReady
    from rtaudit.tools.fleet.children import raise_keyboard_interrupt_on

    for name in ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS", "RTAUDIT_KAFKA_PROFILE"):
        if os.environ.pop(name, None) is not None:
            console.print(f"[yellow]chaos runs on its own embedded broker on loopback: ignoring {name}[/yellow]")
    if config is not None:
        os.environ["RTAUDIT_CONFIG"] = str(config.resolve())
    s = settings_or_exit(config)
    base = c.ChaosOptions.quick() if quick else c.ChaosOptions()
    kw: dict[str, object] = dict(seed=seed, rate=rate, slo_ms=slo_ms, out_dir=out.resolve(), config=config.resolve() if config else None)
    if kills is not None:
        kw["kills"] = kills
    if duration is not None:
        kw["duration_s"] = duration
    if rolling is not None:
        kw["rolling"] = c.ROLES if rolling else ()
    opts = dataclasses.replace(base, **kw)  # type: ignore[arg-type]  # CLI values keyed by field name, checked by the dataclass at run time
    sopts = (ScenarioOptions.quick if quick else ScenarioOptions)(seed=seed, out_dir=out.resolve(),
                                                                  config=config.resolve() if config else None)
    raise_keyboard_interrupt_on()
    try:
        ext = run_extended(tuple(scenario) or c.SCENARIOS, opts, sopts, s, lambda msg: console.print(msg, markup=False, highlight=False))
    except ValueError as exc:
        raise fail(str(exc), 2) from None
    except FleetNotReady as exc:
        raise fail(str(exc), 1) from None
    if ext.kills is not None:
        _kills_table(ext.kills, opts, out)
    table = Table(*COLUMNS, title=f"rtaudit chaos ({ext.run_id}, seed {seed}, {ext.wall_s:.0f} s in all)")
    for cells in table_rows(ext.rows):
        table.add_row(*cells)
    console.print(table)
    console.print(f"wrote {write_extended(ext, out.resolve() / ext.run_id / 'extended.json')}", markup=False, highlight=False)
    if not ext.ok:
        raise typer.Exit(1)


def _kills_table(run: "ChaosRun", opts: "ChaosOptions", out: Path) -> None:
    """The kill run's own table (every measure of :func:`rtaudit.tools.chaos.result_rows`)."""
    from rtaudit.tools import chaos as c

    table = Table("measure", "value", title=f"rtaudit chaos kills ({run.run_id}, seed {opts.seed}, {run.load_s:.0f} s of load)")
    for name, value in c.result_rows(run.result, opts.slo_ms):
        table.add_row(name, value)
    console.print(table)
    for rid, records in list(run.repeated.items())[:3]:
        console.print(f"repeated {rid}: " + " | ".join(
            f"{'complete' if v.complete else 'incomplete'} {v.decision} at {v.decided_at_ms}: {'; '.join(v.reasons[:2])}" for v in records),
            markup=False, highlight=False)
    console.print(f"restarts by the supervisor: {run.restarts}; wrote {c.write_json(run, out.resolve() / run.run_id / 'chaos.json')}; "
                  f"worker logs in {run.log_dir} ({run.wall_s:.0f} s in all)", markup=False, highlight=False)
