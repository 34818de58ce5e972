"""One ``rtaudit chaos`` run of any of its scenarios: kill -9 / rolling SIGTERM on the whole fleet
(:class:`rtaudit.tools.chaos.run.Chaos`), then the fleet events (:class:`rtaudit.tools.chaos.scenarios.Scenarios`),
one table row each (:mod:`rtaudit.tools.chaos.rows`)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rtaudit.tools.chaos.rows import SCENARIOS, ScenarioRow, row_from_result, unexplained_exits
from rtaudit.tools.chaos.run import Chaos, ChaosOptions, ChaosRun
from rtaudit.tools.chaos.scenarios import FLEET_SCENARIOS, ScenarioOptions, Scenarios

if TYPE_CHECKING:
    from rtaudit.workers.settings import Settings


@dataclass
class ExtendedRun:
    """Rows in :data:`SCENARIOS` order; ``kills``: the kill run's own record (``None`` when not selected)."""

    run_id: str
    rows: list[ScenarioRow] = field(default_factory=list)
    kills: ChaosRun | None = None
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    def to_json(self) -> dict[str, object]:
        return {"run_id": self.run_id, "wall_s": self.wall_s,
                "rows": [{**asdict(r), "failed": r.failed} for r in self.rows]}


def run_extended(
    scenarios: tuple[str, ...], kill_options: ChaosOptions, scenario_options: ScenarioOptions, base_settings: Settings,
    say: Callable[[str], None] = print,
) -> ExtendedRun:
    """Play ``scenarios`` (a subset of :data:`SCENARIOS`; the kills on the whole fleet first, then the
    fleet events on a fleet of their own) and tally each.

    Raises:
        ValueError: an unknown scenario name, or options the fault plan refuses.
    """
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown or not scenarios:
        raise ValueError(f"unknown scenarios {unknown}: they are {', '.join(SCENARIOS)}" if unknown else "no scenario selected")
    started = time.monotonic()
    run = ExtendedRun(f"chaos-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}")
    if "kills" in scenarios:
        say("scenario kills: kill -9 and rolling SIGTERM on the whole fleet")
        run.kills = Chaos(kill_options, base_settings, say).run()
        caused = {f.pid for f in run.kills.faults if f.pid is not None}
        run.rows.append(row_from_result("kills", run.kills.result, unexplained_exits(run.kills.exits, caused)))
    fleet_events = tuple(s for s in FLEET_SCENARIOS if s in scenarios)
    if fleet_events:
        say(f"scenarios {', '.join(fleet_events)} on a fleet of their own")
        opts = ScenarioOptions(**{**asdict(scenario_options), "scenarios": fleet_events})
        run.rows += Scenarios(opts, base_settings, run.run_id, say).run()
    run.wall_s = time.monotonic() - started
    return run


def write_extended(run: ExtendedRun, path: Path) -> Path:
    """``extended.json``: every row with what it missed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run.to_json(), indent=1, default=str))
    return path
