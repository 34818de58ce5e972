"""What every ``rtaudit`` command module shares: one-line errors and settings loading."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from rtaudit.workers.settings import Settings, SettingsError, load_settings

#: the console commands print tables on (at least 140 columns: tables stay readable when piped).
console = Console(width=max(140, Console().width))
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="settings file (default: $RTAUDIT_CONFIG or ./rtaudit.toml)")]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print ``message`` as one red line on stderr; returns the ``typer.Exit`` to raise with
    ``code`` (2: bad input or settings, 1: the operation failed)."""
    Console(stderr=True).print(f"[red]{escape(message)}[/red]", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def settings_or_exit(config: Path | None) -> Settings:
    """The settings (``config``, else ``$RTAUDIT_CONFIG`` or ``./rtaudit.toml``); a bad file or
    variable exits 2 with one line."""
    try:
        return load_settings(config)
    except SettingsError as exc:
        raise fail(str(exc)) from None
