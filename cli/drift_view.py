"""The ``drift`` section of ``rtaudit control status`` (and ``rtaudit top``): per stage and tenant, each
worker's latest drift readings from its heartbeat, with the alert matrix's thresholds applied."""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.table import Table

from rtaudit.engine.drift import DRIFT_ALERT, TICKET_DRIFT
from rtaudit.schemas.control import Heartbeat

#: a PSI above this is a major shift of a category's score distribution (engine/drift.py).
PSI_MAJOR = 0.25


def drift_rows(beats: Iterable[Heartbeat]) -> list[tuple[str, str, str, str, str, str, str]]:
    """``(stage, tenant, worker, semantic, windows, worst PSI, state)`` per reading, sorted by stage,
    tenant, worker; ``state``: ``page`` (>= 0.4), ``alert`` (> 0.3), ``watch`` (>= 0.25 or a PSI > 0.25) or ``ok``."""
    rows = []
    for b in beats:
        for d in b.drift:
            worst = max(d.psi.items(), key=lambda kv: kv[1], default=None)
            sem = d.semantic
            if sem is not None and sem >= TICKET_DRIFT[1]:
                state = "page"
            elif sem is not None and sem > DRIFT_ALERT:
                state = "alert"
            elif (sem is not None and sem >= TICKET_DRIFT[0]) or (worst is not None and worst[1] > PSI_MAJOR):
                state = "watch"
            else:
                state = "ok"
            rows.append((d.stage, d.tenant, b.worker_id, "-" if sem is None else f"{sem:.4f}", str(d.windows),
                         "-" if worst is None else f"{worst[0]} {worst[1]:.3f}", state))
    return sorted(rows)


def drift_table(beats: Iterable[Heartbeat], narrow: bool = False) -> Table:
    """The drift section as a rich table (one row per worker, stage and tenant); ``narrow`` (an 80-column
    terminal): short headers and no vertical borders."""
    headers = ("stage", "tenant", "worker", "semantic" if narrow else "semantic drift", "win" if narrow else "windows",
               "worst PSI", "state")
    table = Table(*headers, box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD, pad_edge=not narrow, collapse_padding=narrow,
                  title=f"drift: semantic alert above {DRIFT_ALERT}, page at {TICKET_DRIFT[1]}; PSI > {PSI_MAJOR}"
                        f"{'' if narrow else ' is'} a major shift")
    for row in drift_rows(beats):
        table.add_row(*row, style={"page": "bold red", "alert": "red", "watch": "yellow"}.get(row[-1]))
    return table
