"""`rtaudit control ...` without a broker: times, policy files, rollout steps, the status table and
its flags, the history (cli/control_view.py), and argument errors through Typer's CliRunner
(one line, exit 2, before anything is published)."""

from __future__ import annotations

import json
import socket
from datetime import datetime, timezone

import pytest
from typer.testing import CliRunner

from rtaudit.engine.control import ControlState, encode
from rtaudit.engine.policy import TenantPolicy
from rtaudit.schemas.control import (
    BundleRef,
    ControlMessage,
    Heartbeat,
    ModelPayload,
    PolicyPayload,
    PriorityPayload,
    RolloutPayload,
    ServingStatus,
)
from rtaudit.cli import control_view as view
from rtaudit.cli.main import app

NOW = 1_800_000_000_000


def ref(version: str, stage: str = "text") -> BundleRef:
    sha = (version.encode().hex() * 64)[:64]
    return BundleRef(stage=stage, version=version, sha256=sha, uri=f"file:///store/{stage}/{version}")  # type: ignore[arg-type]


def msg(subject: str, payload, version: int, expects: int, at_ms: int = NOW - 60_000, **kw) -> ControlMessage:  # type: ignore[no-untyped-def]
    return ControlMessage(subject=subject, version=version, expects=expects, author="ops@host", at_ms=at_ms,
                          payload=payload, **kw)


def state_of(*messages: ControlMessage) -> ControlState:
    state = ControlState()
    for i, m in enumerate(messages):
        assert state.apply(i, *encode(m)).__class__.__name__ == "Applied"
    return state


def beat(worker: str = "text-h-1", at_ms: int = NOW - 1000, weights: dict[str, float] | None = None, **kw) -> Heartbeat:  # type: ignore[no-untyped-def]
    serving = [ServingStatus(stage="text", loaded=sorted(weights or {}), weights=weights or {})] if weights is not None else []
    return Heartbeat(worker_id=worker, role=worker.split("-")[0], at_ms=at_ms, control_offset=kw.pop("offset", 2),
                     serving=serving, **kw)


# ------------------------------------------------------------------------------------------ times

@pytest.mark.parametrize(("text", "delta_ms"), [("+10m", 600_000), ("+90s", 90_000), ("+1h30m", 5_400_000),
                                                ("+2d", 172_800_000), ("+500ms", 500), ("+ 1.5h", 5_400_000)])
def test_a_delay_is_added_to_now(text: str, delta_ms: int) -> None:
    assert view.parse_time(text, NOW) == NOW + delta_ms


def test_iso_8601_times_with_and_without_an_offset() -> None:
    assert view.parse_time("2027-01-15T08:00:00Z", NOW) == int(datetime(2027, 1, 15, 8, tzinfo=timezone.utc).timestamp() * 1000)
    assert view.parse_time("2027-01-15T10:00+02:00", NOW) == int(datetime(2027, 1, 15, 8, tzinfo=timezone.utc).timestamp() * 1000)
    assert view.parse_time("2027-01-15T08:00", NOW) == int(datetime(2027, 1, 15, 8).timestamp() * 1000)  # local time


@pytest.mark.parametrize("text", ["+10x", "+", "tomorrow", "10m", "2027-13-45", ""])
def test_a_bad_time_says_which_forms_work(text: str) -> None:
    with pytest.raises(ValueError, match=r"\+10m"):
        view.parse_time(text, NOW)


# ------------------------------------------------------------------------------------------ policy files

def test_a_policy_file_in_toml_or_json(tmp_path) -> None:  # type: ignore[no-untyped-def]
    toml = tmp_path / "acme.toml"
    toml.write_text('lane = "hi"\nslo_ms = 2000\non_incomplete = "block"\n[thresholds.hate]\nreview = 0.4\nblock = 0.7\n'
                    '[quota]\nrate_per_s = 50\n')
    p = view.read_policy(toml)
    assert (p.lane, p.slo_ms, p.on_incomplete, p.thresholds["hate"].review, p.quota.rate_per_s) == ("hi", 2000, "block", 0.4, 50)
    js = tmp_path / "acme.json"
    js.write_text(json.dumps({"on_incomplete": "allow"}))
    assert view.read_policy(js) == TenantPolicy(on_incomplete="allow")


@pytest.mark.parametrize(("name", "text", "error"), [
    ("p.toml", 'lane = "middle"', "lane: Input should be 'hi' or 'lo'"),
    ("p.toml", "lane = ", "not valid TOML"),
    ("p.json", "[1, 2]", "expected a table"),
    ("p.json", '{"colour": "red"}', "colour: Extra inputs are not permitted"),
    ("p.toml", '[thresholds.hate]\nreview = 0.9\nblock = 0.5', "block threshold 0.5 is below review threshold 0.9"),
])
def test_a_bad_policy_file_is_one_line_naming_the_file(tmp_path, name: str, text: str, error: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError) as exc:
        view.read_policy(path)
    assert str(exc.value).startswith(str(path)) and error in str(exc.value) and "\n" not in str(exc.value)


# ------------------------------------------------------------------------------------------ rollouts

def test_the_candidate_is_found_by_stage_and_version() -> None:
    refs = [ref("v1"), ref("v2"), ref("v2", "image")]
    assert view.find_bundle(refs, "image", "v2") == ref("v2", "image")
    with pytest.raises(LookupError, match="no text bundle v3 in the store .text versions there: v1, v2."):
        view.find_bundle(refs, "text", "v3")


def test_promote_steps_5_50_100_then_the_candidate_becomes_the_model() -> None:
    r = RolloutPayload(stable=ref("v1"), candidate=ref("v2"), weight_pct=5.0, phase="precheck")
    [(subject, r50, _)] = view.promote_plan("text", r)
    assert subject == "rollout:text" and (r50.weight_pct, r50.phase) == (50.0, "rollout")
    [(_, r100, why)] = view.promote_plan("text", r50)
    assert (r100.weight_pct, r100.phase, why) == (100.0, "full", "step to 100 %")
    (model_subject, model, _), (rollout_subject, done, _) = view.promote_plan("text", r100)
    assert (model_subject, model) == ("model:text", ModelPayload(bundle=ref("v2")))
    assert (rollout_subject, done.weight_pct, done.phase) == ("rollout:text", 0.0, "promoted")
    assert view.promote_plan("text", r.model_copy(update={"weight_pct": 0.0}))[0][1].weight_pct == 5.0  # 0 % → 5 %


def test_rollback_and_abort_give_the_candidate_no_traffic_and_need_an_active_rollout() -> None:
    r = RolloutPayload(candidate=ref("v2"), weight_pct=50.0, phase="rollout")
    back = view.stop_payload("text", r, "rolled_back")
    assert (back.weight_pct, back.phase, back.candidate) == (0.0, "rolled_back", ref("v2"))
    with pytest.raises(ValueError, match="the last one is rolled_back"):
        view.stop_payload("text", back, "aborted")
    with pytest.raises(ValueError, match="no active rollout of text: `rtaudit control rollout start`"):
        view.promote_plan("text", None)


# ------------------------------------------------------------------------------------------ status

def test_in_force_is_the_model_or_the_rollout_mix() -> None:
    model = msg("model:text", ModelPayload(bundle=ref("v1")), 1, 0, at_ms=NOW - 60_000)
    assert view.in_force(ControlState(), "text") is None
    assert view.in_force(state_of(model), "text").weights == {"v1": 100.0}  # type: ignore[union-attr]
    canary = msg("rollout:text", RolloutPayload(stable=ref("v1"), candidate=ref("v2"), weight_pct=5.0), 1, 0, at_ms=NOW - 5_000)
    f = view.in_force(state_of(model, canary), "text")
    assert f is not None and f.weights == {"v1": 95.0, "v2": 5.0} and f.changed_at_ms == NOW - 5_000
    shadow = msg("rollout:text", RolloutPayload(candidate=ref("v2"), weight_pct=50.0, shadow=True), 1, 0)
    assert view.in_force(state_of(shadow), "text").weights == {None: 100.0, "v2": 0.0}  # type: ignore[union-attr]
    back = msg("rollout:text", RolloutPayload(candidate=ref("v2"), weight_pct=0.0, phase="rolled_back"), 1, 0)
    assert view.in_force(state_of(back), "text").weights == {None: 100.0}  # type: ignore[union-attr]


def test_a_worker_still_serving_the_old_version_is_flagged_after_10_s() -> None:
    model = msg("model:text", ModelPayload(bundle=ref("v1")), 1, 0, at_ms=NOW - 120_000)
    canary = RolloutPayload(stable=ref("v1"), candidate=ref("v2"), weight_pct=50.0, phase="rollout")
    fresh = state_of(model, msg("rollout:text", canary, 1, 0, at_ms=NOW - 4_000))
    old = state_of(model, msg("rollout:text", canary, 1, 0, at_ms=NOW - 15_000))
    behind = beat(weights={"v1": 100.0})
    assert view.flags(behind, fresh, NOW) == []  # 4 s after the change: still converging
    [flag] = view.flags(behind, old, NOW)
    assert flag == "text: serves v1: 100 %, in force v1: 50 %, v2: 50 % since 15 s"
    assert view.flags(beat(weights={"v1": 50.0, "v2": 50.0}), old, NOW) == []
    assert view.flags(beat(weights={"v1": 50.2, "v2": 49.8}), old, NOW) == []  # within the tolerance
    assert view.flags(beat("router-h-2"), old, NOW) == []  # serves no model


def test_the_built_in_model_matches_any_name_but_not_a_bundle() -> None:
    back = state_of(msg("rollout:text", RolloutPayload(candidate=ref("v2"), weight_pct=0.0, phase="rolled_back"), 1, 0))
    assert view.flags(beat(weights={"rtaudit-text-abc": 100.0}), back, NOW) == []
    assert view.flags(beat(weights={"rtaudit-text-abc": 95.0, "v2": 5.0}), back, NOW)
    assert view.flags(beat(weights={"v2": 100.0}), back, NOW)


def test_failed_loads_and_a_degraded_worker_are_flagged() -> None:
    b = Heartbeat(worker_id="text-h-1", role="text", at_ms=NOW, control_offset=1, health="degraded", detail="last rejected offset 3: stale",
                  serving=[ServingStatus(stage="text", loaded=["v1"], weights={"v1": 100.0}, failed={"v2": "BundleCorrupt: sha256"})])
    assert view.flags(b, ControlState(), NOW) == ["text v2 failed: BundleCorrupt: sha256", "last rejected offset 3: stale"]


def test_live_heartbeats_keep_the_latest_per_worker_and_drop_the_silent() -> None:
    beats = [beat("text-a", NOW - 5000), beat("text-a", NOW - 1000), beat("text-a", NOW - 3000), beat("ocr-b", NOW - 31_000)]
    live = view.live_heartbeats(beats, NOW)
    assert list(live) == ["text-a"] and live["text-a"].at_ms == NOW - 1000


def test_worker_rows() -> None:
    state = state_of(msg("model:text", ModelPayload(bundle=ref("v1")), 1, 0), msg("policy:acme", PolicyPayload(policy=TenantPolicy()), 1, 0))
    beats = {"text-h-1": beat(weights={"v1": 100.0}, lag=7, offset=1), "fusion-h-2": beat("fusion-h-2", offset=2)}
    rows = view.worker_rows(beats, state, NOW)
    assert [r.role for r in rows] == ["fusion", "text"]
    assert rows[1].cells() == ["text-h-1", "text", "1.0 s ago", "1/2", "ok", "text v1: 100 %", "text v1", "0", "7", ""]
    assert rows[0].control_offset == "2" and rows[0].lag == ""


def test_a_worker_that_stopped_beating_is_stale_and_flagged_before_it_is_gone() -> None:
    """A worker killed with kill -9 read "ok" until its heartbeat expired (30 s)."""
    from rtaudit.schemas.control import HEARTBEAT_S

    assert view.STALE_AFTER_MS == 2 * HEARTBEAT_S * 1000 + 1000 == 5000  # the status and top help say 2 s and 5 s
    beats = {"text-h-1": beat("text-h-1", NOW - 1000), "text-h-2": beat("text-h-2", NOW - 12_000),
             "text-h-3": beat("text-h-3", NOW - 5000, health="loading")}
    assert set(view.live_heartbeats(beats.values(), NOW)) == set(beats)  # none is gone yet
    rows = {r.worker: r for r in view.worker_rows(beats, ControlState(), NOW)}
    assert (rows["text-h-1"].health, rows["text-h-1"].flags) == ("ok", [])
    assert rows["text-h-3"].health == "loading"  # 5 s: not yet
    stale = rows["text-h-2"]
    assert stale.health == "stale" and stale.cells()[2] == "12.0 s ago"
    assert stale.flags == ["no heartbeat for 12 s (one every 2 s): killed or hung? gone after 30 s"]


#: a text model's version as the text stage names it: the cascade profile comes last
LONG = ("2026-12-04-e7082391+minilm-53aa51172d14-ft4f21344890b3-op17-int8+apc-0.2.14+ml-3c1f0e2a"
        "+e5-small-q4-9d8e7f6a+cascade-balanced")


@pytest.mark.parametrize(("width", "shown"), [
    (200, LONG),
    (40, "2026-12-04-e7082391+…+cascade-balanced"),
    (30, "2026-12-04-e…+cascade-balanced"),
    (18, "…+cascade-balanced"),
    (12, "…de-balanced"),
])
def test_a_long_version_is_elided_in_the_middle_keeping_its_cascade_profile(width: int, shown: str) -> None:
    assert view.short_version(LONG, width) == shown and len(shown) <= width
    assert view.short_version("v2", 5) == "v2" and view.short_version("abcdefghijklmnop", 9) == "abcd…mnop"


def test_the_serving_text_fits_a_width_by_eliding_its_versions() -> None:
    text = view.serving_text([ServingStatus(stage="text", loaded=[LONG, "v2"], weights={LONG: 95.0, "v2": 5.0})])
    assert text == f"text {LONG}: 95 %, v2: 5 %"
    assert view.fit_versions(text, 200) == text
    assert view.fit_versions(text, 44) == "text 2026-1…+cascade-balanced: 95 %, v2: 5 %"
    assert view.serving_text([ServingStatus(stage="text", weights={LONG: 100.0})], 40) == \
        "text 2026-12-04-e7082391+…+cascade-balanced: 100 %"


def test_the_status_table_shows_the_end_of_a_long_version() -> None:
    import io

    from rich.console import Console

    console = Console(width=140, file=io.StringIO(), record=True)
    console.print(view.fleet_table({"text-h-1": beat(weights={LONG: 100.0})}, ControlState(), NOW))
    out = "".join(line.split("│")[6].strip() for line in console.export_text().splitlines() if line.startswith("│"))
    assert out == "text2026-12-04-e7082391+…+cascade-balanced: 100 %", console.export_text()  # folded, not cut


def test_subject_rows_summarise_each_kind() -> None:
    until = NOW - 1000
    state = state_of(
        msg("model:text", ModelPayload(bundle=ref("v1")), 1, 0),
        msg("rollout:text", RolloutPayload(stable=ref("v1"), candidate=ref("v2"), weight_pct=5.0, shadow=True), 1, 0),
        msg("priority:acme", PriorityPayload(lane="hi", slo_ms=500, until_ms=until), 1, 0),
        msg("policy:acme", PolicyPayload(policy=TenantPolicy(lane="hi")), 1, 0),
    )
    rows = {r[0]: r for r in view.subject_rows(state, NOW)}
    assert rows["model:text"][1:4] == ("1", "ops@host", "60 s") and rows["model:text"][4].startswith("v1 (")
    assert rows["rollout:text"][4] == "v1 → v2 at 5 %, precheck, shadow"
    assert rows["priority:acme"][4] == f"lane hi, SLO 500 ms, until {view.when(until)} (expired)"
    assert rows["policy:acme"][4].startswith("lane hi, SLO 10000 ms, on_incomplete review")


# ------------------------------------------------------------------------------------------ history

def test_history_reapplies_every_record_to_say_accepted_or_rejected() -> None:
    v1 = msg("model:text", ModelPayload(bundle=ref("v1")), 1, 0, reason="first")
    v2 = msg("model:text", ModelPayload(bundle=ref("v2")), 2, 1)
    conflict = msg("model:text", ModelPayload(bundle=ref("v3")), 3, 1)
    records = [(0, NOW, *encode(v1)), (1, NOW, *encode(v2)), (2, NOW, *encode(conflict)), (3, NOW, *encode(v1)),
               (4, NOW, b"model:text", b"{not json"), (5, NOW + 5, b"priority:acme", None),
               (6, NOW, *encode(msg("priority:acme", PriorityPayload(lane="hi"), 1, 0)))]
    rows = view.history_rows(records)
    assert [r.accepted for r in rows] == [True, True, False, False, False, True, True]
    assert (rows[0].version, rows[0].expects, rows[0].author, rows[0].reason) == ("1", "0", "ops@host", "first")
    assert rows[2].result == "rejected: cas_conflict: model:text version 3 expects version 1, but version 2 is in force"
    assert rows[3].result.startswith("rejected: stale") and rows[4].result.startswith("rejected: malformed")
    assert rows[5].result == "accepted: tombstone (back to rtaudit.toml)" and rows[5].time == view.when(NOW + 5)
    assert [r.offset for r in view.history_rows(records, "model:text", limit=2)] == [3, 4]
    assert [r.offset for r in view.history_rows(records, "priority:acme")] == [5, 6]


# ------------------------------------------------------------------------------------------ CLI arguments

@pytest.fixture()
def no_broker(monkeypatch, tmp_path):  # type: ignore[no-untyped-def]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.chdir(tmp_path)
    for name in ("RTAUDIT_CONFIG", "KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", str(port))
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))  # no other fleet's claim changes the hint
    return port


def run(*args: str):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, ["control", *args])
    assert "Traceback" not in result.output, result.output
    return result


def one_line(result) -> str:  # type: ignore[no-untyped-def]
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("weight", ["101", "-1", "nan"])
def test_an_invalid_weight_is_rejected_before_anything_is_published(no_broker, weight: str) -> None:  # type: ignore[no-untyped-def]
    result = run("rollout", "start", "text", "--candidate", "v2", "--weight", weight)
    assert result.exit_code == 2
    assert "--weight" in result.output or "weight_pct" in result.output


def test_a_weight_of_0_is_valid(no_broker) -> None:  # type: ignore[no-untyped-def]
    result = run("rollout", "start", "text", "--candidate", "v2", "--weight", "0")
    assert result.exit_code == 2  # it got past the weight: the store has no v2
    assert one_line(result).startswith("no text bundle v2 in the store")


@pytest.mark.parametrize(("args", "error"), [
    (["rollout", "start", "audio", "--candidate", "v2"], "unknown control subject 'rollout:audio'"),
    (["rollout", "start", "text", "--candidate", "v2", "--max-error-rate", "2"], "bad trigger: max_error_rate"),
    (["priority", "set", "acme"], "give at least one of --lane, --slo-ms, --quota"),
    (["priority", "set", "acme", "--lane", "hi", "--until", "+5x"], "--until: '+5x' is not a delay"),
    (["priority", "set", "acme", "--lane", "hi", "--until", "2001-01-01T00:00Z"], "in the past"),
    (["priority", "set", "acme", "--lane", "middle"], "bad priority: lane: Input should be 'hi' or 'lo'"),
    (["priority", "set", "acme", "--slo-ms", "0"], "bad priority: slo_ms"),
    (["policy", "set", "acme", "missing.toml"], "missing.toml: No such file or directory"),
    (["policy", "clear", "a b"], "unknown control subject 'policy:a b'"),
    (["history", "--subject", "model:audio"], "unknown control subject 'model:audio'"),
])
def test_bad_input_is_one_line_and_exit_2(no_broker, args: list[str], error: str) -> None:  # type: ignore[no-untyped-def]
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert error in one_line(result)


@pytest.mark.parametrize("args", [["status"], ["history"], ["rollout", "promote", "text"], ["priority", "clear", "acme"],
                                  ["priority", "set", "acme", "--lane", "hi", "--until", "+10m"]])
def test_no_broker_is_one_line_with_the_fix_and_exit_2(no_broker, args: list[str]) -> None:  # type: ignore[no-untyped-def]
    result = run(*args)
    assert result.exit_code == 2
    assert one_line(result) == f"no broker at 127.0.0.1:{no_broker} (connection refused): start one with `rtaudit up`"


def test_expect_version_must_not_be_negative(no_broker) -> None:  # type: ignore[no-untyped-def]
    result = run("rollout", "abort", "text", "--expect-version", "-1")
    assert result.exit_code == 2 and "--expect-version" in result.output



def test_an_empty_policy_file_is_refused_with_the_command_that_clears_a_policy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty policy file.*policy clear"):
        view.read_policy(empty)


def test_a_policy_with_a_category_no_stage_scores_is_refused(no_broker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    typo = tmp_path / "typo.toml"
    typo.write_text("[thresholds.ofensive]\nreview = 0.5\nblock = 0.9\n")
    result = run("policy", "set", "acme", str(typo))
    assert result.exit_code == 2
    line = one_line(result)
    assert "no stage scores ofensive" in line and "offensive" in line and "--allow-unknown-category" in line
    # with the flag it gets past the check to the broker, which is down here: that is the one line
    forced = run("policy", "set", "acme", str(typo), "--allow-unknown-category")
    assert forced.exit_code == 2 and one_line(forced).startswith("no broker at")


def test_a_policy_with_no_threshold_for_any_text_category_is_refused(no_broker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """What deploy/k8s/configmap.yaml once held: known categories, none of them scored by the text stage."""
    stale = tmp_path / "stale.toml"
    stale.write_text("[thresholds.profanity]\nreview = 0.5\nblock = 0.9\n[thresholds.sexual]\nreview = 0.45\nblock = 0.7\n")
    result = run("policy", "set", "acme", str(stale))
    assert result.exit_code == 2
    line = one_line(result)
    assert "no threshold for any category of the ocr and text stages" in line and "--allow-unknown-category" in line


def test_policy_categories_splits_unknown_from_unflagged() -> None:
    from rtaudit.engine.policy import Threshold, TenantPolicy
    from rtaudit.cli.control_view import KNOWN_CATEGORIES, policy_categories

    policy = TenantPolicy(thresholds={"hate": Threshold(review=0.5, block=0.8), "toxic": Threshold(review=0.5, block=0.9)})
    unknown, unflagged = policy_categories(policy)
    assert unknown == ["toxic"] and "hate" not in unflagged and set(unflagged) == set(KNOWN_CATEGORIES) - {"hate"}
    assert policy_categories(TenantPolicy()) == ([], [])
