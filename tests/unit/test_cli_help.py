"""``rtaudit ... --help`` reads as plain text: no reST markup from the docstrings it is built from
(````literals````, ``:mod:`...` `` roles) and no help text lost to rich markup (``[media]``)."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from rtaudit.cli.common import help_text, plain
from rtaudit.cli.main import app

REST = re.compile(r"``|:[a-z]+(?::[a-z]+)?:`")
#: what rich would take for a markup tag and drop (rich.markup's tag pattern), unless escaped
RICH_TAG = re.compile(r"(?<!\\)\[[a-z#/@][^\[]*?\]")


def _helps(command, path: str = "rtaudit"):  # type: ignore[no-untyped-def]
    yield path, command.help or ""
    for p in command.params:
        yield f"{path} {p.name}", getattr(p, "help", None) or ""
    for name, sub in getattr(command, "commands", {}).items():
        yield from _helps(sub, f"{path} {name}")


def test_no_help_text_holds_rest_markup_or_a_rich_tag() -> None:
    helps = list(_helps(typer.main.get_command(app)))
    assert len(helps) > 100
    bad = [f"{where}: {REST.search(text) or RICH_TAG.search(text)}" for where, text in helps
           if REST.search(text) or RICH_TAG.search(text)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("group", [[], ["text"], ["control"], ["control", "breaker"], ["control", "rollout"],
                                   ["control", "policy"], ["control", "priority"], ["model"], ["topics"], ["schemas"]])
def test_every_group_help_is_plain(group: list[str]) -> None:
    result = CliRunner().invoke(app, [*group, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert not REST.search(result.output), result.output


def test_text_help_names_what_the_docstrings_mark_up() -> None:
    out = " ".join(CliRunner().invoke(app, ["text", "--help"], env={"COLUMNS": "300"}).output.split())
    assert "(text_encoder_precision picks which one serves)" in out
    assert "HateXplain; rtaudit.modelbuild.text.cascade_train); write it" in out
    uri = " ".join(CliRunner().invoke(app, ["submit", "--help"], env={"COLUMNS": "300"}).output.split())
    assert "[media] allowed_file_roots" in uri


def test_plain_strips_roles_and_literals() -> None:
    assert plain("see :mod:`rtaudit.cli.top` and :func:`~rtaudit.x.f`, ``--base``") == "see rtaudit.cli.top and f, --base"
    assert plain(":class:`the store <rtaudit.engine.bundle_store.BundleStore>` and :py:data:`X`") == "the store and X"
    assert plain("`rtaudit up` stays") == "`rtaudit up` stays"
    assert help_text("one\ntwo [media]\n\nthree\nfour\n\n- a\n- b") == "one two \\[media]\n\nthree four\n\n- a\n- b"
