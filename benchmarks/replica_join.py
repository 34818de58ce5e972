"""How long a new text replica stalls the partitions it takes over (issue 10: "a new
replica stalls its partitions").

On a private embedded broker: one text worker is started and probed; then a steady
open-loop stream of text tasks (``--rate`` per second) runs while a second text worker
joins the group after ``--join-at`` seconds. Prints the first worker's cold start
(process start → first partial), and for the tasks sent after the second worker was
started: the worst latency and when the last task slower than 1 s was answered (the
stall the join caused, measured from the second worker's process start).

    .venv/bin/python benchmarks/replica_join.py [--rate 20] [--seconds 25] [--join-at 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from rtaudit.topics.catalog import lane_topic
from rtaudit.tools.bench.load import Send, send_open_loop
from rtaudit.tools.bench.rig import Rig
from rtaudit.tools.bench.inputs import task_value
from rtaudit.workers.settings import load_settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=20.0, help="tasks per second")
    ap.add_argument("--seconds", type=float, default=25.0, help="length of the stream")
    ap.add_argument("--join-at", type=float, default=3.0, help="second replica starts this long into the stream")
    args = ap.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="rtaudit-join-")) / "logs"
    with Rig(load_settings(), logs, None) as rig:
        cold_s = rig.start_worker("text")
        topic = lane_topic("text", "lo")
        t0 = time.time() + 0.5
        n = int(args.rate * args.seconds)
        ids = [f"join-{uuid.uuid4().hex[:6]}-{i}" for i in range(n)]
        due = [t0 + i / args.rate for i in range(n)]
        rig.reader.expect(dict(zip(ids, due)), "partial")
        sends = [Send(d, topic, rid, task_value("text", f"steady stream message {i}", rid, "lo", 60_000))
                 for i, (rid, d) in enumerate(zip(ids, due))]
        split = int(args.join_at * args.rate)
        send_open_loop(rig.producer, sends[:split])
        joined_at = time.time()
        rig.fleet.spawn("text")
        send_open_loop(rig.producer, sends[split:])
        rig.reader.wait(ids, timeout_s=90)
        after = [s for s in rig.reader.samples(ids[split:]) if s.arrived_s is not None]
        lat = [s.arrived_s - s.due_s for s in after]
        slow = [s.arrived_s - joined_at for s in after if s.arrived_s - s.due_s > 1.0]
        print(f"first text worker: process start -> first partial {cold_s:.1f} s")
        print(f"second replica started at +{args.join_at:.0f} s: {len(after)}/{n - split} answered, "
              f"worst latency {max(lat):.2f} s, P50 {sorted(lat)[len(lat) // 2]:.3f} s, "
              f"{len(slow)} tasks over 1 s, last of them answered {max(slow, default=0.0):.1f} s after the replica started")
        print(f"logs: {logs}")


if __name__ == "__main__":
    main()
