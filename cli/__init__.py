"""The ``rtaudit`` command: one Typer app (:mod:`rtaudit.cli.main`) and one module per command group.

Thin adapters over the fleet's packages: argument parsing, tables and exit codes. The command's
entry point is ``rtaudit.cli.main:app`` (pyproject ``[project.scripts]``).
"""
