"""Null-model fleet throughput with tracing off and on, in one run, and the cost of one span.

    .venv/bin/python benchmarks/tracing_overhead.py [--requests 6000] [--rounds 2] [--ratios 1.0,0.25]

For each round and each setting (``off``; ``otlp`` at each sampling ratio) it starts a fresh embedded
broker and a router, a text worker with the null model (``text_model = "null"``: no inference, so the
fleet's own work is what is measured) and fusion, each in its own process, with ``[tracing]`` set by
environment; publishes ``--requests`` text requests as fast as the client can (its ``submit`` span
included), and reads every verdict: throughput = requests / (last verdict - first publish). Settings
alternate within a round, so a neighbour's load on a shared machine hits every setting alike; the
table gives each setting's median over the rounds and its ratio to ``off``.

With tracing on, spans go over OTLP/HTTP (protobuf) to a collector in this process (``http.server``
decoding every ``ExportTraceServiceRequest``), which also checks that each request's trace is whole:
``submit``, ``route``, ``queue``, ``fusion.wait`` and ``emit`` under one trace id.

The second table is the cost of one span on this machine: the hot-path record (header parse +
tuple append), and the export thread's work per span (SDK ``ReadableSpan`` + OTLP protobuf encoding).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.messages import AuditRequest
from rtaudit.workers import tracing
from rtaudit.workers.client import AuditClient, verdict_reader
from rtaudit.tools.fleet.local import Fleet
from rtaudit.workers.obs_settings import TracingSettings
from rtaudit.workers.settings import Settings

WHOLE = {"submit", "route", "queue", "fusion.wait", "emit"}


class Collector:
    """An OTLP/HTTP traces receiver on 127.0.0.1: span names per trace id."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest, ExportTraceServiceResponse,
        )

        self.names: dict[bytes, set[str]] = defaultdict(set)
        self.spans = 0
        lock = threading.Lock()
        collector = self
        ok = ExportTraceServiceResponse().SerializeToString()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802  (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                with lock:
                    for rs in req.resource_spans:
                        for ss in rs.scope_spans:
                            for s in ss.spans:
                                collector.names[s.trace_id].add(s.name)
                                collector.spans += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(ok)))
                self.end_headers()
                self.wfile.write(ok)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self) -> None:
        self.names.clear()
        self.spans = 0

    def whole_traces(self) -> int:
        return sum(1 for names in self.names.values() if WHOLE <= names)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (/proc/<pid>/stat, fields 14 and 15)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fleet_cpu(fleet: Fleet) -> dict[str, float]:
    """CPU seconds so far of each worker process and the broker."""
    out = {slot.role: cpu_s(slot.proc.pid) for slot in fleet.slots}
    if fleet.broker is not None and fleet.broker.process is not None:
        out["broker"] = cpu_s(fleet.broker.process.pid)
    return out


def run_once(label: str, tracing_settings: TracingSettings, n: int, root: Path) -> tuple[float, dict[str, float]]:
    """Requests per second of one fresh null-model fleet with ``tracing_settings``, and the CPU ms per
    request of each process (the load and the 2 s after it, while the spans are exported; ``bench``:
    this process, i.e. the client, the verdict reader and the collector)."""
    env = {"RTAUDIT_TEXT_MODEL": "null", "RTAUDIT_STATE_DIR": str(root / "state"),
           "RTAUDIT_TRACING__EXPORTER": tracing_settings.exporter,
           "RTAUDIT_TRACING__ENDPOINT": tracing_settings.endpoint,
           "RTAUDIT_TRACING__SAMPLING_RATIO": str(tracing_settings.sampling_ratio)}
    settings = Settings(embedded_port=free_port(), state_dir=root / "state", tracing=tracing_settings)
    tracing.shutdown()
    fleet = Fleet(settings, roles=("router", "text", "fusion"), log_dir=root / "logs", env=env)
    fleet.launch()
    try:
        client = AuditClient(settings)
        with verdict_reader(settings) as reader:
            probe = AuditRequest(request_id=f"probe-{uuid.uuid4().hex[:8]}", tenant_id="bench", created_at_ms=now_ms(),
                                 text="ready?", slo_ms=120_000)
            client.submit(probe)
            client.flush()
            reader.wait_all([probe.request_id], 180)
            created = now_ms()
            requests = [AuditRequest(request_id=f"b-{label}-{i}", tenant_id="bench", created_at_ms=created,
                                     text=f"bench post {i}: see you at the match", slo_ms=300_000) for i in range(n)]
            cpu0, own0 = fleet_cpu(fleet), time.process_time()
            started = time.perf_counter()
            for r in requests:
                client.submit(r)
            client.flush()
            got = reader.wait_all([r.request_id for r in requests], 600)
            elapsed = time.perf_counter() - started
        assert len(got) == n
        time.sleep(2.0)  # the workers' export threads run every 0.5 s
        cpu1, own1 = fleet_cpu(fleet), time.process_time()
        cpu = {k: (cpu1[k] - cpu0[k]) * 1000 / n for k in cpu1}
        cpu["bench"] = (own1 - own0) * 1000 / n
        return n / elapsed, cpu
    finally:
        fleet.stop()
        tracing.shutdown()


def span_costs(k: int = 20_000) -> list[tuple[str, float]]:
    """µs per span: the hot path's record, and the export thread's ReadableSpan + OTLP encoding."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    class Msg:
        def __init__(self, h: list[tuple[str, bytes]]) -> None:
            self.h = h

        def headers(self) -> list[tuple[str, bytes]]:
            return self.h

    with tempfile.TemporaryDirectory() as d:
        tracing.shutdown()
        tracing.configure(TracingSettings(exporter="file", file_dir=d), "bench")
        st = tracing._STATE  # noqa: SLF001  (the bench measures the module's own queue)
        assert st is not None
        st._stop.set()  # noqa: SLF001  (no export during the hot-path timing)
        msgs = [Msg(tracing.submit_headers(str(i)) or []) for i in range(k)]
        st.spans.clear()
        t0 = time.perf_counter()
        for m in msgs:
            tracing.begin("route", m)
            tracing.current_headers()
            tracing.end()
        hot = (time.perf_counter() - t0) / k * 1e6
        recs = list(st.spans)
        t0 = time.perf_counter()
        readable = tracing._readable(recs, "bench")  # noqa: SLF001
        build = (time.perf_counter() - t0) / k * 1e6
        t0 = time.perf_counter()
        for lo in range(0, k, 2048):
            encode_spans(readable[lo:lo + 2048]).SerializeToString()
        enc = (time.perf_counter() - t0) / k * 1e6
        tracing.shutdown()
    return [("hot path: parse header, begin, headers, end (one span)", hot),
            ("export thread: SDK ReadableSpan", build), ("export thread: OTLP protobuf encoding", enc)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ratios", default="1.0,0.25", help="sampling ratios to measure with tracing on")
    args = ap.parse_args(argv)
    collector = Collector()
    ratios = [float(x) for x in args.ratios.split(",")]
    settings = [("off", TracingSettings())] + [
        (f"otlp {r:g}", TracingSettings(exporter="otlp", endpoint=collector.endpoint, sampling_ratio=r)) for r in ratios]
    rates: dict[str, list[float]] = defaultdict(list)
    cpus: dict[str, list[dict[str, float]]] = defaultdict(list)
    whole: dict[str, list[str]] = defaultdict(list)
    for rnd in range(args.rounds):
        for label, ts in settings:
            collector.reset()
            with tempfile.TemporaryDirectory() as d:
                rate, cpu = run_once(label.replace(" ", "-"), ts, args.requests, Path(d))
            rates[label].append(rate)
            cpus[label].append(cpu)
            if ts.exporter != "none":
                whole[label].append(f"{collector.whole_traces()}/{len(collector.names)} ({collector.spans} spans)")
            print(f"round {rnd + 1} {label:<10} {rate:8.0f} requests/s", file=sys.stderr, flush=True)
    base = statistics.median(rates["off"])
    print(f"\nnull-model fleet (router, text null, fusion), {args.requests} requests per run, {args.rounds} rounds")
    print(f"{'tracing':<12} {'req/s (median)':>15} {'runs':>24} {'vs off':>8}  whole traces / traces seen (spans)")
    for label, _ in settings:
        med = statistics.median(rates[label])
        runs = ", ".join(f"{r:.0f}" for r in rates[label])
        print(f"{label:<12} {med:>15.0f} {runs:>24} {med / base:>7.2f}x  {'; '.join(whole.get(label, [])) or '-'}")
    roles = sorted(cpus["off"][0])
    fleet_roles = [r for r in roles if r != "bench"]
    print("\nCPU ms per request (median over rounds); fleet = router + text + fusion + broker; on a CPU-bound "
          "machine throughput ~ 1 / fleet CPU")
    print(f"{'tracing':<12} " + " ".join(f"{r:>8}" for r in roles) + f" {'fleet':>8} {'vs off':>8}")
    base_cpu = statistics.median(sum(c[r] for r in fleet_roles) for c in cpus["off"])
    for label, _ in settings:
        per = {r: statistics.median(c[r] for c in cpus[label]) for r in roles}
        fleet_ms = statistics.median(sum(c[r] for r in fleet_roles) for c in cpus[label])
        print(f"{label:<12} " + " ".join(f"{per[r]:>8.3f}" for r in roles) + f" {fleet_ms:>8.3f} {base_cpu / fleet_ms:>7.2f}x")
    print("\ncost of one span on this machine")
    print(f"{'where':<58} {'µs/span':>8}")
    for what, us in span_costs():
        print(f"{what:<58} {us:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
