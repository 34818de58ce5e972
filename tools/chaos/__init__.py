"""``rtaudit chaos``: steady mixed load through a supervised fleet while workers are killed.

The harness (issue 10.4), on a private embedded broker on a free loopback port:

1. starts a supervised :class:`rtaudit.tools.fleet.local.Fleet` with every role (router, text, image,
   OCR, fusion), ready once a probe request gets a complete verdict;
2. sends open-loop mixed load for ``duration_s``: text requests, text + a small drawn
   image (image and OCR stages), and a few images of rendered words (OCR reads them),
   all built here, images with Pillow;
3. meanwhile runs the fault plan (:func:`plan_faults`, seeded): ``kill -9`` of the
   process group of a random worker every few seconds, and, half way through, a rolling
   ``SIGTERM`` restart of every role, one after the other (each role must serve a fresh
   request before the next one is stopped). The supervisor restarts every one of them;
4. stops the load, waits until every request has a verdict or the last deadline + the
   fusion grace (+ a margin) has passed, reads ``audit.verdicts`` whole twice: with a raw
   consumer (every record counts) and through the client (:func:`rtaudit.workers.client.verdict_reader`,
   which drops repeated request ids), and tallies (:func:`tally`).

Then the fleet events on a fleet of their own (:mod:`rtaudit.tools.chaos.scenarios`: scale a
role, a stage slower than the poll interval, a saturated high lane, broker restarts under a
long-running client), one table row per scenario (:mod:`rtaudit.tools.chaos.rows`), played by
:func:`rtaudit.tools.chaos.extended.run_extended`.

Latency is end to end, from the request's ``created_at_ms`` to the verdict's arrival at a
reader that runs for the whole load (through the client). The pure parts (the fault plan,
:class:`Progress`, :func:`tally`, :func:`p99`) need no Kafka and are unit-tested.
"""

from __future__ import annotations

from rtaudit.tools.chaos.plan import ANSWERED, Fault, KINDS, LATE_CAP_S, LATE_IDLE_S, ROLES, ROLLING_STEP_S, ROLLING_WAIT_S, SETTLE_MARGIN_S, TENANT, plan_faults
from rtaudit.tools.chaos.tally import ChaosResult, Progress, RawVerdict, Sent, p99, recovery_s, result_rows, tally
from rtaudit.tools.chaos.load import OCR_PHRASES, RequestMaker, _png, drawn_images, rendered_images
from rtaudit.tools.chaos.run import Chaos, ChaosOptions, ChaosRun, FaultDone, fault_line, free_port, write_json
from rtaudit.tools.chaos.rows import RECOVERY_TARGET_S, SCENARIOS, ScenarioRow, markdown, row_from_result, table_rows, unexplained_exits
from rtaudit.tools.chaos.scenarios import FLEET_SCENARIOS, ScenarioOptions, Scenarios
from rtaudit.tools.chaos.extended import ExtendedRun, run_extended, write_extended

__all__ = [
    "ExtendedRun",
    "FLEET_SCENARIOS",
    "RECOVERY_TARGET_S",
    "SCENARIOS",
    "ScenarioOptions",
    "ScenarioRow",
    "Scenarios",
    "markdown",
    "row_from_result",
    "run_extended",
    "table_rows",
    "unexplained_exits",
    "write_extended",
    "ANSWERED",
    "Chaos",
    "ChaosOptions",
    "ChaosResult",
    "ChaosRun",
    "Fault",
    "FaultDone",
    "KINDS",
    "LATE_CAP_S",
    "LATE_IDLE_S",
    "OCR_PHRASES",
    "Progress",
    "ROLES",
    "ROLLING_STEP_S",
    "ROLLING_WAIT_S",
    "RawVerdict",
    "RequestMaker",
    "SETTLE_MARGIN_S",
    "Sent",
    "TENANT",
    "_png",
    "drawn_images",
    "fault_line",
    "free_port",
    "p99",
    "plan_faults",
    "recovery_s",
    "rendered_images",
    "result_rows",
    "tally",
    "write_json",
]
