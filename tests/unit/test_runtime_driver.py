"""Every role's handler through the broker-free driver (workers/runtime/driver.py): records in,
outputs and commits out, with the checkpoint order of the batch loop; and the emitter's one
``BufferError`` loop and DLQ record."""

from __future__ import annotations

import base64

import orjson
import pytest
from confluent_kafka import KafkaError

from rtaudit.engine.fusion import Fusion
from rtaudit.engine.models.lexical import REPORTED_AS, LexicalTextStage
from rtaudit.engine.policy import PolicyBook, TenantPolicy
from rtaudit.schemas.codec import encode
from rtaudit.schemas.errors import InvalidJSON
from rtaudit.topics.catalog import DLQ, REQUESTS, SCORES, VERDICTS
from rtaudit.workers import metrics
from rtaudit.workers.fusion import FusionHandler
from rtaudit.workers.router import RouterHandler
from rtaudit.workers.runtime.driver import Driver, record, records, run
from rtaudit.workers.runtime.emitter import BatchDelivery, Emitter
from rtaudit.workers.runtime.records import DeadLetter, Output
from rtaudit.workers.serving import ServingSet
from rtaudit.workers.settings import load_settings
from rtaudit.workers.stage_handler import StageHandler

from .builders import CREATED_MS, DEADLINE_MS, audit_request, manifest, partial, task

TEXT = "text/text:0"


@pytest.fixture
def media(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path))
    return load_settings().media.policy()


# -- router ---------------------------------------------------------------------------------


def test_router_routes_rejects_and_commits_past_every_record(media) -> None:  # type: ignore[no-untyped-def]
    book = PolicyBook()
    now = CREATED_MS + 5
    good = audit_request(request_id="ok-1", priority="high").model_dump_json().encode()
    result = run(RouterHandler(lambda: book, media), records(REQUESTS, [(b"ok-1", good), (b"bad-1", b"{not json")]),
                 role="router", now_ms=now)
    assert [o.topic for o in result.outputs] == ["audit.text.hi", SCORES, DLQ, VERDICTS]
    [dlq] = result.values(DLQ)
    assert (dlq["source_offset"], dlq["source_key"], dlq["role"]) == (1, "bad-1", "router")
    assert base64.b64decode(dlq["original_b64"]) == b"{not json"
    [verdict] = result.values(VERDICTS)
    assert verdict["request_id"] == "bad-1" and verdict["decision"] == "review"
    assert result.commits == {(REQUESTS, 0): 2}


def test_the_router_caps_the_deadline_once_and_a_held_request_keeps_it(media) -> None:  # type: ignore[no-untyped-def]
    """The deadline decided when the request is read is the one its tasks and manifest carry,
    even when it is routed later, after a quota hold."""
    from rtaudit.engine.policy import QuotaPolicy
    from rtaudit.engine.routing import MAX_DEADLINE_AHEAD_MS

    slow = TenantPolicy(lane="hi", quota=QuotaPolicy(rate_per_s=1, burst=1, over_quota="delay", max_delay_ms=5000))
    book = PolicyBook(tenants={"slow": slow})
    t0 = CREATED_MS
    reqs = [audit_request(request_id=f"s-{i}", tenant_id="slow", created_at_ms=t0, deadline_ms=t0 + 10 * MAX_DEADLINE_AHEAD_MS)
            for i in range(2)]
    driver = Driver(RouterHandler(lambda: book, media), "router")
    batch = [record(REQUESTS, r.model_dump_json().encode(), r.request_id.encode(), offset=i, ts_ms=t0)
             for i, r in enumerate(reqs)]
    driver.handle(batch, now_ms=t0, tick=False)
    assert driver.checkpoint() == {(REQUESTS, 0): 1}  # s-1 is held: the commit stays before it
    driver.tick(t0 + 1000)  # its quota is paid a second later
    manifests = driver.result.values(SCORES)
    assert [m["request_id"] for m in manifests] == ["s-0", "s-1"]
    assert {m["deadline_ms"] for m in manifests} == {t0 + MAX_DEADLINE_AHEAD_MS}  # capped at first read, not at release
    assert driver.checkpoint() == {(REQUESTS, 0): 2}


# -- fusion ---------------------------------------------------------------------------------


def fusion_handler(decided: dict[int, list[tuple[str, int | None]]] | None = None) -> FusionHandler:
    fusion = Fusion(PolicyBook(), grace_ms=250, retention_ms=60_000)
    return FusionHandler(fusion, lambda: fusion.policies, lambda parts: {p: (decided or {}).get(p, []) for p in parts})


def test_fusion_gives_one_verdict_on_its_partition_and_commits_past_the_decided_request() -> None:
    driver = Driver(fusion_handler(), "fusion")
    recs = records(SCORES, [encode(manifest(TEXT)), encode(partial(TEXT, scores={"offensive": 0.01})), b"\xff not json"],
                   partition=3)
    consumed = metrics.MESSAGES_CONSUMED.labels("fusion", SCORES)
    before = consumed._value.get()
    result = driver.run(recs, now_ms=CREATED_MS + 200)
    assert consumed._value.get() - before == 3  # rtaudit top's rec/s of fusion: every record, the bad one too
    [verdict] = result.on(VERDICTS)
    assert verdict.partition == 3 and orjson.loads(verdict.value)["decision"] == "allow"
    assert [o.topic for o in result.outputs] == [VERDICTS, DLQ]
    assert result.commits == {(SCORES, 3): 3}
    # a replay of the same records (a rebalance upstream) never gives a second verdict
    again = driver.run(records(SCORES, [encode(partial(TEXT, scores={"offensive": 0.9}))], partition=3, start=3),
                       now_ms=CREATED_MS + 300)
    assert len(again.on(VERDICTS)) == 1


def test_fusion_decides_at_the_deadline_and_remembers_what_the_partition_decided_before() -> None:
    driver = Driver(fusion_handler({0: [("req-old", DEADLINE_MS)]}), "fusion")
    recs = records(SCORES, [encode(manifest(TEXT)), encode(manifest(TEXT, request_id="req-old")),
                            encode(partial(TEXT, request_id="req-old"))])
    result = driver.run(recs, now_ms=CREATED_MS + 10, ticks=[DEADLINE_MS + 300])
    verdicts = result.values(VERDICTS)
    assert [v["request_id"] for v in verdicts] == ["req-1"]  # req-old was decided before the restart
    assert verdicts[0]["complete"] is False and verdicts[0]["decision"] == "review"
    assert result.commits == {(SCORES, 0): 3}


def test_a_revoke_checkpoints_then_drops_the_partition() -> None:
    driver = Driver(fusion_handler(), "fusion")
    driver.handle(records(SCORES, [encode(manifest(TEXT))], partition=1), now_ms=CREATED_MS + 1)
    driver.revoke([(SCORES, 1)])
    assert driver.result.commits == {(SCORES, 1): 0}  # the pending request is replayed by the next owner
    assert driver.handler.commit_offsets() == {}


# -- a modality stage (the text stage, on alt-profanity-check) -------------------------------


def text_handler() -> StageHandler:
    stage = LexicalTextStage()
    serving = ServingSet("text", lambda: stage, loader=lambda ref: stage)
    return StageHandler("text", {"audit.text.hi": "hi", "audit.text.lo": "lo"}, serving.score)


def test_the_text_stage_scores_expires_and_dead_letters_once() -> None:
    live = task(request_id="r-live", text="you are a fucking idiot", deadline_ms=DEADLINE_MS)
    calm = task(request_id="r-calm", text="thanks, see you at lunch", deadline_ms=DEADLINE_MS)
    late = task(request_id="r-late", text="hello", deadline_ms=CREATED_MS + 1)
    recs = records("audit.text.lo", [encode(live), encode(calm), encode(late), b'{"request_id": "r-bad"}'], start=40)
    result = run(text_handler(), recs, role="text", now_ms=CREATED_MS + 50)
    by_id = {p["request_id"]: p for p in result.values(SCORES)}
    assert (by_id["r-live"]["status"], by_id["r-calm"]["status"], by_id["r-late"]["status"]) == ("ok", "ok", "expired")
    assert by_id["r-live"]["scores"][REPORTED_AS] > 0.5 > by_id["r-calm"]["scores"][REPORTED_AS]
    assert by_id["r-late"]["timings"]["batch_size"] == 2  # the expired item took no slot
    [dlq] = result.values(DLQ)
    assert dlq["source_offset"] == 43 and dlq["error_code"] == "schema_violation"
    assert result.commits == {("audit.text.lo", 0): 44}


def test_expiry_is_the_batch_closer_s_decision_not_the_inference_thread_s() -> None:
    """An item the batch closer found live is scored even if its deadline passes before the
    inference thread starts: expiry is decided once, when the batch closes."""
    handler = text_handler()
    closing = task(request_id="r-close", text="hello there", deadline_ms=CREATED_MS + 1)  # long past by the wall clock
    work = handler.decode(record("audit.text.hi", encode(closing)))
    assert work.lane == "hi"
    [scored], _ = handler.infer([work], [])
    assert scored.partial.status == "ok" and scored.work is work


# -- the emitter --------------------------------------------------------------------------


class FullThenFree:
    """A producer whose local queue is full for the first two produce calls."""

    def __init__(self) -> None:
        self.full, self.produced, self.polls = 2, [], 0

    def produce(self, topic, value, key, **kwargs):  # type: ignore[no-untyped-def]
        if self.full:
            self.full -= 1
            raise BufferError("Local: Queue full")
        self.produced.append((topic, key, value, kwargs.get("partition")))

    def poll(self, timeout):  # type: ignore[no-untyped-def]
        self.polls += 1
        return 0


def test_a_full_local_queue_is_drained_then_the_output_produced() -> None:
    producer = FullThenFree()
    emitter = Emitter(None, "router", producer=producer)
    emitter.emit([Output("audit.scores", b"k", b"v", 2)])
    assert producer.produced == [("audit.scores", b"k", b"v", 2)] and producer.polls == 2


async def test_a_dead_letter_counts_toward_its_batch_and_says_why() -> None:
    import asyncio

    producer = FullThenFree()
    producer.full = 0
    emitter = Emitter(None, "text", producer=producer)
    batch = BatchDelivery(asyncio.get_running_loop())
    bad = record("audit.text.lo", b"\x00garbage", b"r-9", partition=1, offset=7)
    emitter.emit([DeadLetter(bad, InvalidJSON("not JSON", request_id="r-9"))], batch)
    [(topic, key, value, _)] = producer.produced
    dlq = orjson.loads(value)
    assert (topic, key, dlq["source_partition"], dlq["source_offset"], dlq["error"]) == (DLQ, b"r-9", 1, 7, "not JSON")
    batch.seal()
    assert not batch.future.done()  # one output outstanding
    batch(KafkaError(KafkaError._MSG_TIMED_OUT), record(DLQ, b"", partition=0))
    with pytest.raises(Exception, match="output not delivered"):
        await asyncio.wait_for(batch.future, 1)
