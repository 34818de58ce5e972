"""``rtaudit topics create|verify`` (the topic catalogue on the broker) and ``rtaudit schemas export``
(the JSON Schema files and the AsyncAPI document); registered on the app by :mod:`rtaudit.cli.main`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from rtaudit.cli.common import ConfigOpt, console, fail, settings_or_exit
from rtaudit.workers.settings import Settings

topics_app = typer.Typer(help="Create or verify the topic catalogue.", no_args_is_help=True)
schemas_app = typer.Typer(help="Export or check the JSON Schema files.", no_args_is_help=True)


def _fail(message: str, code: int = 1) -> typer.Exit:
    """One red line on stderr (:func:`rtaudit.cli.common.fail`); here the default code is 1."""
    return fail(message, code)


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

    s = settings_or_exit(config)
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

