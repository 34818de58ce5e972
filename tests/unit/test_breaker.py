"""The circuit breaker as a control-topic policy (``breaker:<tenant>``), fusion's verdicts under each
action, the drift monitor's gauges and heartbeat readings, and the ``drift`` section of the status."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import REGISTRY

from rtaudit.engine.control import ControlState, encode
from rtaudit.engine.fusion import Fusion
from rtaudit.engine.policy import Breaker, PolicyBook, TenantPolicy
from rtaudit.schemas.control import BreakerPayload, ControlMessage, DriftStatus, Heartbeat
from rtaudit.workers.drift_monitor import DriftMonitor, sampled
from rtaudit.cli.drift_view import drift_rows
from rtaudit.workers.obs_settings import DriftSettings

from .builders import CREATED_MS, DEADLINE_MS, TENANT, manifest, partial, task, tick

TEXT, IMAGE = "text/text:0", "image/image:1"


def breaker_msg(version: int, expects: int, **payload) -> ControlMessage:  # type: ignore[no-untyped-def]
    return ControlMessage(subject=f"breaker:{TENANT}", version=version, expects=expects, author="test",
                          at_ms=1_700_000_000_000, payload=BreakerPayload(**payload))


def test_the_control_topic_carries_the_breaker_per_tenant() -> None:
    state = ControlState()
    for m in (breaker_msg(1, 0, action="fail_closed"), breaker_msg(2, 1, action="fail_closed", tripped=True)):
        assert state.apply(state.offset, *encode(m)).message is not None
    book = state.policy_book(PolicyBook(), now_ms=0)
    assert book.breakers == {TENANT: Breaker(action="fail_closed", tripped=True, version=2)}
    assert state.apply(state.offset, f"breaker:{TENANT}".encode(), None).message is None  # tombstone
    assert state.policy_book(PolicyBook(), now_ms=0).breakers == {}
    with pytest.raises(ValueError, match="action"):
        BreakerPayload(action="fail_sideways")  # type: ignore[arg-type]


def _verdict(breaker: Breaker | None, scores: dict[str, float], with_image: bool):  # type: ignore[no-untyped-def]
    book = PolicyBook(default=TenantPolicy(), breakers={TENANT: breaker} if breaker else {})
    f = Fusion(policies=book, grace_ms=0)
    state, v = f.apply(None, manifest(*([TEXT, IMAGE] if with_image else [TEXT])), CREATED_MS + 1)
    state, v = f.apply(state, partial(TEXT, scores=scores), CREATED_MS + 2)
    if with_image:  # the image part never comes: decided at the deadline
        state, v = f.apply(state, tick("deadline", DEADLINE_MS + 1), DEADLINE_MS + 1)
    return v


@pytest.mark.parametrize(("action", "scores", "incomplete", "decision"), [
    (None, {"hate": 0.1}, True, "review"),  # the default policy fails closed to review on a missing part
    ("fail_open", {"hate": 0.1}, True, "allow"),  # missing parts are ignored...
    ("fail_open", {"hate": 0.99}, True, "block"),  # ...but the scores that came still decide
    ("fail_closed", {"hate": 0.1}, False, "block"),
    ("hold_for_review", {"hate": 0.1}, False, "review"),
    ("hold_for_review", {"hate": 0.99}, False, "block"),
])
def test_fusion_decides_by_the_tripped_breakers_action(action, scores, incomplete, decision) -> None:  # type: ignore[no-untyped-def]
    v = _verdict(Breaker(action=action, tripped=True) if action else None, scores, incomplete)
    assert v is not None and v.decision == decision
    if action:
        assert v.reasons[0].startswith("circuit breaker tripped")


def test_an_armed_breaker_changes_nothing() -> None:
    v = _verdict(Breaker(action="fail_closed", tripped=False), {"hate": 0.1}, False)
    assert v.decision == "allow" and not any("breaker" in r for r in v.reasons)


def _gauge(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_the_monitor_feeds_psi_and_semantic_gauges_and_the_heartbeat() -> None:
    rng = np.random.default_rng(5)
    calls: list[int] = []

    def embed(texts: list[str]) -> np.ndarray:  # one direction per language: the embedding of a real encoder is tested in test_drift.py
        calls.append(len(texts))
        return np.stack([np.eye(8)[0 if t.startswith("en") else 1] + rng.normal(0, 0.01, 8) for t in texts])

    mon = DriftMonitor(DriftSettings(window=20, sample=1.0, reference_size=40, psi_window=40), "text", {TENANT})
    mon.start(embed)
    try:
        for batch in range(6):
            lang = "en" if batch < 4 else "zh"
            tasks = [task(text=f"{lang} post {batch}-{i}", request_id=f"r{batch}-{i}") for i in range(20)]
            hate = rng.beta(1, 8, 20) if batch < 4 else rng.beta(4, 2, 20)
            parts = [partial(TEXT, scores={"hate": float(h)}, request_id=t.request_id) for t, h in zip(tasks, hate)]
            parts[0] = partial(TEXT, status="error", error_code="inference_failed", error="x", request_id="bad")
            mon.observe(tasks, parts)
        mon.stop()
        mon._thread.join(5)  # type: ignore[union-attr]
    finally:
        mon.stop()
    (reading,) = mon.readings()
    assert reading["tenant"] == TENANT and reading["windows"] >= 5
    assert reading["semantic"] > 0.3  # the last window is Chinese
    assert reading["psi"]["hate"] > 0.25
    assert _gauge("rtaudit_drift_semantic", stage="text", tenant=TENANT) == pytest.approx(reading["semantic"], abs=1e-3)
    assert _gauge("rtaudit_drift_psi", stage="text", tenant=TENANT, category="hate") == pytest.approx(reading["psi"]["hate"], abs=1e-3)
    beat = Heartbeat(worker_id="text-h-1", role="text", at_ms=CREATED_MS, control_offset=0,
                     drift=[DriftStatus(**reading)])
    ((stage, tenant, worker, sem, windows, worst, state),) = drift_rows([beat])
    assert (stage, tenant, worker, state) == ("text", TENANT, "text-h-1", "page")
    assert worst.startswith("hate ")


def test_sampling_is_deterministic_by_request_id() -> None:
    ids = [f"req-{i}" for i in range(10_000)]
    picked = [i for i in ids if sampled(i, 0.1)]
    assert picked == [i for i in ids if sampled(i, 0.1)]
    assert 800 < len(picked) < 1200
    assert all(sampled(i, 1.0) for i in ids[:10])


def test_a_monitor_failure_never_reaches_the_worker() -> None:
    mon = DriftMonitor(DriftSettings(), "text", set())
    mon.observe([task()], [object()])  # not a partial: logged, nothing raised
    assert mon.readings() == []
