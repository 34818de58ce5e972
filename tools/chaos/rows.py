"""The extended chaos table (pure): one row per scenario and the targets each row is held to.

Targets (issue 34): 0 lost, 0 worker crashes other than those the harness causes, 0 ids with two
different verdicts, 0 duplicates through the client, every low-lane request within its SLO while
the high lane is saturated, and a long-running client delivering again within
:data:`RECOVERY_TARGET_S` of the broker's return.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from rtaudit.tools.chaos.tally import ChaosResult

#: a long-running client delivers again within this long of the broker's return, s (issue 34).
RECOVERY_TARGET_S = 30.0
#: the scenarios of ``rtaudit chaos``, in the order one run plays them (``broker`` last: a restart
#: of the memory-only broker wipes every topic).
SCENARIOS = ("kills", "scale", "slow", "saturate", "broker")
#: the fleet supervisor's line for a worker that exited (:meth:`rtaudit.tools.fleet.local.Fleet.check`).
EXIT_LINE = re.compile(r"^(?P<name>[a-z]+-\d+) \(pid (?P<pid>\d+)\) exited with ")


@dataclass
class ScenarioRow:
    """One row of the table.

    Attributes:
        scenario: one of :data:`SCENARIOS`.
        sent: requests the broker acknowledged (for ``broker``: the broker that answered at the end,
            or the earlier one if their verdicts arrived; see ``wiped``).
        not_acknowledged: requests built but never acknowledged by any broker.
        verdicts: distinct request ids of ``sent`` with a verdict.
        lost: ids of ``sent`` without a verdict.
        duplicates: extra verdict records seen by a raw consumer (identical repeats are allowed).
        different: ids whose verdict records differ (decision, completeness, parts or reasons).
        client_duplicates: ids a deduplicating client reader yielded twice.
        crashes: worker exits the harness did not cause (``"<role>-<i> pid <pid>"`` each).
        p99_during_ms / p99_after_ms: end-to-end P99 (creation to the verdict's arrival), ms, of the
            requests created during the disturbance and after it (``inf``: a lost request).
        figures: scenario-specific figures, ``name → text``, printed after the common columns.
        misses: scenario-specific targets missed (one short sentence each); :attr:`failed` adds the common ones.
    """

    scenario: str
    sent: int
    not_acknowledged: int
    verdicts: int
    lost: list[str]
    duplicates: int
    different: list[str]
    client_duplicates: list[str]
    crashes: list[str]
    p99_during_ms: float | None
    p99_after_ms: float | None
    figures: dict[str, str] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        """Every target this row misses, the common ones first; empty: the row passes."""
        common = [
            (self.lost, f"{len(self.lost)} lost"),
            (self.not_acknowledged, f"{self.not_acknowledged} never acknowledged"),
            (self.crashes, f"{len(self.crashes)} worker crashes"),
            (self.different, f"{len(self.different)} ids with different verdicts"),
            (self.client_duplicates, f"{len(self.client_duplicates)} duplicates through the client"),
        ]
        return [why for bad, why in common if bad] + self.misses

    @property
    def ok(self) -> bool:
        return not self.failed


def row_from_result(scenario: str, r: ChaosResult, crashes: list[str]) -> ScenarioRow:
    """The row of a kill -9 / rolling SIGTERM run (:func:`rtaudit.tools.chaos.tally.tally`)."""
    row = ScenarioRow(
        scenario, r.sent, r.not_acknowledged, r.verdicts, list(r.lost), sum(n - 1 for n in r.raw_duplicates.values()),
        list(r.conflicting_duplicates), sorted(r.client_duplicates), crashes, r.p99_during_ms, r.p99_after_ms,
        figures={"faults": f"{r.kills} kill -9, {r.terms} SIGTERM",
                 "recovered": "n/a" if r.recover_s is None else f"{r.recover_s:.0f} s after the last fault"},
    )
    return row


def unexplained_exits(lines: list[tuple[int, str]], caused_pids: set[int], since_ms: int = 0, until_ms: int | None = None) -> list[str]:
    """Worker exits the harness did not cause: the supervisor's exit lines (``(wall ms, line)``)
    within ``[since_ms, until_ms]`` whose pid is not in ``caused_pids``, as ``"text-0 pid 123"``."""
    out = []
    for at_ms, line in lines:
        m = EXIT_LINE.match(line)
        if m and at_ms >= since_ms and (until_ms is None or at_ms <= until_ms) and int(m["pid"]) not in caused_pids:
            out.append(f"{m['name']} pid {m['pid']}")
    return out


def fmt_ms(x: float | None) -> str:
    """``1,234 ms``, ``never (lost)`` for ``inf``, ``n/a`` for ``None``."""
    return "n/a" if x is None else ("never (lost)" if math.isinf(x) else f"{x:,.0f} ms")


#: columns of the table (:func:`table_rows`).
COLUMNS = ("scenario", "sent", "verdicts", "lost", "duplicates (raw / client)", "different verdicts for one id",
           "worker crashes", "P99 during", "P99 after", "scenario figures", "target")


def table_rows(rows: list[ScenarioRow]) -> list[tuple[str, ...]]:
    """One tuple of strings per row, in :data:`COLUMNS` order."""
    out: list[tuple[str, ...]] = []
    for r in rows:
        sent = f"{r.sent}" + (f" (+{r.not_acknowledged} not acked)" if r.not_acknowledged else "")
        figures = "; ".join(f"{k} {v}" for k, v in r.figures.items())
        crashes = f"{len(r.crashes)}" + (f" ({', '.join(r.crashes[:3])})" if r.crashes else "")
        out.append((r.scenario, sent, str(r.verdicts), str(len(r.lost)), f"{r.duplicates} / {len(r.client_duplicates)}",
                    str(len(r.different)), crashes, fmt_ms(r.p99_during_ms), fmt_ms(r.p99_after_ms), figures,
                    "ok" if r.ok else "FAILED: " + "; ".join(r.failed)))
    return out


def markdown(rows: list[ScenarioRow]) -> str:
    """The table as Markdown (for reports and ``chaos.md``)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells) + " |" for cells in table_rows(rows)]
    return "\n".join(lines)
