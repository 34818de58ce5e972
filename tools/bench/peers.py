"""The bench's peers: what a Faust user and a Ray Serve user would write instead of the worker,
around the same model stage, as thin adapters (``python -m rtaudit.tools.bench.peers KIND ROLE TOPIC``).

Both read :class:`~rtaudit.schemas.messages.ModalityTask` records from ``TOPIC`` (their own topic on the
bench's private broker, their own consumer group), run :func:`rtaudit.engine.stage.process_batch` on the
stage the worker serves (``workers/<role>.py``'s ``stage_factory``, with the bench's inference
thread count in ``RTAUDIT_INFERENCE_THREADS``) and produce one partial per task to
``audit.scores``. Batch limits are the worker's own: its profile's ``max_size`` for the stage
and its base ``window_ms`` (:func:`batch_limits`).

* ``faust`` — a Faust agent with ``stream.take(max_size, within=window)`` that runs each chunk
  in one inference thread, sends the partials and lets Faust acknowledge the chunk's events
  (Faust commits acked offsets every 0.5 s, after flushing its producer). The app comes from
  :func:`rtaudit.workers.app.make_app`: the local client profile the project measured on tansu
  (``tansu://`` transport with a 100 ms fetch wait, 2 s session, 1 MB producer batches with a
  5 ms linger; docs/broker.md).
* ``ray`` — Ray Serve (an optional extra: ``pip install -e ".[bench-peers]"``): one replica of
  a deployment whose method is decorated with ``@serve.batch(max_batch_size, batch_wait_timeout_s)``
  and runs the stage; a confluent-kafka consumer (the project's local profile) in the driver
  calls the deployment handle once per record and produces the partial when that call returns;
  offsets are stored as calls return and auto-committed every 0.5 s. Ray runs on loopback
  (``127.0.0.1``), no HTTP proxy, no dashboard, no usage reporting.

Neither has lanes, a lag-adaptive window or deadline-aware closing; those are what the bench
compares (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import signal
import sys
import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition

from rtaudit.engine.stage import process_batch
from rtaudit.schemas.codec import decode, encode
from rtaudit.schemas.errors import AuditError
from rtaudit.schemas.messages import ModalityTask
from rtaudit.topics.catalog import SCORES
from rtaudit.tools.bench.load import load_stage
from rtaudit.workers.kafka import consumer_config, producer_config
from rtaudit.workers.settings import Settings, usable_cores

log = logging.getLogger(__name__)
PEERS = ("faust", "ray")
#: what to install when Ray is missing.
RAY_EXTRA = 'pip install -e ".[bench-peers]"'
#: records per ``consume`` call of the Ray peer's feeder, and its longest wait for the first, s.
FEED_BATCH, FEED_POLL_S = 1000, 0.05
#: the Ray peer's auto-commit interval, ms (the worker and Faust commit every 0.5 s too).
RAY_COMMIT_MS = 500


def batch_limits(settings: Settings, role: str) -> tuple[int, float]:
    """``(max batch size, batch window in s)`` the peers use: the worker's ``max_size`` for
    ``role`` and its window at zero lag (``window_ms``; the worker grows it with lag, a peer
    cannot)."""
    cfg = settings.batch.config(role)
    return cfg.max_size, cfg.window_ms / 1000.0


def peer_missing(kind: str) -> str | None:
    """Why peer ``kind`` cannot run here (``None`` when it can): Ray Serve is an optional extra."""
    if kind not in PEERS:
        raise ValueError(f"unknown peer {kind!r}: one of {', '.join(PEERS)}")
    if kind == "ray":
        if importlib.util.find_spec("ray") is None:
            return f"ray is not installed ({RAY_EXTRA})"
        for module in ("fastapi", "starlette", "aiohttp"):  # ray[serve] brings these; bare ray does not
            if importlib.util.find_spec(module) is None:
                return f"ray is installed without its serve extra (no {module}): {RAY_EXTRA}"
    return None


def peer_command(kind: str, role: str, topic: str) -> list[str]:
    """The command line of a peer process (settings come from its environment)."""
    return [sys.executable, "-m", "rtaudit.tools.bench.peers", kind, role, topic]


def _tasks(values: Sequence[bytes | None]) -> list[ModalityTask]:
    """Decoded tasks; an undecodable record is skipped (a reference, not a worker: no DLQ)."""
    out = []
    for v in values:
        try:
            out.append(decode(v or b"", ModalityTask))
        except AuditError as exc:
            log.warning("skipping an undecodable record: %s", exc)
    return out


# ---------------------------------------------------------------- Faust


def faust_peer(settings: Settings, role: str, topic: str) -> Any:
    """The Faust peer's app: an agent on ``topic`` batching with ``stream.take``. The stage is
    loaded and warmed here, before the app starts."""
    from rtaudit.workers.app import make_app
    from rtaudit.workers.serving import warmup_task

    stage = load_stage(role, settings)
    process_batch(stage, [warmup_task(_modality(role))])
    max_size, within_s = batch_limits(settings, role)
    app, _ = make_app(f"bench-faust-{role}", settings, app_id=f"rtaudit-bench-faust-{role}-{uuid.uuid4().hex[:6]}")
    source = app.topic(topic)
    scores = app.topic(SCORES)
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{role}-infer")

    @app.agent(source)
    async def score(stream: Any) -> None:
        loop = asyncio.get_running_loop()
        async for values in stream.take(max_size, within=within_s):
            tasks = _tasks(values)
            if not tasks:
                continue
            result = await loop.run_in_executor(executor, process_batch, stage, tasks)
            for partial in result.partials:
                await scores.send(key=partial.request_id.encode(), value=encode(partial))

    log.info("faust peer: %s on %s, take(%d, within=%.3f s), %d inference thread(s)",
             role, topic, max_size, within_s, settings.model_threads())
    return app


def _modality(role: str) -> str:
    from rtaudit.tools.bench.inputs import modality_of

    return modality_of(role)


def run_faust(settings: Settings, role: str, topic: str) -> None:
    """Run the Faust peer until SIGTERM/SIGINT (Faust's worker handles both)."""
    from faust import Worker

    app = faust_peer(settings, role, topic)
    Worker(app, loglevel="WARNING", quiet=True).execute_from_commandline()


# ---------------------------------------------------------------- Ray Serve


def ray_deployment(settings: Settings, role: str) -> Any:
    """The Ray Serve application: one replica whose ``@serve.batch`` method runs the stage on
    the records' bytes and returns the encoded partials (``None`` for an undecodable record)."""
    from ray import serve

    max_size, within_s = batch_limits(settings, role)

    # Ray's docs: max_ongoing_requests at least the batch size, or batches cannot fill
    @serve.deployment(num_replicas=1, max_ongoing_requests=2 * max_size, ray_actor_options={"num_cpus": 1})
    class Scorer:
        def __init__(self) -> None:
            from rtaudit.workers.serving import warmup_task

            self.stage = load_stage(role, settings)
            process_batch(self.stage, [warmup_task(_modality(role))])

        @serve.batch(max_batch_size=max_size, batch_wait_timeout_s=within_s)
        async def score(self, values: list[bytes]) -> list[bytes | None]:
            out: list[bytes | None] = [None] * len(values)
            decoded = []
            for i, v in enumerate(values):
                try:
                    decoded.append((i, decode(v, ModalityTask)))
                except AuditError:
                    continue
            if decoded:
                result = process_batch(self.stage, [t for _, t in decoded])  # blocking, as Ray's batching examples do
                for (i, _), partial in zip(decoded, result.partials):
                    out[i] = encode(partial)
            return out

        async def __call__(self, value: bytes) -> bytes | None:
            return await self.score(value)

    return Scorer.bind()


async def feed_ray(settings: Settings, handle: Any, topic: str, stop: threading.Event) -> None:
    """The Ray peer's feeder: consume ``topic``, call ``handle`` once per record, produce the
    partial when the call returns; store each record's offset once its call returned
    (librdkafka auto-commits the stored offsets every :data:`RAY_COMMIT_MS`)."""
    consumer = Consumer(consumer_config(
        settings, f"rtaudit-bench-ray-{uuid.uuid4().hex[:6]}",
        **{"enable.auto.commit": True, "enable.auto.offset.store": False, "auto.commit.interval.ms": RAY_COMMIT_MS},
    ))
    producer = Producer(producer_config(settings))
    consumer.subscribe([topic])
    loop = asyncio.get_running_loop()
    io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ray-feed")  # the consumer's own thread
    returned: list[Message] = []  # records whose call returned since the last poll (event loop only)
    inflight: set[asyncio.Task[None]] = set()

    def poll(done: list[Message]) -> list[Message]:
        """In the consumer's thread: store the offsets after the returned records (the highest
        per partition, whatever the order calls returned in), then consume."""
        offsets: dict[tuple[str, int], int] = {}
        for m in done:
            key = (m.topic(), m.partition())
            offsets[key] = max(offsets.get(key, 0), m.offset() + 1)
        if offsets:
            try:
                consumer.store_offsets(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()])
            except Exception as exc:  # noqa: BLE001 - revoked meanwhile: the next owner replays
                log.info("ray peer: offsets not stored: %s", exc)
        return consumer.consume(FEED_BATCH, FEED_POLL_S)

    async def call(msg: Message) -> None:
        try:
            value = await handle.remote(msg.value())
        except Exception:  # noqa: BLE001 - a failed call loses its record: logged
            log.exception("ray peer: the call for offset %s failed", msg.offset())
            value = None
        if value is not None:
            producer.produce(SCORES, key=msg.key(), value=value)
        returned.append(msg)

    try:
        while not stop.is_set():
            done, returned[:] = list(returned), []  # on the event loop: no call returns meanwhile
            for msg in await loop.run_in_executor(io, poll, done):
                if msg.error() is None:
                    task = asyncio.create_task(call(msg))
                    inflight.add(task)
                    task.add_done_callback(inflight.discard)
            producer.poll(0)
    finally:
        for task in inflight:
            task.cancel()
        producer.flush(5)
        await loop.run_in_executor(io, consumer.close)


def run_ray(settings: Settings, role: str, topic: str) -> None:
    """Start a private Ray instance on loopback, Serve without a proxy and the deployment; feed
    it until SIGTERM/SIGINT; shut Serve and Ray down."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray import serve

    stop = threading.Event()
    ray.init(num_cpus=usable_cores(), include_dashboard=False, log_to_driver=False, configure_logging=False,
             _node_ip_address="127.0.0.1", object_store_memory=128 * 2**20)
    try:
        serve.start(proxy_location="Disabled")
        handle = serve.run(ray_deployment(settings, role), name=f"rtaudit-bench-{role}", route_prefix=None)
        for sig in (signal.SIGTERM, signal.SIGINT):  # after ray.init, which installs handlers of its own
            signal.signal(sig, lambda *_: stop.set())
        log.info("ray peer: %s on %s, serve.batch(%d, %.3f s), %d inference thread(s)",
                 role, topic, *batch_limits(settings, role), settings.model_threads())
        asyncio.run(feed_ray(settings, handle, topic, stop))
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m rtaudit.tools.bench.peers KIND ROLE TOPIC``: run one peer until SIGTERM/SIGINT."""
    import argparse

    from rtaudit.workers.settings import load_settings

    parser = argparse.ArgumentParser(description="rtaudit bench's peers: Faust take() batching, Ray Serve @serve.batch")
    parser.add_argument("kind", choices=PEERS)
    parser.add_argument("role", choices=("text", "image", "ocr"))
    parser.add_argument("topic")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    missing = peer_missing(args.kind)
    if missing:
        parser.exit(3, f"{missing}\n")
    settings = load_settings()
    if args.kind == "faust":
        run_faust(settings, args.role, args.topic)
    else:
        run_ray(settings, args.role, args.topic)


if __name__ == "__main__":
    main()
