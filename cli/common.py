"""What every ``rtaudit`` command module shares: one-line errors and settings loading."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from rtaudit.workers.settings import Settings, SettingsError, load_settings

#: the console commands print tables on (at least 140 columns: tables stay readable when piped).
console = Console(width=max(140, Console().width))


class MarkdownConsole:
    """A stand-in for :data:`console` (its ``print`` only) that writes each :class:`rich.table.Table` as a
    GitHub-flavoured markdown table (its title a bold line above it) and any other text plain, markup
    removed: ``rtaudit eval --markdown`` prints what docs/quality.md pastes."""

    def print(self, *objects: object, markup: bool | None = None, **_: object) -> None:
        for o in objects:
            if isinstance(o, Table):
                typer.echo(markdown_table(o))
            else:
                typer.echo(Text.from_markup(o).plain if isinstance(o, str) and markup is not False else str(o))


def markdown_table(table: Table) -> str:
    """``table`` as markdown: a header row, a ``---`` row, one row per table row; cells as plain text
    (markup removed, ``|`` escaped, newlines as spaces); the title, when set, in bold on the line before."""
    def cell(c: object) -> str:
        text = c.plain if isinstance(c, Text) else Text.from_markup(c).plain if isinstance(c, str) else str(c)
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [f"**{cell(table.title)}**", ""] if table.title else []
    lines.append("| " + " | ".join(cell(c.header) for c in table.columns) + " |")
    lines.append("|" + "---|" * len(table.columns))
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in zip(*(list(c.cells) for c in table.columns))]
    return "\n".join(lines) + "\n"


#: a reST role, ``:mod:`rtaudit.x` `` or ``:func:`~rtaudit.x.f` `` or ``:class:`title <target>` ``: its text
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(?:(?P<title>[^`<]*?)\s*<[^`>]*>|(?P<tilde>~)?(?P<target>[^`]*))`")


#: a paragraph line that is laid out on purpose: indented, a list item, or Click's no-rewrap mark
_LAID_OUT = re.compile(r"(?m)^(?:\s|[-*•] |\d+\. |\x08)")


def plain(text: str) -> str:
    """``text`` (a docstring) without its reST markup, for ``--help``: a role becomes its text
    (``:mod:`rtaudit.cli.top` `` → ``rtaudit.cli.top``, ``:func:`~a.b.f` `` → ``f``, ``:ref:`x <y>` ``
    → ``x``) and a ````literal```` its content; single backticks (a command to type) stay."""
    def role(m: re.Match[str]) -> str:
        if m["title"] is not None:
            return m["title"]
        target = m["target"]
        return target.rsplit(".", 1)[-1] if m["tilde"] else target

    return _ROLE.sub(role, text).replace("``", "")


def help_text(text: str) -> str:
    """A docstring or help string as ``--help`` shows it: :func:`plain`, each paragraph on one line (Typer's
    rich help keeps a docstring's line breaks, ragged once rewrapped) unless it is laid out (a line that
    starts with a space, a list mark or ``\\b``), and rich markup escaped (``[media] allowed_file_roots``
    would lose its ``[media]``)."""
    paragraphs = inspect.cleandoc(plain(text)).split("\n\n")
    return escape("\n\n".join(p if _LAID_OUT.search(p) else " ".join(p.split("\n")) for p in paragraphs))


def plain_help(app: typer.Typer) -> typer.Typer:
    """Every command and group help of ``app`` (its subgroups too) as :func:`help_text`, whether given
    explicitly or taken from a docstring. Call it once every command is registered; returns ``app``.
    Option help strings are written plain (Typer reads them anew from the annotations each run)."""
    if isinstance(app.info.help, str):
        app.info.help = help_text(app.info.help)
    elif app.registered_callback is not None and app.registered_callback.callback is not None:
        doc = inspect.getdoc(app.registered_callback.callback)  # a group's help falls back to its callback's docstring
        if doc:
            app.info.help = help_text(doc)
    for command in app.registered_commands:
        doc = command.help or (inspect.getdoc(command.callback) if command.callback is not None else None)
        if doc:
            command.help = help_text(doc)
    for group in app.registered_groups:
        if isinstance(group.help, str):
            group.help = help_text(group.help)
        if group.typer_instance is not None:
            plain_help(group.typer_instance)
    return app


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
