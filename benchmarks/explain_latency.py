"""Verdict latency of image requests with the explain role on and off, in one run (issue 38).

Usage: ``python benchmarks/explain_latency.py [--rate 0.5] [--phase-s 60] [--cycles 2] [--out DIR]``

One fleet (router, image, OCR, fusion: the roles an image request's verdict waits for) on a
private embedded broker, settings as ``rtaudit.toml`` except ``[explain] decisions`` = every
decision, so that *every* verdict costs a heatmap (the worst case; the default explains only
``review`` and ``block``). Load: image requests (scikit-image's photos, CC0, cycled) sent open
loop at ``--rate`` per second, each with a 60 s SLO so none expires. Phases alternate
``off, on, on, off, off, on…`` (``--cycles`` pairs, so a drift of the machine's load over the run
weighs on both alike) with the same load and the same worker processes:
for an ``on`` phase the explain role is started and the phase begins only once it has caught
up (an explanation for every earlier request); for an ``off`` phase it is stopped (SIGTERM).
Between phases the fleet drains (every verdict of the phase arrived).

Latency: the verdict's arrival at this process minus the request's ``created_at_ms`` (end to
end, as ``rtaudit demo``). Printed: one row per phase (verdicts, P50/P95/P99/max ms,
explanations the role published during the phase and their median compute ms, CPU seconds
of each process), then the pooled ``off`` and ``on`` rows and the ratio on/off.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROLES = ("router", "image", "ocr", "fusion")
TENANT = "bench-explain"
SLO_MS = 60_000


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


@dataclass
class Collector:
    """Verdicts and explanations read in background threads: ``request_id → (record, arrived_ms)``."""

    settings: object
    verdicts: dict = field(default_factory=dict)
    explanations: dict = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        from rtaudit.workers.client import explanation_reader, verdict_reader

        for reader, into in ((verdict_reader(self.settings), self.verdicts),  # type: ignore[arg-type]
                             (explanation_reader(self.settings), self.explanations)):  # type: ignore[arg-type]
            threading.Thread(target=self._run, args=(reader, into), daemon=True).start()

    def _run(self, reader, into: dict) -> None:  # type: ignore[no-untyped-def]
        with reader:
            while not self.stop.is_set():
                for record, arrived in reader.stream(timeout_s=1.0):
                    into.setdefault(record.request_id, (record, arrived))

    def wait(self, into: dict, ids: list[str], timeout_s: float) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if all(i in into for i in ids):
                return True
            time.sleep(0.2)
        return False


@dataclass
class Phase:
    name: str
    explain: bool
    ids: list[str]
    started_ms: int
    ended_ms: int
    cpu: dict[str, float]
    load: tuple[float, float]  # the machine's 1-minute load average at the phase's start and end


def images() -> list[tuple[str, bytes]]:
    from rtaudit.tools.demo.corpus import PHOTOS, skimage_file

    return [(name, skimage_file(name)) for name in PHOTOS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=0.5, help="image requests per second")
    ap.add_argument("--phase-s", type=float, default=60.0, help="seconds of load per phase")
    ap.add_argument("--cycles", type=int, default=2, help="off/on pairs")
    ap.add_argument("--out", type=Path, help="folder for the settings file and the worker logs (default: a temp dir)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from rtaudit.engine.clock import now_ms
    from rtaudit.schemas.messages import AuditRequest, MediaItem
    from rtaudit.tools.bench.rig import free_port, tree_cpu_seconds
    from rtaudit.workers.client import AuditClient
    from rtaudit.tools.fleet.local import Fleet
    from rtaudit.workers.settings import load_settings

    out = args.out or Path(tempfile.mkdtemp(prefix="explain-latency-"))
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = out / "rtaudit.toml"
    config.write_text(_settings_file((ROOT / "rtaudit.toml").read_text(), port, out))
    settings = load_settings(config, embedded_port=port)
    assert set(settings.explain.decisions) == {"allow", "review", "block"}, settings.explain.decisions
    fleet = Fleet(settings, config=config, roles=ROLES, log_dir=out / "logs", env={"RTAUDIT_STATE_DIR": str(out / "state")})
    photos = [(n, base64.b64encode(d).decode()) for n, d in images()]
    run = uuid.uuid4().hex[:6]
    sent: list[str] = []
    print(f"fleet {', '.join(ROLES)} (+ explain in the on phases) on 127.0.0.1:{port}; logs in {out / 'logs'}", flush=True)
    fleet.launch()
    collector = Collector(settings)
    client = AuditClient(settings)

    def request(rid: str, k: int) -> AuditRequest:
        name, b64 = photos[k % len(photos)]
        return AuditRequest(request_id=rid, tenant_id=TENANT, created_at_ms=now_ms(), slo_ms=SLO_MS,
                            media=[MediaItem(type="image", data_b64=b64, name=name)])

    def send(tag: str, seconds: float) -> list[str]:
        ids, t0 = [], time.monotonic()
        n = max(1, round(seconds * args.rate))
        for k in range(n):
            due = t0 + k / args.rate
            time.sleep(max(0.0, due - time.monotonic()))
            rid = f"xl-{run}-{tag}-{k:04d}"
            client.submit(request(rid, k))
            ids.append(rid)
        client.flush()
        sent.extend(ids)
        return ids

    def cpu() -> dict[str, float]:
        got = {role: sum(tree_cpu_seconds(p.pid) for p in procs) for role, procs in fleet.processes.items()}
        if fleet.broker is not None and fleet.broker.process is not None:
            got["broker"] = tree_cpu_seconds(fleet.broker.process.pid)
        return got

    phases: list[Phase] = []
    try:
        collector.start()
        started = time.monotonic()
        while True:  # readiness: one image request's complete verdict
            if fleet.exited():
                raise SystemExit(f"workers exited: {fleet.exited()}; logs in {out / 'logs'}")
            (probe,) = send(f"ready{len(sent)}", 1 / args.rate)
            if collector.wait(collector.verdicts, [probe], 30) and collector.verdicts[probe][0].complete:
                break
            if time.monotonic() - started > 240:
                raise SystemExit(f"no verdict within 240 s; logs in {out / 'logs'}")
        print(f"fleet ready in {time.monotonic() - started:.0f} s; warm-up {args.phase_s / 2:.0f} s", flush=True)
        warm = send("warm", args.phase_s / 2)
        collector.wait(collector.verdicts, warm, 120)
        for cycle in range(args.cycles):
            # off, on, on, off, off, on...: a drift of the machine's load over the run hits both alike
            for explain in ((False, True) if cycle % 2 == 0 else (True, False)):
                name = f"{'on' if explain else 'off'}-{cycle + 1}"
                if explain and "explain" in fleet.processes:
                    pass  # on, on: the role keeps running
                elif explain:
                    t = time.monotonic()
                    fleet.spawn("explain")
                    # the role replays what it missed (its group's committed offsets): the phase starts once caught up
                    caught = collector.wait(collector.explanations, list(sent), 300)
                    print(f"  explain started, caught up with {len(sent)} requests in {time.monotonic() - t:.0f} s"
                          f"{'' if caught else ' (TIMED OUT)'}", flush=True)
                elif "explain" in fleet.processes:
                    fleet.kill("explain", signal.SIGTERM)
                before, t_start, load0 = cpu(), now_ms(), os.getloadavg()[0]
                ids = send(name, args.phase_s)
                ok = collector.wait(collector.verdicts, ids, 180)
                after = cpu()
                phases.append(Phase(name, explain, ids, t_start, now_ms(),
                                    {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}, (load0, os.getloadavg()[0])))
                print(f"  phase {name}: {len(ids)} requests{'' if ok else ' (some verdicts missing)'}", flush=True)
    finally:
        collector.stop.set()
        fleet.stop()

    _print(phases, collector, args)
    raw = {p.name: {"explain": p.explain, "load": p.load, "cpu_s": p.cpu,
                    "latency_ms": [collector.verdicts[i][1] - collector.verdicts[i][0].created_at_ms for i in p.ids if i in collector.verdicts]}
           for p in phases}
    (out / "latencies.json").write_text(json.dumps(raw, indent=1))
    print(f"per-request latencies: {out / 'latencies.json'}")


def _settings_file(base: str, port: int, out: Path) -> str:
    """The repository's ``rtaudit.toml`` with every decision explained, a private broker port, state
    under ``out`` and no metrics ports (top-level keys go before the first table)."""
    marker = 'decisions = ["review", "block"]'
    if marker not in base:
        raise SystemExit(f"rtaudit.toml has no `{marker}` line under [explain]: update this script")
    body = base.replace(marker, 'decisions = ["allow", "review", "block"]', 1)
    head = f'embedded_port = {port}\nstate_dir = "{out / "state"}"\nmetrics_port = 0\n'
    lines = body.splitlines()
    for k, line in enumerate(lines):  # drop the repository's own values of the keys set above
        key = line.split("=", 1)[0].strip()
        if key in ("embedded_port", "state_dir", "metrics_port") and not line.startswith((" ", "#")):
            lines[k] = "# " + line
    return head + "\n".join(lines) + "\n"


def _print(phases: list[Phase], collector: Collector, args: argparse.Namespace) -> None:
    from rich.console import Console
    from rich.table import Table

    def lat(ids: list[str]) -> list[float]:
        return [float(collector.verdicts[i][1] - collector.verdicts[i][0].created_at_ms) for i in ids if i in collector.verdicts]

    roles = sorted({k for p in phases for k in p.cpu})
    table = Table("phase", "explain", "load", "verdicts", "complete", "P50 ms", "P95 ms", "P99 ms", "max ms",
                  "explanations in phase", "explain ms p50", *[f"CPU s {r}" for r in roles],
                  title=f"image requests at {args.rate:g}/s, {args.phase_s:g} s per phase (every verdict explained when on)")
    pooled: dict[bool, list[float]] = {False: [], True: []}
    for p in phases:
        values = lat(p.ids)
        pooled[p.explain] += values
        made = [e for e, arrived in collector.explanations.values() if p.started_ms <= arrived <= p.ended_ms]
        complete = sum(1 for i in p.ids if i in collector.verdicts and collector.verdicts[i][0].complete)
        table.add_row(p.name, "on" if p.explain else "off", f"{p.load[0]:.1f}-{p.load[1]:.1f}", f"{len(values)}/{len(p.ids)}", str(complete),
                      *(f"{pct(values, q):.0f}" for q in (50, 95, 99, 100)), str(len(made)),
                      f"{statistics.median([e.compute_ms for e in made]):.0f}" if made else "-",
                      *(f"{p.cpu.get(r, 0.0):.1f}" for r in roles))
    for explain in (False, True):
        v = pooled[explain]
        table.add_row(f"all {'on' if explain else 'off'}", "on" if explain else "off", "", str(len(v)), "",
                      *(f"{pct(v, q):.0f}" for q in (50, 95, 99, 100)), "", "", *([""] * len(roles)))
    ratio = [pct(pooled[True], q) / pct(pooled[False], q) for q in (50, 95, 99, 100)]
    table.add_row("on / off", "", "", "", "", *(f"{r:.2f}" for r in ratio), "", "", *([""] * len(roles)))
    Console(width=250).print(table)


if __name__ == "__main__":
    main()
