"""The serving set of a modality worker: versions swapped between batches, the canary slice,
shadow scoring, and the worker's own rollbacks and promotions (no Kafka: control records are
applied to a ControlState and handed to the listener as the reader thread would)."""

from __future__ import annotations

import time

from rtaudit.engine.clock import now_ms
from rtaudit.engine.control import ControlState, encode
from rtaudit.engine.models import StageOutput
from rtaudit.engine.models.null import NullStage
from rtaudit.engine.rollout import in_canary
from rtaudit.schemas.control import BundleRef, CanaryTriggers, ControlMessage, ModelPayload, RolloutPayload
from rtaudit.schemas.messages import ModelRef
from tests.unit.builders import task
from rtaudit.workers.serving import ServingSet


def ref(version: str) -> BundleRef:
    return BundleRef(stage="text", version=version, sha256=(version.encode().hex() * 64)[:64], uri=f"file:///m/{version}")


class VersionStage(NullStage):
    """A null stage named after its bundle; optionally slow, failing or flipping its scores."""

    def __init__(self, version: str, *, delay_s: float = 0.0, fail: bool = False, score: float = 0.0) -> None:
        super().__init__("text", {"offensive": score})
        self.model = ModelRef(name="text-bundle", version=version)
        self.delay_s, self.fail = delay_s, fail

    def infer(self, inputs: list[str]) -> list[StageOutput]:
        time.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("candidate is broken")
        return super().infer(inputs)


class Harness:
    def __init__(self, stages: dict[str, VersionStage], broken: set[str] = frozenset(),  # type: ignore[assignment]
                 apply_published: bool = True) -> None:
        self.apply_published = apply_published
        self.state = ControlState()
        self.published: list[tuple[str, object, str, int]] = []
        self.builtin = VersionStage("builtin")

        def load(r: BundleRef) -> VersionStage:
            if r.version in broken:
                raise ValueError(f"bundle {r.version}: sha256 mismatch")
            return stages[r.version]

        self.serving = ServingSet("text", lambda: self.builtin, load, self.publish).start()

    def publish(self, subject: str, payload: object, reason: str, expects: int) -> None:
        self.published.append((subject, payload, reason, expects))
        if not self.apply_published:  # the record has not come back through the topic yet
            return
        version = self.state.versions.get(subject, 0) + 1
        self.apply(subject, payload, version, self.state.version(subject) if expects < 0 else expects)

    def apply(self, subject: str, payload, version: int | None = None, expects: int | None = None) -> None:  # type: ignore[no-untyped-def]
        version = version or self.state.versions.get(subject, 0) + 1
        expects = self.state.version(subject) if expects is None else expects
        key, value = encode(ControlMessage(subject=subject, version=version, expects=expects, author="t",
                                           at_ms=1, payload=payload))
        applied = self.state.apply(self.state.offset, key, value)
        self.serving.on_control(self.state, [applied])  # type: ignore[list-item]
        assert self.serving.wait_settled(5)

    def score(self, ids: list[str]) -> dict[str, str]:
        far = now_ms() + 600_000  # the builder's default deadline is in the past: items would expire
        tasks = [task(request_id=i, deadline_ms=far, routed_at_ms=now_ms()) for i in ids]
        result = self.serving.score(tasks)
        return {p.request_id: p.model.version for p in result.partials}


TRIGGERS = CanaryTriggers(min_items=20, promote_after_items=10**6, promote_after_s=0)
IDS = [f"req-{i}" for i in range(400)]


def test_the_builtin_model_serves_until_a_bundle_is_in_force_then_the_swap_is_between_batches() -> None:
    h = Harness({"v1": VersionStage("v1")})
    assert set(h.score(IDS[:10]).values()) == {"builtin"}
    h.apply("model:text", ModelPayload(bundle=ref("v1")))
    assert set(h.score(IDS[:10]).values()) == {"v1"}
    assert h.serving.status().loaded == ["v1"] and h.serving.status().weights == {"v1": 100.0}


def test_a_canary_scores_exactly_its_slice_and_every_item_by_one_version() -> None:
    h = Harness({"v1": VersionStage("v1"), "v2": VersionStage("v2")})
    h.apply("model:text", ModelPayload(bundle=ref("v1")))
    h.apply("rollout:text", RolloutPayload(stable=ref("v1"), candidate=ref("v2"), weight_pct=50, phase="rollout",
                                           triggers=TRIGGERS))
    versions = h.score(IDS)
    assert len(versions) == len(IDS)
    assert all(versions[i] == ("v2" if in_canary(i, 50) else "v1") for i in IDS)
    assert h.serving.status().weights == {"v1": 50.0, "v2": 50.0}
    assert h.score(IDS) == versions  # a retry of a request lands on the same version


def test_every_partial_names_the_rollout_record_it_was_routed_under() -> None:
    h = Harness({"v1": VersionStage("v1"), "v2": VersionStage("v2")})
    h.apply("model:text", ModelPayload(bundle=ref("v1")))
    far = now_ms() + 600_000
    tasks = [task(request_id=i, deadline_ms=far, routed_at_ms=now_ms()) for i in IDS[:20]]
    assert {p.model.rollout for p in h.serving.score(tasks).partials} == {None}  # no rollout yet
    h.apply("rollout:text", RolloutPayload(stable=ref("v1"), candidate=ref("v2"), weight_pct=50, phase="rollout",
                                           triggers=TRIGGERS))
    h.apply("rollout:text", RolloutPayload(stable=ref("v1"), candidate=ref("v2"), weight_pct=100, phase="full",
                                           triggers=TRIGGERS))
    partials = h.serving.score(tasks).partials
    assert {p.model.rollout for p in partials} == {2} and {p.model.version for p in partials} == {"v2"}


def test_a_weight_of_zero_sends_no_traffic_to_the_candidate() -> None:
    h = Harness({"v2": VersionStage("v2")})
    h.apply("rollout:text", RolloutPayload(candidate=ref("v2"), weight_pct=0, phase="precheck", triggers=TRIGGERS))
    assert set(h.score(IDS).values()) == {"builtin"}


def test_a_failing_canary_is_rolled_back_once_by_the_worker() -> None:
    h = Harness({"v2": VersionStage("v2", fail=True)})
    h.apply("rollout:text", RolloutPayload(candidate=ref("v2"), weight_pct=50, phase="rollout", triggers=TRIGGERS))
    h.score(IDS[:100])
    deadline = time.monotonic() + 5
    while not h.published and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    h.score(IDS[100:200])
    assert len(h.published) == 1
    subject, payload, reason, expects = h.published[0]
    assert subject == "rollout:text" and payload.phase == "rolled_back" and payload.weight_pct == 0  # type: ignore[attr-defined]
    assert reason.startswith("rollback: error rate") and expects == 1
    assert set(h.score(IDS).values()) == {"builtin"}  # back to 0 % at once


def test_a_bundle_that_fails_verification_is_never_served_and_its_canary_is_rolled_back() -> None:
    h = Harness({}, broken={"v2"})
    h.apply("rollout:text", RolloutPayload(candidate=ref("v2"), weight_pct=5, triggers=TRIGGERS))
    deadline = time.monotonic() + 5
    while not h.published and time.monotonic() < deadline:
        time.sleep(0.01)
    assert h.published and "verification failed: ValueError: bundle v2: sha256 mismatch" in h.published[0][2]
    assert set(h.score(IDS).values()) == {"builtin"}
    assert "sha256 mismatch" in h.serving.status().failed["v2"]


def test_a_slow_canary_is_rolled_back_on_its_p99() -> None:
    h = Harness({"v2": VersionStage("v2", delay_s=0.25)})
    h.apply("rollout:text", RolloutPayload(candidate=ref("v2"), weight_pct=50, phase="rollout",
                                           triggers=TRIGGERS.model_copy(update={"min_items": 10})))
    for i in range(4):
        h.score(IDS[i * 20:(i + 1) * 20])
    deadline = time.monotonic() + 5
    while not h.published and time.monotonic() < deadline:
        time.sleep(0.01)
    assert h.published and "margin" in h.published[0][2]


def test_shadow_mode_counts_only_the_stable_version_and_rolls_back_on_disagreement() -> None:
    h = Harness({"v2": VersionStage("v2", score=0.99)})  # flips every decision
    h.apply("rollout:text", RolloutPayload(candidate=ref("v2"), weight_pct=50, shadow=True, triggers=TRIGGERS))
    assert set(h.score(IDS[:100]).values()) == {"builtin"}
    deadline = time.monotonic() + 5
    while not h.published and time.monotonic() < deadline:
        time.sleep(0.01)
    assert h.published and "decisions differ" in h.published[0][2]


def test_a_healthy_canary_is_promoted_step_by_step_then_becomes_the_model() -> None:
    h = Harness({"v1": VersionStage("v1"), "v2": VersionStage("v2")})
    h.apply("model:text", ModelPayload(bundle=ref("v1")))
    fast = TRIGGERS.model_copy(update={"promote_after_items": 10, "min_items": 5})
    h.apply("rollout:text", RolloutPayload(stable=ref("v1"), candidate=ref("v2"), weight_pct=5, triggers=fast))
    weights = []
    for _ in range(50):
        h.score(IDS)
        time.sleep(0.02)
        rollout = h.state.rollout("text")
        weights.append((rollout.weight_pct, rollout.phase))  # type: ignore[union-attr]
        if rollout.phase == "promoted":  # type: ignore[union-attr]
            break
    steps = [w for i, w in enumerate(weights) if i == 0 or w != weights[i - 1]]
    assert steps[-3:] == [(50.0, "rollout"), (100.0, "full"), (0.0, "promoted")], steps
    assert h.state.model("text").bundle.version == "v2"  # type: ignore[union-attr]
    assert set(h.score(IDS).values()) == {"v2"}
    assert h.serving.status().loaded == ["v2"]  # v1 released once nothing names it


def test_a_model_that_fails_verification_leaves_the_version_in_service_serving() -> None:
    h = Harness({"v1": VersionStage("v1")}, broken={"v2"})
    h.apply("model:text", ModelPayload(bundle=ref("v1")))
    h.apply("model:text", ModelPayload(bundle=ref("v2")))
    assert set(h.score(IDS[:20]).values()) == {"v1"}
    status = h.serving.status()
    assert status.weights == {"v1": 100.0} and "sha256 mismatch" in status.failed["v2"]


def test_the_worker_stops_serving_a_candidate_it_rolls_back_before_the_record_comes_back() -> None:
    h = Harness({"v2": VersionStage("v2", fail=True)}, apply_published=False)
    h.apply("rollout:text", RolloutPayload(candidate=ref("v2"), weight_pct=50, phase="rollout", triggers=TRIGGERS))
    first = h.score(IDS[:100])
    assert "v2" in first.values()
    assert set(h.score(IDS[100:300]).values()) == {"builtin"}  # the very next batch
    assert h.state.rollout("text").phase == "rollout"  # type: ignore[union-attr]  # the record is not back yet
