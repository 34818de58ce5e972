"""``rtaudit top``: a live terminal dashboard of a running fleet (:mod:`rtaudit.cli.top_view`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer

#: shown under the table when live workers serve no /metrics (their rates and percentiles read "-").
NO_METRICS = ("{missing} of {live} workers serve no /metrics, so their rates and percentiles read '-': start the fleet "
              "with metrics_port set (RTAUDIT_METRICS_PORT=<free port>; `rtaudit up` gives each worker the next port "
              "from it; 0, the default, is off)")


def top(
    interval: Annotated[float, typer.Option("--interval", "-n", min=0.2, help="seconds between refreshes")] = 1.0,
    once: Annotated[bool, typer.Option("--once", help="print one table (after two scrapes) and exit")] = False,
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="settings file")] = None,
    svg: Annotated[Optional[Path], typer.Option("--svg", help="with --once: also save the table as an SVG "
                                                "screenshot of the terminal (rich's export) to this file")] = None,
) -> None:
    """Every worker of the fleet, refreshed each second: records/s, lag, batch size and window, P50/P99,
    errors/s, versions served, semantic drift, when the worker was last seen, health. Workers come from their
    heartbeats on audit.status, one every 2 s (silent for 5 s: health "stale", with how long; for 30 s: gone); the rates from each worker's /metrics (metrics_port set: `rtaudit up` then gives each worker the next port).
    The table fits the terminal's width: below 120 columns the role, window, batch, versions... columns
    give way (cli/top_view.py GIVE_WAY); worker, rec/s, lag, P99 and health always stay."""
    if svg is not None and not once:
        raise typer.BadParameter("--svg saves one table: use it with --once", param_hint="--svg")
    from rich.console import Console, Group, RenderableType
    from rich.live import Live
    from rich.text import Text

    from rtaudit.engine.clock import now_ms
    from rtaudit.topics.catalog import STATUS
    from rtaudit.cli import control_view as view
    from rtaudit.cli.common import fail
    from rtaudit.cli.control import _connect, _Fleet
    from rtaudit.cli.drift_view import drift_table
    from rtaudit.cli.top_view import NARROW_BELOW, WINDOW_S, Scraper, table

    s = _connect(config, (STATUS,))
    fleet, scraper, console = _Fleet(s), Scraper(), Console(record=svg is not None)

    def frame() -> Group:
        fleet.refresh()
        now = now_ms()
        live = view.live_heartbeats(fleet.beats.values(), now)
        rows = scraper.rows(live.values(), now_ms=now)
        title = (f"rtaudit top — {s.bootstrap} — {len(live)} workers — rates over {WINDOW_S:.0f} s — "
                 f"{time.strftime('%H:%M:%S')}")
        width = console.size.width  # each frame fits the terminal as it is now (resized or not)
        parts: list[RenderableType] = [table(rows, title, width), drift_table(live.values(), narrow=width < NARROW_BELOW)]
        missing = sum(1 for b in live.values() if not b.metrics)
        if missing:
            parts.insert(1, Text(NO_METRICS.format(missing=missing, live=len(live)), style="yellow"))
        return Group(*parts)

    try:
        if once:
            frame()
            time.sleep(interval)
            console.print(frame())
            if svg is not None:
                console.save_svg(str(svg), title="rtaudit top")
            return
        with Live(frame(), console=console, refresh_per_second=4, screen=False) as live_view:
            while True:
                time.sleep(interval)
                live_view.update(frame())
    except KeyboardInterrupt:
        pass
    except TimeoutError as exc:
        raise fail(str(exc)) from None
    finally:
        fleet.close()
