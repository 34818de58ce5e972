"""The fleet-event scenarios of ``rtaudit chaos`` (issue 34), short versions, on one fleet of their
own (router, text with the ``null`` model slowed to 400 ms per item in batches of 4, fusion,
``max.poll.interval.ms`` 6,000) on a private embedded broker, through one long-running client:

* scale: a second text worker joins under a backlog and leaves with SIGTERM;
* slow: the high lane full for about twice the poll interval;
* saturate: low-lane requests (10 s SLO) while the high lane is fed above capacity;
* broker: the embedded broker restarted with SIGTERM, then SIGKILL, under load (last: it wipes
  every topic).

Each asserts its row of the chaos table: 0 lost, 0 crashes, 0 different verdicts for one id, 0
duplicates through the client, and the scenario's own target (the row's ``failed`` is empty).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rtaudit.tools.chaos.rows import markdown
from rtaudit.tools.chaos.scenarios import ScenarioOptions, Scenarios
from rtaudit.workers.settings import Settings

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenarios]:
    root = tmp_path_factory.mktemp("chaos-scenarios")
    lines: list[str] = []
    s = Scenarios(ScenarioOptions.quick(out_dir=root, seed=3), Settings(state_dir=root / "state"), "itest-chaos", lines.append)
    s.start()
    try:
        yield s
    finally:
        s.stop()
        print("\n".join(lines))


def play(s: Scenarios, name: str) -> None:
    row = s.play(name)
    print(markdown([row]))
    story = f"{markdown([row])}\nlogs in {s.log_dir}"
    assert row.sent > 0, story
    assert row.lost == [] and row.verdicts == row.sent, story
    assert row.crashes == [] and row.different == [] and row.client_duplicates == [], story
    assert row.failed == [], story


@pytest.mark.timeout(240)
def test_scaling_the_text_role_up_and_down_loses_nothing_and_crashes_nothing(scenarios: Scenarios) -> None:
    play(scenarios, "scale")


@pytest.mark.timeout(240)
def test_a_lane_full_for_twice_the_poll_interval_keeps_the_worker_in_its_group(scenarios: Scenarios) -> None:
    play(scenarios, "slow")


@pytest.mark.timeout(240)
def test_the_low_lane_holds_its_slo_while_the_high_lane_is_saturated(scenarios: Scenarios) -> None:
    play(scenarios, "saturate")


@pytest.mark.timeout(420)
def test_the_long_running_client_delivers_within_30_s_of_each_broker_restart(scenarios: Scenarios) -> None:
    play(scenarios, "broker")
