"""Resident memory across model swaps: does a process that swaps bundles N times keep its size?

``python -m rtaudit.tools.bench.bundle_memory --swaps 20 --stage text`` packages ``swaps + 1`` bundles of
the stage (the installed artifacts, one version each: ``m0``, ``m1``, ...; the first records the
golden set, the others reuse it), makes ``m0`` ready (:func:`rtaudit.engine.bundle_stage.ready_stage`:
verify, load, golden check, warm-up of every batch-size bucket), then swaps ``swaps`` times the way
a worker does: make the next version ready, drop the old stage, ``gc.collect()``. After each swap it
prints the resident set (``/proc/self/statm``; ``RssAnon`` from ``/proc/self/status``: the heap,
where onnxruntime's arenas live) and, at the end, the ratio after the last swap vs after swap 2
(issue 9: within 5 %). ``--trim`` calls :func:`rtaudit.engine.bundle_stage.reclaim_memory` instead of
``gc.collect()`` alone: it also hands the allocator's free pages back (glibc ``malloc_trim(0)``),
which tells memory the allocator keeps from memory still referenced. ``--runtime null`` measures
the harness itself. Not a test: it prints the series.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rtaudit.engine.bundle_stage import StageOptions

#: the issue's limit: resident memory after the last swap within this share of after swap 2.
LIMIT = 0.05


def rss_mib() -> tuple[float, float]:
    """``(resident, anonymous resident)`` MiB of this process (``/proc/self/statm`` and ``/proc/self/status``)."""
    page = os.sysconf("SC_PAGE_SIZE")
    resident = int(Path("/proc/self/statm").read_text().split()[1]) * page / 2**20
    anon = 0.0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            anon = int(line.split()[1]) / 1024
    return resident, anon


def make_bundles(stage: str, n: int, root: Path, runtime: str | None, options: StageOptions) -> list[Path]:
    """``n`` bundles of ``stage`` under ``root``, versions ``m0..m{n-1}`` (same files, own identity each)."""
    from rtaudit.engine.bundle import package, verify
    from rtaudit.engine.bundle_stage import package_stage

    first = package_stage(stage, "m0", root / "m0", runtime=runtime, options=options)
    m = verify(first)
    files = {name: first / name for name in m.files}
    out = [first]
    for i in range(1, n):
        out.append(package(stage, f"m{i}", files, m.golden, root / f"m{i}", m.runtime, m.params,
                           input_spec=m.input_spec, tolerance=m.tolerance))
    return out


def run(stage: str, swaps: int, runtime: str | None = None, trim: bool = False,
        batch_sizes: tuple[int, ...] | None = None, config: str | None = None) -> list[dict[str, float | str | int]]:
    """The series: one row per state (swap 0 = the first version ready), see the module docstring."""
    from rtaudit.engine.bundle_stage import ready_stage, reclaim_memory
    from rtaudit.workers.settings import load_settings

    settings = load_settings(config).stage_options()
    rows: list[dict[str, float | str | int]] = []
    with tempfile.TemporaryDirectory(prefix="rtaudit-bundle-memory-") as tmp:
        bundles = make_bundles(stage, swaps + 1, Path(tmp), runtime, settings)
        gc.collect()
        current = None
        for i, path in enumerate(bundles):
            started = time.perf_counter()
            ready = ready_stage(path, settings, batch_sizes=batch_sizes)
            ready_s = time.perf_counter() - started
            old, current = current, ready
            del old, ready
            if trim:
                reclaim_memory()
            else:
                gc.collect()
            rss, anon = rss_mib()
            rows.append({"swap": i, "version": current.manifest.version, "rss_mib": round(rss, 1),
                         "anon_mib": round(anon, 1), "ready_s": round(ready_s, 2),
                         "warm_ms": json.dumps(current.warm_ms)})
            print(f"swap {i:3d}  {current.manifest.version:>4}  rss {rss:8.1f} MiB  anon {anon:8.1f} MiB  "
                  f"ready {ready_s:5.2f} s", file=sys.stderr, flush=True)
    return rows


def report(rows: list[dict[str, float | str | int]], stage: str, trim: bool) -> str:
    """The table and the verdict (ratio after the last swap vs after swap 2) as text."""
    base = next(r for r in rows if r["swap"] == min(2, len(rows) - 1))
    lines = [f"bundle swaps, stage {stage}{' (malloc_trim after each swap)' if trim else ''}: resident memory",
             f"{'swap':>4}  {'version':>7}  {'RSS MiB':>8}  {'vs swap 2':>9}  {'RssAnon MiB':>11}  {'ready s':>7}"]
    for r in rows:
        delta = (float(r["rss_mib"]) / float(base["rss_mib"]) - 1.0) * 100.0
        lines.append(f"{r['swap']:>4}  {r['version']:>7}  {r['rss_mib']:>8.1f}  {delta:>+8.1f}%  "
                     f"{r['anon_mib']:>11.1f}  {r['ready_s']:>7.2f}")
    last = rows[-1]
    ratio = float(last["rss_mib"]) / float(base["rss_mib"])
    anon_ratio = float(last["anon_mib"]) / float(base["anon_mib"]) if float(base["anon_mib"]) else float("nan")
    verdict = (f"within {LIMIT:.0%}" if ratio - 1.0 <= LIMIT else
               f"GROWS by {(ratio - 1.0) * 100:.1f} %, over the {LIMIT:.0%} limit: swap by recycling the process")
    lines.append(f"after swap {last['swap']} / after swap {base['swap']}: RSS x{ratio:.3f}, RssAnon x{anon_ratio:.3f} "
                 f"-> {verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--swaps", type=int, default=20)
    ap.add_argument("--stage", choices=("text", "image", "ocr"), default="text")
    ap.add_argument("--runtime", choices=("text", "nudenet", "rapidocr", "null"), default=None,
                    help="default: the stage's real runtime")
    ap.add_argument("--trim", action="store_true", help="malloc_trim(0) after each swap")
    ap.add_argument("--batch-sizes", default=None, help="warm-up buckets, e.g. 1,8,32,64 (default: the stage's)")
    ap.add_argument("--config", default=None, help="settings file (default: $RTAUDIT_CONFIG or ./rtaudit.toml)")
    ap.add_argument("--json", type=Path, default=None, help="also write the series here")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sizes = tuple(int(x) for x in args.batch_sizes.split(",")) if args.batch_sizes else None
    rows = run(args.stage, args.swaps, args.runtime, args.trim, sizes, args.config)
    print(report(rows, args.stage, args.trim))
    if args.json:
        args.json.write_text(json.dumps({"stage": args.stage, "trim": args.trim, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
