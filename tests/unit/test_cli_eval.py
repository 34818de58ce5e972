"""``rtaudit eval`` without its labeled data: one line that says what is missing and where to put it."""

from __future__ import annotations

from typer.testing import CliRunner

from rtaudit.cli.main import app
from rtaudit.cli.text import DEFAULT_DATA


def test_eval_without_data_is_one_clear_line_and_a_non_zero_exit(tmp_path):
    missing = tmp_path / "no-such-data"
    result = CliRunner().invoke(app, ["eval", "--quick", "--data", str(missing)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "evaluation data not found" in lines[0] and str(missing) in lines[0]
    assert str(DEFAULT_DATA) in lines[0] and "--data" in lines[0]
    assert "Traceback" not in result.output


def test_eval_names_the_missing_files_of_a_partial_data_dir(tmp_path):
    (tmp_path / "text" / "davidson").mkdir(parents=True)
    (tmp_path / "text" / "davidson" / "labeled_data.csv").write_text("tweet,class\n")
    result = CliRunner().invoke(app, ["eval", "--quick", "--data", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "dataset files missing under" in result.output and "olid" in result.output


def test_markdown_table_keeps_every_cell_as_plain_text():
    from rich.table import Table

    from rtaudit.cli.common import markdown_table

    t = Table("language", "R", "target", title="Other languages")
    t.add_row("es", "0.626", "[green]met[/green]")
    t.add_row("a | b", "0.500", "[red]not met[/red]")
    assert markdown_table(t).splitlines() == [
        "**Other languages**", "", "| language | R | target |", "|---|---|---|",
        "| es | 0.626 | met |", "| a \\| b | 0.500 | not met |"]


def test_eval_functional_markdown_prints_the_suite_as_one_markdown_table():
    from rtaudit.modelbuild.text.functional import FUNCTIONALITIES

    result = CliRunner().invoke(app, ["eval", "--functional", "--markdown"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("| ") and not line.startswith("| functionality")]
    assert len(rows) == len(FUNCTIONALITIES) and "[green]" not in result.output and "┃" not in result.output


def test_eval_speech_without_clips_says_where_they_go(tmp_path):
    result = CliRunner().invoke(app, ["eval", "--speech", "--data", str(tmp_path)])
    assert result.exit_code == 2
    assert "evaluation data not found" in result.output and "audio/manifest.csv" in result.output


def test_the_safety_data_folder_resolves_for_train_finetune_and_eval(tmp_path, monkeypatch):
    """``rtaudit text train|finetune`` and ``rtaudit eval`` resolve the threat/self-harm data folder first: an
    explicit ``--safety-data`` wins, else ``$RTAUDIT_SAFETY_DATA`` (the module it reads from is the training code's)."""
    from rtaudit.cli.text import _safety_root

    assert _safety_root(tmp_path) == tmp_path
    monkeypatch.setenv("RTAUDIT_SAFETY_DATA", str(tmp_path / "safety"))
    assert _safety_root(None) == tmp_path / "safety"
