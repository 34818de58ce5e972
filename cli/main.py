"""The ``rtaudit`` command line (Typer): the app, its ``-v`` callback and the wiring of every command
module (fleet: :mod:`rtaudit.cli.fleet`; client: :mod:`rtaudit.cli.client`; the others one per group)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Annotated

import typer

from rtaudit.cli.breaker import breaker_app
from rtaudit.cli.client import submit, verdicts
from rtaudit.cli.common import plain_help
from rtaudit.cli.control import control_app
from rtaudit.cli.dlq import dlq
from rtaudit.cli.e5 import text_train_cascade, text_train_e5
from rtaudit.cli.explain import explain
from rtaudit.cli.fleet import broker, demo, down, up, worker
from rtaudit.cli.harness import bench, chaos, fuzz
from rtaudit.cli.model import model_app
from rtaudit.cli.multilingual import text_train_multilingual
from rtaudit.cli.text import eval_text, text_app
from rtaudit.cli.top import top
from rtaudit.cli.topics import schemas_app, topics_app

app = typer.Typer(help="rtaudit: real-time multimodal content moderation on Kafka.", no_args_is_help=True)
app.add_typer(topics_app, name="topics")
app.add_typer(schemas_app, name="schemas")
text_app.command("train-multilingual")(text_train_multilingual)
text_app.command("train-e5")(text_train_e5)
text_app.command("train-cascade")(text_train_cascade)
app.add_typer(text_app, name="text")
app.command("eval")(eval_text)
control_app.add_typer(breaker_app, name="breaker")
app.add_typer(control_app, name="control")
app.add_typer(model_app, name="model")
for _command in (bench, fuzz, chaos, dlq, explain, top, broker, worker, up, down, submit, verdicts, demo):
    app.command()(_command)
plain_help(app)  # the help shows docstrings without their reST markup (``literals``, :mod:`roles`)


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    _quiet_librdkafka(verbose)


def _quiet_librdkafka(verbose: bool) -> None:
    """librdkafka's own log lines only with -v (every command reports errors in one line); the
    logger (:data:`rtaudit.workers.kafka.LIBRDKAFKA_LOG`) is named here so that confluent-kafka
    is imported only by the commands that need it."""
    logging.getLogger("rtaudit.workers.kafka.librdkafka").setLevel(logging.NOTSET if verbose else logging.CRITICAL)



def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
