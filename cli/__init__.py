"""The ``rtaudit`` command: one Typer app (:mod:`rtaudit.cli.main`, wiring only) and one module per command
group: the fleet (:mod:`~rtaudit.cli.fleet`: broker, up, down, worker, demo), the client
(:mod:`~rtaudit.cli.client`: submit, verdicts; :mod:`~rtaudit.cli.dlq`, :mod:`~rtaudit.cli.explain`,
:mod:`~rtaudit.cli.top`), the catalogue (:mod:`~rtaudit.cli.topics`), control, model, text and harnesses.

Thin adapters over the fleet's packages: argument parsing, tables and exit codes. The command's
entry point is ``rtaudit.cli.main:app`` (pyproject ``[project.scripts]``).
"""
