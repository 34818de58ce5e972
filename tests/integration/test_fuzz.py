"""The fuzz guarantee through a real fleet (issue 10.5), small: a few hundred mutated
requests (every mutation kind) through router + text + fusion on a private embedded
broker. Each gets a verdict or a DLQ record with a reason — a verdict whenever its id is
readable — and no worker crashes, exits or restarts. ``rtaudit fuzz`` runs 10,000."""

from __future__ import annotations

import time

import pytest

from rtaudit.tools.fuzz.harness import FuzzOptions, run
from rtaudit.tools.fuzz.mutations import KINDS

pytestmark = pytest.mark.integration


@pytest.mark.timeout(240)
def test_every_mutated_request_is_answered_and_nothing_crashes(tmp_path):
    started = time.monotonic()
    report = run(FuzzOptions(count=300, seed=1234, out_dir=tmp_path, timeout_s=60.0))
    total = report.total
    assert {row.kind for row in report.rows} == set(KINDS)
    assert total.sent == 300
    assert report.failures == [], report.failures
    assert (total.neither, total.verdict_missing, total.dlq_without_reason) == (0, 0, 0)
    assert (report.exits, report.restarts, report.crash_lines) == ([], {}, {})
    assert report.media_probes > 0 and report.media_leaks == {}
    assert report.ok
    # bad input was really sent and rejected, good input really answered
    assert total.dlq > 100 and total.verdict > 200
    print(f"fuzz: {total.sent} sent, {total.verdict} verdicts, {total.dlq} DLQ in {time.monotonic() - started:.0f} s")
