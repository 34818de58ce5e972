"""What :class:`rtaudit.workers.producer.RecoveringProducer` costs per record, against a plain
``confluent_kafka.Producer``, both idempotent, on librdkafka's in-process mock cluster (no broker,
no network: the producer's own CPU is what is measured). Recovery after a broker restart is
measured by ``tests/integration/test_broker_restart.py``.

Usage: ``python benchmarks/producer_overhead.py [--records 200000] [--rounds 3]``
Prints a table: records/s and µs per record (produce + delivery report), best of ``rounds``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402

from rtaudit.workers.producer import RecoveringProducer  # noqa: E402

CONF = {"test.mock.num.brokers": 1, "enable.idempotence": True, "acks": "all", "linger.ms": 1, "log_level": 0}


def run(make, records: int) -> float:  # type: ignore[no-untyped-def]
    """Seconds to produce ``records`` 200-byte records and receive every delivery report."""
    producer = make()
    done = [0]

    def cb(err, msg) -> None:  # type: ignore[no-untyped-def]
        done[0] += 1

    value = b"x" * 200
    producer.produce("bench", value, b"k", on_delivery=cb)  # metadata and PID first
    producer.flush(10)
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce("bench", value, b"k%d" % (i % 1000), on_delivery=cb)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    took = time.perf_counter() - started
    assert done[0] == records + 1, done
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for name, make in (("confluent_kafka.Producer", lambda: Producer(CONF)),
                       ("RecoveringProducer", lambda: RecoveringProducer(dict(CONF), name="bench"))):
        best = min(run(make, args.records) for _ in range(args.rounds))
        rows.append((name, args.records / best, best / args.records * 1e6))
    print(f"{'producer':<26} {'records/s':>12} {'µs/record':>10}")
    for name, rate, us in rows:
        print(f"{name:<26} {rate:>12,.0f} {us:>10.2f}")
    print(f"overhead: {rows[1][2] - rows[0][2]:.2f} µs/record ({rows[0][1] / rows[1][1]:.2f}x the time)")


if __name__ == "__main__":
    main()
