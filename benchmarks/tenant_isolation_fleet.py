"""Tenant isolation (issue 10) through a real fleet, with every knob: ``rtaudit bench --isolation`` runs
the defaults. The machinery and the method are in ``tools/bench/isolation.py``: router, fusion and a
text worker whose model sleeps ``--batch-ms + --item-ms`` x n per batch, on a private embedded broker;
per configuration, the quiet tenant alone then next to a tenant flooding at ``--flood-x`` x the text
stage's capacity; prints the ratio table and the per-hop table, writes ``isolation.json``.

    .venv/bin/python benchmarks/tenant_isolation_fleet.py [--quick] [--item-ms 6] [--flood-x 5] \\
        [--quota-share 0.25] [--phase-s 30] [--config throttle --config delay ...]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rtaudit.tools.bench.isolation import CONFIGS, Cost, IsolationOptions, main


def options(argv: list[str] | None = None) -> IsolationOptions:
    d = IsolationOptions()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="8 s phases, 4 s warm-up")
    ap.add_argument("--batch-ms", type=float, default=d.cost.batch_ms, help="model cost per batch, ms")
    ap.add_argument("--item-ms", type=float, default=d.cost.item_ms, help="model cost per item, ms")
    ap.add_argument("--quiet-share", type=float, default=d.quiet_share, help="quiet tenant's rate, in capacities")
    ap.add_argument("--flood-x", type=float, default=d.flood_x, help="flooding tenant's rate, in capacities")
    ap.add_argument("--quota-share", type=float, default=d.quota_share, help="flooding tenant's quota, in capacities")
    ap.add_argument("--burst-s", type=float, default=d.burst_s, help="its burst, in seconds of its quota")
    ap.add_argument("--phase-s", type=float, help=f"seconds of load per phase (default {d.phase_s:g}; --quick 8)")
    ap.add_argument("--warmup-s", type=float, help=f"seconds of warm-up (default {d.warmup_s:g}; --quick 4)")
    ap.add_argument("--config", action="append", choices=list(CONFIGS), help="configurations (repeat; default all)")
    ap.add_argument("--out", type=Path, default=d.out_dir, help="folder for isolation.json and the worker logs")
    a = ap.parse_args(argv)
    kw = dict(cost=Cost(a.batch_ms, a.item_ms), quiet_share=a.quiet_share, flood_x=a.flood_x, quota_share=a.quota_share,
              burst_s=a.burst_s, configs=tuple(a.config or CONFIGS), out_dir=a.out)
    kw.update({k: v for k, v in (("phase_s", a.phase_s), ("warmup_s", a.warmup_s)) if v is not None})
    return IsolationOptions.quick(**kw) if a.quick else IsolationOptions(**kw)  # type: ignore[arg-type]


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rtaudit.tools.fleet.children import raise_keyboard_interrupt_on

    raise_keyboard_interrupt_on()
    main(options())
