"""Resident memory of each role's worker process, at rest and after a burst at its batch limit:
the figures behind the memory requests and limits of deploy/k8s/*.yaml.

On a private embedded broker a whole fleet starts (one process per role, the shipped models,
the ``balanced`` profile: text batches of 64, image 8, OCR 2). Once it is ready (a probe request
got its complete verdict) and has idled ``--settle`` seconds, each process's ``VmRSS`` is read
from ``/proc/<pid>/status`` ("at rest"), with ``VmHWM`` (the peak so far: loading and warming the
models). Then a burst is sent at once: ``--texts`` text requests of about 240 characters (short
enough that 64 fill a batch) and ``--images`` image requests (scikit-image's photos and rendered
text, so every image goes through NudeNet and OCR); the lag it builds keeps every batch at its
size limit. When every verdict has come, ``VmRSS`` and ``VmHWM`` are read again ("peak under
load"). Prints one markdown table, MiB (2^20 bytes).

    .venv/bin/python benchmarks/role_memory.py [--texts 640] [--images 48] [--settle 10]

Measured figures are pasted next to the limits in deploy/k8s/ with the date and commit.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.messages import AuditRequest
from rtaudit.tools.bench.inputs import Corpus
from rtaudit.workers.client import AuditClient, verdict_reader
from rtaudit.tools.fleet.local import Fleet
from rtaudit.workers.settings import Settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_mib(pid: int) -> dict[str, float]:
    """``VmRSS`` and ``VmHWM`` of a process, MiB (``/proc/<pid>/status``, kB there)."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def burst(settings: Settings, texts: int, images: int) -> tuple[int, float]:
    """Send ``texts`` + ``images`` requests at once and wait for every verdict; (verdicts, seconds)."""
    corpus = Corpus.build()
    base = [t for t in corpus.texts if t.strip()]
    filler = " and nothing in it is meant to hurt anyone at all"
    text_bodies = [(base[i % len(base)] + filler * 6)[:240] for i in range(texts)]
    media = corpus.photos + corpus.rendered
    run = uuid.uuid4().hex[:8]
    created = now_ms()
    requests = [AuditRequest(request_id=f"mem-{run}-t{i}", tenant_id="bench", created_at_ms=created, slo_ms=600_000, text=t)
                for i, t in enumerate(text_bodies)]
    requests += [AuditRequest(request_id=f"mem-{run}-i{i}", tenant_id="bench", created_at_ms=created, slo_ms=600_000,
                              media=[media[i % len(media)]]) for i in range(images)]
    started = time.monotonic()
    with verdict_reader(settings) as reader:
        client = AuditClient(settings)
        for r in requests:
            client.submit(r)
        client.flush()
        got = reader.wait_all({r.request_id for r in requests}, timeout_s=900)
    return len(got), time.monotonic() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=640, help="text requests in the burst (10 batches of 64)")
    ap.add_argument("--images", type=int, default=48, help="image requests in the burst (6 image batches of 8)")
    ap.add_argument("--settle", type=float, default=10.0, help="seconds idle after ready before the at-rest reading")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rtaudit-memory-"))
    settings = Settings(embedded_port=free_port(), state_dir=root / "state")
    fleet = Fleet(settings, log_dir=root / "logs", env={"RTAUDIT_STATE_DIR": str(root / "state")})
    fleet.start(ready_timeout_s=600)
    try:
        time.sleep(args.settle)
        pids = {role: procs[0].pid for role, procs in fleet.processes.items()}
        rest = {role: status_mib(pid) for role, pid in pids.items()}
        n, seconds = burst(settings, args.texts, args.images)
        time.sleep(1.0)
        load = {role: status_mib(pid) for role, pid in pids.items()}
    finally:
        fleet.stop()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"rtaudit role memory, {time.strftime('%Y-%m-%d')}, commit {commit or 'unknown'}: burst of {args.texts} texts + "
          f"{args.images} images, {n} verdicts in {seconds:.0f} s (MiB)\n")
    print("| role | RSS at rest | peak before the burst (load, warm-up) | RSS after the burst | peak (VmHWM) |")
    print("|---|---|---|---|---|")
    for role in pids:
        print(f"| {role} | {rest[role]['VmRSS']:.0f} | {rest[role]['VmHWM']:.0f} | {load[role]['VmRSS']:.0f} | "
              f"{load[role]['VmHWM']:.0f} |")


if __name__ == "__main__":
    main()
