"""A modality worker loads and warms its model before its consumer starts (before it
joins its group), and its control tick survives a partition revoked mid-tick."""

from __future__ import annotations

import base64
import io

from confluent_kafka import KafkaError, KafkaException, TopicPartition

import pytest
from PIL import Image

from rtaudit.engine.batcher import Batcher
from rtaudit.engine.batcher_config import BatcherConfig
from rtaudit.engine.models import StageOutput
from rtaudit.schemas.messages import ModelRef
from rtaudit.workers.runtime.lane_intake import LaneControl
from rtaudit.workers.modality import modality_app
from rtaudit.workers.serving import LazyStage, warmup_task


class CountingStage:
    """Scores every input 0.1 and counts the batches it was given."""

    stage = "text"
    model = ModelRef(name="counting", version="1")

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.batches = 0

    def prepare(self, task):  # type: ignore[no-untyped-def]
        if self.fail:
            raise ValueError("broken model")
        return task.text or task.media

    def infer(self, inputs):  # type: ignore[no-untyped-def]
        self.batches += 1
        return [StageOutput(scores={"offensive": 0.1}, evidence=[]) for _ in inputs]


@pytest.mark.parametrize("modality", ["text", "image"])
def test_warmup_task_is_a_valid_small_task(modality: str) -> None:
    task = warmup_task(modality)
    assert task.modality == modality and task.part == f"{modality}:0"
    assert task.deadline_ms > task.created_at_ms
    if modality == "image":
        img = Image.open(io.BytesIO(base64.b64decode(task.media.data_b64)))  # type: ignore[union-attr]
        assert img.size == (240, 48)
    else:
        assert task.text


def test_warm_loads_once_and_runs_one_batch() -> None:
    stage = CountingStage()
    built = []
    lazy = LazyStage(lambda s: built.append(s) or stage, settings=None)  # type: ignore[arg-type]
    assert lazy.warm("text") >= 0.0
    assert lazy.get() is stage and len(built) == 1 and stage.batches == 1


def test_warm_raises_when_the_warmup_item_fails() -> None:
    lazy = LazyStage(lambda s: CountingStage(fail=True), settings=None)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="warm-up batch failed"):
        lazy.warm("text")


async def test_the_model_is_warm_when_the_app_first_starts(tmp_path, monkeypatch) -> None:
    """Faust awaits ``App.on_first_start`` before it starts the consumer and the agents."""
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("RTAUDIT_METRICS_PORT", "0")
    monkeypatch.setattr("rtaudit.workers.modality.CONTROL_CATCH_UP_S", 0.1)  # no broker here: do not wait for audit.control
    stage = CountingStage()
    app = modality_app("text", "text", lambda s: stage)
    assert stage.batches == 0  # nothing is loaded when the app is built (import time)
    try:
        await app.on_first_start()
    finally:
        app.modality.control.stop()
    assert stage.batches == 1


class RevokingConsumer:
    """One partition is revoked while the tick reads it (librdkafka raises for it)."""

    def assignment(self):  # type: ignore[no-untyped-def]
        return [TopicPartition("audit.text.lo", 0), TopicPartition("audit.text.lo", 1)]

    def get_watermark_offsets(self, tp, cached=False):  # type: ignore[no-untyped-def]
        if tp.partition == 1:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        return (0, 7)

    def position(self, tps):  # type: ignore[no-untyped-def]
        return [TopicPartition(tp.topic, tp.partition, 2) for tp in tps]

    def pause(self, tps) -> None:  # type: ignore[no-untyped-def]
        pass

    def resume(self, tps) -> None:  # type: ignore[no-untyped-def]
        pass


def test_tick_skips_a_partition_revoked_during_the_tick() -> None:
    batcher: Batcher[str] = Batcher(BatcherConfig(max_size=4))
    ctl = LaneControl(RevokingConsumer(), "text", {"audit.text.hi": "hi", "audit.text.lo": "lo"}, batcher)
    ctl.tick()  # no exception
    assert batcher.stats().lag == 5
