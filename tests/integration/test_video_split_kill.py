"""Chaos during a split: the video worker is killed with SIGKILL while it splits a batch of videos,
the supervisor restarts it, and every request still gets exactly one complete verdict.

The kill is timed on the topics: a raw consumer follows ``audit.scores`` and the video worker is
killed as soon as the first video partial of the batch (the record that carries ``expands``, written
after that video's frame tasks) is there, while the other videos wait in its queue. The restarted
worker consumes again from the group's committed offset and splits again what had not been committed
(the same part names: sampling is deterministic), fusion keeps one partial per key, and the verdicts
are counted raw on ``audit.verdicts`` (no client dedup).

A fleet of its own (router, video, image, ocr, fusion; supervised) on a fresh embedded broker; the
videos carry no audio track, so no audio worker."""

from __future__ import annotations

import base64
import signal
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from rtaudit.engine.clock import now_ms
from rtaudit.schemas.codec import decode_scores_record
from rtaudit.schemas.messages import AuditRequest, MediaItem, PartialScore
from rtaudit.tools.fleet.local import Fleet
from rtaudit.tools.fleet.supervision import RestartPolicy
from rtaudit.topics.catalog import SCORES
from rtaudit.workers.client import AuditClient
from rtaudit.workers.kafka import consumer_config
from rtaudit.workers.settings import Settings, load_settings
from tests.unit.media_builders import encode_video, text_frame

from .conftest import free_port
from .test_failover import raw_verdicts

pytestmark = pytest.mark.integration
TENANT = "itest-split"
#: the insult is on screen from 1.0 to 2.0 s of each insult video (3 s long).
SHOWN = (1.0, 2.0)
SECONDS = 3.0
N_VIDEOS = 8


@pytest.fixture()
def split_fleet(tmp_path: Path) -> Iterator[tuple[Fleet, Settings, list[str]]]:
    config = tmp_path / "rtaudit.toml"
    config.write_text(f"""
embedded_port = {free_port()}
state_dir = "{tmp_path / 'state'}"
fusion_grace_ms = 5000

[tenants.{TENANT}]
version = "itest-split-1"
slo_ms = 600000
on_incomplete = "review"
""")
    settings = load_settings(config)
    events: list[str] = []
    fleet = Fleet(settings, config=config, roles=("router", "video", "image", "ocr", "fusion"), log_dir=tmp_path / "logs",
                  supervise=True, policy=RestartPolicy(base_s=0.2, cap_s=2.0), on_event=events.append)
    fleet.launch()
    try:
        yield fleet, settings, events
    finally:
        fleet.stop()


def videos(seed: int = 36) -> dict[str, tuple[bytes, bool]]:
    """``N_VIDEOS`` silent 3 s videos, name → (bytes, carries the insult): every other one shows
    "STUPID IDIOT" from ``SHOWN[0]`` to ``SHOWN[1]``; each has its own plain background (seeded)."""
    rng = np.random.default_rng(seed)
    out: dict[str, tuple[bytes, bool]] = {}
    for i in range(N_VIDEOS):
        bg = tuple(int(c) for c in rng.integers(180, 250, size=3))
        insult = i % 2 == 0

        def frame_at(t: float, bg=bg, insult=insult):  # type: ignore[no-untyped-def]
            return text_frame("STUPID IDIOT" if insult and SHOWN[0] <= t < SHOWN[1] else None, bg=bg)

        out[f"{'insult' if insult else 'clean'}-{i}.mp4"] = (encode_video(frame_at, seconds=SECONDS), insult)
    return out


@dataclass(frozen=True)
class Seen:
    """A partial read from ``audit.scores``: when the broker stamped it (ms) and the record."""

    at_ms: int
    partial: PartialScore


class ScoresWatch:
    """Follows ``audit.scores`` from its start in a thread (a raw consumer, no group) and keeps
    every partial of this run's requests, in arrival order."""

    def __init__(self, settings: Settings, prefix: str) -> None:
        self.prefix, self.lock, self.stop = prefix, threading.Lock(), threading.Event()
        self.seen: list[Seen] = []
        self.error: BaseException | None = None
        self.consumer = Consumer(consumer_config(settings, f"watch-{uuid.uuid4().hex[:8]}"))
        parts = self.consumer.list_topics(SCORES, timeout=10).topics[SCORES].partitions
        self.consumer.assign([TopicPartition(SCORES, p, 0) for p in parts])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self._follow()
        except BaseException as exc:  # surfaced by video_partials, not lost with the thread
            self.error = exc

    def _follow(self) -> None:
        while not self.stop.is_set():
            m = self.consumer.poll(0.05)
            if m is None or (m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF):
                continue
            assert m.error() is None, m.error()
            if not (m.key() or b"").decode().startswith(self.prefix):
                continue
            record = decode_scores_record(m.value())
            if isinstance(record, PartialScore):
                with self.lock:
                    self.seen.append(Seen(m.timestamp()[1], record))

    def video_partials(self) -> list[Seen]:
        if self.error is not None:
            raise AssertionError(f"the audit.scores watch failed: {self.error!r}") from self.error
        with self.lock:
            return [s for s in self.seen if s.partial.stage == "video"]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def wait_for(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.01)


def test_the_video_worker_killed_mid_split_loses_nothing_and_repeats_nothing(split_fleet) -> None:  # type: ignore[no-untyped-def]
    fleet, settings, events = split_fleet
    started = time.monotonic()
    run = "split"  # fixed ids (a fresh broker): the same partitions, hence the same order, every run
    made = videos()
    requests = {
        f"{run}-{i}": (AuditRequest(
            request_id=f"{run}-{i}", tenant_id=TENANT, created_at_ms=now_ms(), priority="high",
            media=[MediaItem(type="video", data_b64=base64.b64encode(data).decode(), name=name)],
        ), insult)
        for i, (name, (data, insult)) in enumerate(made.items())
    }
    watch = ScoresWatch(settings, run)
    try:
        client = AuditClient(settings)
        for r, _ in requests.values():
            client.submit(r)
        client.flush()
        # the kill: as soon as the first video partial of the batch is on audit.scores (its frame
        # tasks were produced just before it), while the others wait in the worker's queue
        wait_for(lambda: watch.video_partials(), 240, "the first video partial")
        (victim,) = fleet.processes["video"]
        victim.send_signal(signal.SIGKILL)
        killed_at_ms = now_ms()
        split_before_kill = {s.partial.request_id for s in watch.video_partials()}
        wait_for(lambda: fleet.restarts.get("video") == 1, 30, "the supervisor to restart the video worker")
        restart_s = (now_ms() - killed_at_ms) / 1000
        (successor,) = fleet.processes["video"]
        assert successor.pid != victim.pid
        print(f"video worker (pid {victim.pid}) SIGKILLed {time.monotonic() - started:.1f} s into the test, "
              f"{len(split_before_kill)} of {len(requests)} videos split by then; restarted as pid {successor.pid} "
              f"after {restart_s:.2f} s")

        deadline = time.monotonic() + 300
        while set(got := raw_verdicts(settings, run)) != set(requests) and time.monotonic() < deadline:
            time.sleep(1)
        time.sleep(2)  # a second verdict would follow the replayed partials within this
        got = raw_verdicts(settings, run)
    finally:
        watch.close()
    missing = sorted(set(requests) - set(got))
    assert not missing, f"requests lost after the kill mid-split: {missing}"
    repeated = {k: len(v) for k, v in got.items() if len(v) > 1}
    assert not repeated, f"request ids with more than one verdict record: {repeated}"
    assert any("video-0" in e and "signal SIGKILL" in e for e in events), events
    assert fleet.exited() == []

    by_request: dict[str, list[PartialScore]] = defaultdict(list)
    for s in watch.video_partials():
        by_request[s.partial.request_id].append(s.partial)
    resplit = {rid: len(ps) for rid, ps in by_request.items() if len(ps) > 1}
    for rid, ps in by_request.items():  # a replayed split names the same parts as the first
        assert all(p.expands == ps[0].expands and p.status == "ok" for p in ps), (rid, [p.expands for p in ps])
    # the kill fell inside a split: a request split before it was decided after it
    in_flight = [rid for rid in split_before_kill if got[rid][0].decided_at_ms > killed_at_ms]
    assert in_flight, (split_before_kill, {rid: got[rid][0].decided_at_ms - killed_at_ms for rid in split_before_kill})
    # ...and the kill cut the batch: some videos were split only by the restarted worker
    split_after = [rid for rid in requests if all(s.at_ms > killed_at_ms for s in watch.video_partials()
                                                  if s.partial.request_id == rid)]
    assert split_after and len(split_after) < len(requests), split_after

    for rid, (request, insult) in requests.items():
        [v] = got[rid]
        name = request.media[0].name
        [first, *_] = by_request[rid]
        assert v.complete and set(v.parts) == {"video/video:0", *first.expands}, (name, v.reasons, v.parts)
        assert all(status == "ok" for status in v.parts.values()), (name, v.parts)
        frames = {p.split("#frame:")[1] for p in v.parts if "#frame:" in p}
        assert len(frames) >= SECONDS and all(f"{st}/video:0#frame:{f}" in v.parts for f in frames for st in ("image", "ocr"))
        if insult:
            assert v.decision == "block", (name, v.decision, v.categories, v.reasons)
            timed = [e for e in v.evidence if e.category in v.flagged and e.score >= 0.9]
            assert timed and all(e.frame is not None and SHOWN[0] <= e.time_s[0] < SHOWN[1] for e in timed), (name, timed)
        else:
            assert v.decision == "allow", (name, v.decision, v.categories, v.reasons)
    print(f"{len(requests)} verdicts, one each; {len(in_flight)} split before the kill and decided after it; "
          f"{len(split_after)} split by the restarted worker only; split twice (replayed): {resplit}; "
          f"last verdict {(max(v.decided_at_ms for [v] in got.values()) - killed_at_ms) / 1000:.1f} s after the kill; "
          f"{time.monotonic() - started:.1f} s")
