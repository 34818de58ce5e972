"""``rtaudit chaos --quick`` end to end: a supervised fleet on its own embedded broker,
mixed load (text, drawn images, images of words) while workers are killed with kill -9
(every role once) and restarted by the supervisor; audit.verdicts read whole afterwards.

Asserts the promise, not the latency: every acknowledged request has a verdict (0 lost)
and the client never yields a request id twice (0 client-visible duplicates). Raw
duplicate records are allowed (at-least-once; identical by design) but must be
identical. Runs on its own broker and fleet, not the session fixture's."""

from __future__ import annotations

import pytest

from rtaudit.tools.chaos import ROLES, Chaos, ChaosOptions, fault_line
from rtaudit.workers.settings import load_settings

pytestmark = pytest.mark.integration


@pytest.mark.timeout(600)  # a fleet start takes 30-170 s on a shared 2-core machine, the run about 80 s
def test_quick_chaos_loses_nothing_and_the_client_sees_no_duplicate(tmp_path) -> None:  # type: ignore[no-untyped-def]
    opts = ChaosOptions.quick(out_dir=tmp_path, seed=11, rate=4.0)
    lines: list[str] = []
    run = Chaos(opts, load_settings(None), lines.append).run()
    r = run.result
    t0 = min((f.at_ms for f in run.faults), default=0)
    story = "\n".join([*lines, *(fault_line(f, t0) for f in run.faults), f"logs: {run.log_dir}"])
    assert sorted(f.fault.role for f in run.faults if f.pid is not None) == sorted(ROLES), story
    assert sum(run.restarts.values()) >= len(ROLES), story
    assert r.sent > 100, story
    assert r.lost == [], f"requests without a verdict: {r.lost}\n{story}"
    assert r.client_duplicates == {}, f"request ids the client yielded twice: {r.client_duplicates}\n{story}"
    assert r.conflicting_duplicates == [], f"repeated verdicts that differ: {r.conflicting_duplicates}\n{story}"
    assert r.ok, story
