"""``rtaudit control ...``: rollouts, tenant policies and priorities on ``audit.control``, and the fleet's status.

Every publishing command reads the topic, builds the next version of its subject and publishes it
by compare-and-swap (:func:`rtaudit.workers.control.publish`): ``--expect-version N`` says which version
the operator saw; when another writer moved the subject on, the command prints one line with the
version in force and exits 1. Bad input (an unknown tenant format, a weight outside ``[0, 100]``, a
candidate not in the store, bad settings) and an unreachable broker exit 2 with one line on stderr,
before anything is published. What the tables show is built in :mod:`rtaudit.cli.control_view`.
"""

from __future__ import annotations

import getpass
import socket
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rtaudit.engine.policy import uncovered_stage_message, uncovered_stages, unknown_category_message
from rtaudit.cli import control_view as view
from rtaudit.cli.common import fail, settings_or_exit
from rtaudit.cli.drift_view import drift_table
from rtaudit.workers.settings import Settings

control_app = typer.Typer(help="Rollouts, tenant policies and priorities on audit.control; the fleet's status.",
                          no_args_is_help=True)
rollout_app = typer.Typer(help="Canary rollouts of a stage's model: start, promote, rollback, abort.", no_args_is_help=True)
policy_app = typer.Typer(help="A tenant's whole policy (thresholds, fail mode, SLO, lane, quota).", no_args_is_help=True)
priority_app = typer.Typer(help="A tenant's temporary lane / SLO / quota override.", no_args_is_help=True)
control_app.add_typer(rollout_app, name="rollout")
control_app.add_typer(policy_app, name="policy")
control_app.add_typer(priority_app, name="priority")
console = Console(width=max(160, Console().width))

ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="settings file (default: $RTAUDIT_CONFIG or ./rtaudit.toml)")]
ExpectOpt = Annotated[Optional[int], typer.Option("--expect-version", min=0, help="the subject's version you saw in force "
                                                  "(compare-and-swap; 0: none); default: whatever is in force")]
AuthorOpt = Annotated[Optional[str], typer.Option("--author", help="recorded with the change (default: user@host)")]
ReasonOpt = Annotated[Optional[str], typer.Option("--reason", help="why, for `rtaudit control history`")]
#: how ``policy set`` forces a policy past the category checks (a settings file: ``allow_unknown_category``).
ALLOW_UNKNOWN_FLAG = "pass --allow-unknown-category"
StageArg = Annotated[str, typer.Argument(help="text | image | ocr")]
TenantArg = Annotated[str, typer.Argument(help="tenant id ([A-Za-z0-9._-], up to 64 characters)")]


def _connect(config: Path | None, topics: tuple[str, ...] = ()) -> Settings:
    """Settings, and a broker that answers with the control topic (else exit 2 with the fix)."""
    from rtaudit.topics.catalog import CONTROL
    from rtaudit.workers.kafka import ClusterError, check_cluster

    s = settings_or_exit(config)
    try:
        check_cluster(s, [CONTROL, *topics])
    except ClusterError as exc:
        raise fail(str(exc)) from None
    return s


def _subject(kind: str, name: str) -> str:
    from rtaudit.schemas.control import subject_kind

    subject = f"{kind}:{name}"
    try:
        subject_kind(subject)
    except ValueError as exc:
        raise fail(str(exc)) from None
    return subject


def _state(s: Settings):
    from rtaudit.workers.control import read_state

    try:
        return read_state(s)
    except TimeoutError as exc:
        raise fail(str(exc)) from None


def _conflict_line(exc: Any) -> str:
    text = f"rejected ({exc.code}): {exc}"
    return text if "in force" in str(exc) else f"{text}; version {exc.in_force} is in force"


def _check_expected(subject: str, expect: int | None, in_force: int) -> None:
    if expect is not None and expect != in_force:
        raise fail(f"rejected (cas_conflict): you expected {subject} version {expect}, but version {in_force} "
                    "is in force: `rtaudit control status` shows it", 1)


def _publish(s: Settings, subject: str, payload: Any, *, expects: int | None, author: str | None,
             reason: str | None) -> None:
    """Publish by compare-and-swap and print the accepted version (exit 1 on a conflict, 2 on a timeout)."""
    from rtaudit.workers.control import ControlConflict, publish

    try:
        msg = publish(s, subject, payload, author=author or f"{getpass.getuser()}@{socket.gethostname()}",
                      reason=reason, expects=expects)
    except ControlConflict as exc:
        raise fail(_conflict_line(exc), 1) from None
    except TimeoutError as exc:
        raise fail(str(exc)) from None
    console.print(f"{subject} version {msg.version} accepted (replaces {msg.expects or 'nothing'}): "
                  f"{view.summary(msg, msg.at_ms)}", markup=False, highlight=False)


def _tombstone(s: Settings, subject: str, expects: int | None) -> None:
    """Produce a null value for ``subject`` on partition 0 (unconditional by design; ``expects`` is checked before)."""
    from rtaudit.topics.catalog import CONTROL
    from rtaudit.workers.kafka import producer_config
    from rtaudit.workers.producer import RecoveringProducer

    state = _state(s)
    in_force = state.version(subject)
    _check_expected(subject, expects, in_force)
    if in_force == 0 and subject not in state.versions:
        console.print(f"{subject} has never been set: nothing to clear", highlight=False)
        return
    producer = RecoveringProducer(producer_config(s), name="control-cli")
    offsets: list[int] = []
    producer.produce(CONTROL, value=None, key=subject.encode(), partition=0,
                     on_delivery=lambda err, m: offsets.append(-1 if err else (m.offset() or 0)))
    if producer.flush(10) != 0 or not offsets or offsets[0] < 0:
        raise fail(f"the {subject} tombstone was not acknowledged: is the broker at {s.bootstrap} up?")
    console.print(f"{subject} cleared at offset {offsets[0]} (version {in_force} was in force): "
                  "its rtaudit.toml value applies again", highlight=False)


# ---------------------------------------------------------------------------------------- rollouts

@rollout_app.command("start")
def rollout_start(
    stage: StageArg,
    candidate: Annotated[str, typer.Option("--candidate", help="the candidate's version name in the store (`rtaudit model list`)")],
    store: Annotated[Optional[Path], typer.Option("--store", help="model store directory (default: <state_dir>/models)")] = None,
    weight: Annotated[float, typer.Option("--weight", min=0.0, max=100.0, help="first step, % of requests (0: no traffic, load and verify only)")] = 5.0,
    shadow: Annotated[bool, typer.Option("--shadow", help="score the slice with both versions, count only the stable one")] = False,
    p99_margin_ms: Annotated[Optional[float], typer.Option("--p99-margin-ms", help="roll back when the candidate's P99 exceeds stable's by this [200]")] = None,
    max_disagreement: Annotated[Optional[float], typer.Option("--max-disagreement", help="roll back above this share of changed decisions in shadow [0.001]")] = None,
    max_error_rate: Annotated[Optional[float], typer.Option("--max-error-rate", help="roll back above this share of failed items [0.01]")] = None,
    min_items: Annotated[Optional[int], typer.Option("--min-items", help="items before latency or disagreement may trigger [200]")] = None,
    promote_after_items: Annotated[Optional[int], typer.Option("--promote-after-items", help="next step after this many candidate items [2000]")] = None,
    promote_after_s: Annotated[Optional[float], typer.Option("--promote-after-s", help="...or after this many seconds at a step (0: never) [300]")] = None,
    expect_version: ExpectOpt = None, author: AuthorOpt = None, reason: ReasonOpt = None, config: ConfigOpt = None,
) -> None:
    """Start a canary of CANDIDATE (a bundle in the model store) against the version in force.

    Publishes rollout:STAGE at --weight % (phase precheck at 0-5 %). Workers load, verify, warm and
    golden-check it, then serve it to their slice; they promote it or roll it back by themselves."""
    from pydantic import ValidationError

    from rtaudit.engine.bundle import BundleError
    from rtaudit.engine.bundle_store import ModelStore
    from rtaudit.engine.rollout import phase_for
    from rtaudit.schemas.control import CanaryTriggers, RolloutPayload

    subject = _subject("rollout", stage)
    given = {"p99_margin_ms": p99_margin_ms, "max_disagreement": max_disagreement, "max_error_rate": max_error_rate,
             "min_items": min_items, "promote_after_items": promote_after_items, "promote_after_s": promote_after_s}
    try:
        triggers = CanaryTriggers(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        raise fail(f"bad trigger: {view.one_line(exc)}") from None
    s = settings_or_exit(config)
    st = ModelStore(store if store is not None else Path(s.state_dir) / "models")
    try:
        ref = view.find_bundle(st.list(stage), stage, candidate)
        st.get(ref)
    except (LookupError, BundleError) as exc:
        raise fail(f"{exc} (store {st.root})") from None
    try:
        payload = RolloutPayload(candidate=ref, weight_pct=weight, phase=phase_for(weight), shadow=shadow, triggers=triggers)
    except ValidationError as exc:
        raise fail(f"bad rollout: {view.one_line(exc)}") from None
    s = _connect(config)
    state = _state(s)
    current, model = state.rollout(stage), state.model(stage)
    if current is not None and current.active:
        raise fail(f"{subject} version {state.version(subject)} is active ({view.summary(state.messages[subject], 0)}): "
                    "promote, roll it back or abort it first", 1)
    if model is not None and model.bundle.sha256 == ref.sha256:
        raise fail(f"{candidate} is already model:{stage} (version {state.version('model:' + stage)})", 1)
    payload = payload.model_copy(update={"stable": model.bundle if model is not None else None})
    _publish(s, subject, payload, expects=expect_version, author=author, reason=f"start {candidate}: {reason or 'by operator'}")


def _rollout_change(stage: str, config: Path | None, expect_version: int | None, author: str | None,
                    reason: str | None, plan: Any) -> None:
    """Publish ``plan(rollout in force)``'s records; ``rollout:<stage>`` by compare-and-swap on the version read."""
    subject = _subject("rollout", stage)
    s = _connect(config)
    state = _state(s)
    in_force = state.version(subject)
    _check_expected(subject, expect_version, in_force)
    try:
        steps = plan(state.rollout(stage))
    except ValueError as exc:
        raise fail(str(exc)) from None
    for subj, payload, why in steps:  # at 100 %: model:<stage> first, then the rollout as promoted
        _publish(s, subj, payload, expects=in_force if subj == subject else None, author=author,
                 reason=f"{why}: {reason or 'by operator'}")


@rollout_app.command("promote")
def rollout_promote(stage: StageArg, expect_version: ExpectOpt = None, author: AuthorOpt = None,
                    reason: ReasonOpt = None, config: ConfigOpt = None) -> None:
    """Move the active rollout one step: 5 → 50 → 100 %, then model:STAGE = the candidate."""
    _rollout_change(stage, config, expect_version, author, reason, lambda r: view.promote_plan(stage, r))


@rollout_app.command("rollback")
def rollout_rollback(stage: StageArg, expect_version: ExpectOpt = None, author: AuthorOpt = None,
                     reason: ReasonOpt = None, config: ConfigOpt = None) -> None:
    """Give the candidate 0 % at once (phase rolled_back): every request goes to the stable version."""
    _rollout_change(stage, config, expect_version, author, reason,
                    lambda r: [(f"rollout:{stage}", view.stop_payload(stage, r, "rolled_back"), "rollback")])


@rollout_app.command("abort")
def rollout_abort(stage: StageArg, expect_version: ExpectOpt = None, author: AuthorOpt = None,
                  reason: ReasonOpt = None, config: ConfigOpt = None) -> None:
    """End the active rollout without a verdict on the candidate (phase aborted, 0 %)."""
    _rollout_change(stage, config, expect_version, author, reason,
                    lambda r: [(f"rollout:{stage}", view.stop_payload(stage, r, "aborted"), "abort")])


# ---------------------------------------------------------------------------------------- policies

@policy_app.command("set")
def policy_set(tenant: TenantArg,
               file: Annotated[Path, typer.Argument(help="TOML (.toml) or JSON file of TenantPolicy fields (engine/policy.py)")],
               expect_version: ExpectOpt = None, author: AuthorOpt = None, reason: ReasonOpt = None,
               allow_unknown_category: Annotated[bool, typer.Option(
                   "--allow-unknown-category", help="publish thresholds of categories no stage of this fleet scores, or a "
                                                   "policy with no threshold for any category of a stage")] = False,
               config: ConfigOpt = None) -> None:
    """Replace TENANT's whole policy (fields the file omits take TenantPolicy's defaults, not rtaudit.toml's).

    A threshold for a category no stage scores is refused (a misspelt category never flags, and
    its policy would flag nothing), and so is a policy with no threshold for any category of a
    stage (every text, or every image, would be allowed); categories the file leaves out are
    named: they never flag."""
    from rtaudit.schemas.control import PolicyPayload

    subject = _subject("policy", tenant)
    try:
        payload = PolicyPayload(policy=view.read_policy(file))
    except ValueError as exc:
        raise fail(str(exc)) from None
    unknown, unflagged = view.policy_categories(payload.policy)
    if unknown and not allow_unknown_category:
        raise fail(unknown_category_message(str(file), unknown, ALLOW_UNKNOWN_FLAG))
    stages = settings_or_exit(config).scored_categories()
    uncovered = uncovered_stages(payload.policy, stages)
    if uncovered and not allow_unknown_category:
        raise fail(uncovered_stage_message(str(file), uncovered, stages, ALLOW_UNKNOWN_FLAG))
    settings = _connect(config)  # the broker first: when it is down, that is the one line
    if unflagged:
        console.print(f"note: this policy has no threshold for {', '.join(unflagged)}: those categories never flag "
                      f"for {tenant}", highlight=False, markup=False)
    _publish(settings, subject, payload, expects=expect_version, author=author, reason=reason)


@policy_app.command("clear")
def policy_clear(tenant: TenantArg, expect_version: ExpectOpt = None, config: ConfigOpt = None) -> None:
    """Tombstone policy:TENANT: the tenant's rtaudit.toml policy applies again."""
    subject = _subject("policy", tenant)
    _tombstone(_connect(config), subject, expect_version)


@priority_app.command("set")
def priority_set(
    tenant: TenantArg,
    lane: Annotated[Optional[str], typer.Option("--lane", help="hi | lo")] = None,
    slo_ms: Annotated[Optional[int], typer.Option("--slo-ms", help="end-to-end budget, ms")] = None,
    quota: Annotated[Optional[float], typer.Option("--quota", help="requests per second (0: no quota)")] = None,
    until: Annotated[Optional[str], typer.Option("--until", help="expiry: ISO 8601 (2026-05-01T14:00Z; no offset: "
                                                 "local time) or a delay (+10m, +90s, +1h30m, +2d)")] = None,
    expect_version: ExpectOpt = None, author: AuthorOpt = None, reason: ReasonOpt = None, config: ConfigOpt = None,
) -> None:
    """Override TENANT's lane, SLO and/or quota until --until (or until replaced or cleared)."""
    from pydantic import ValidationError

    from rtaudit.engine.clock import now_ms
    from rtaudit.engine.policy import QuotaPolicy
    from rtaudit.schemas.control import PriorityPayload

    subject = _subject("priority", tenant)
    if lane is None and slo_ms is None and quota is None:
        raise fail("give at least one of --lane, --slo-ms, --quota")
    now = now_ms()
    try:
        until_ms = view.parse_time(until, now) if until is not None else None
    except ValueError as exc:
        raise fail(f"--until: {exc}") from None
    if until_ms is not None and until_ms <= now:
        raise fail(f"--until {until} is {view.age(until_ms, now)} in the past")
    try:
        payload = PriorityPayload(lane=lane, slo_ms=slo_ms, until_ms=until_ms,
                                  quota=QuotaPolicy(rate_per_s=quota) if quota is not None else None)
    except ValidationError as exc:
        raise fail(f"bad priority: {view.one_line(exc)}") from None
    _publish(_connect(config), subject, payload, expects=expect_version, author=author, reason=reason)


@priority_app.command("clear")
def priority_clear(tenant: TenantArg, expect_version: ExpectOpt = None, config: ConfigOpt = None) -> None:
    """Tombstone priority:TENANT: the tenant's policy decides its lane, SLO and quota again."""
    subject = _subject("priority", tenant)
    _tombstone(_connect(config), subject, expect_version)


# ---------------------------------------------------------------------------------------- reading

class _Tail:
    """Partition 0 of ``topic`` from its first offset, with an assigned consumer (no group joined)."""

    def __init__(self, s: Settings, topic: str) -> None:
        import uuid

        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        from rtaudit.workers.kafka import consumer_config

        from rtaudit.workers.offsets import OffsetGapGuard

        self.topic, self.next = topic, 0
        self.consumer = Consumer(consumer_config(s, f"rtaudit-control-cli-{uuid.uuid4().hex[:12]}"))
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self.gaps = OffsetGapGuard(self.consumer, "control-cli")  # records a fetch skipped are read again

    def drain(self, timeout_s: float = 10.0) -> list[Any]:
        """The records up to the high watermark (as seen while fetching). Raises ``TimeoutError``."""
        from confluent_kafka import TopicPartition

        from rtaudit.workers.runtime.intake import consume_batch

        out, deadline = [], time.monotonic() + timeout_s
        while True:
            for m in consume_batch(self.consumer, 500, 0.2, self.gaps):
                if m.error() is None:
                    out.append(m)
                    self.next = (m.offset() or 0) + 1
            _, high = self.consumer.get_watermark_offsets(TopicPartition(self.topic, 0), cached=True)
            if high >= 0 and self.next >= high:
                return out
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {self.topic} to its end within {timeout_s} s")

    def close(self) -> None:
        self.consumer.close()


class _Fleet:
    """The control state and every worker's latest heartbeat, kept current by :meth:`refresh`."""

    def __init__(self, s: Settings) -> None:
        from rtaudit.engine.control import ControlState
        from rtaudit.topics.catalog import CONTROL, STATUS

        self.control, self.status = _Tail(s, CONTROL), _Tail(s, STATUS)
        self.state, self.beats = ControlState(), {}  # type: ignore[var-annotated]  # both fields are typed on the class

    def refresh(self) -> None:
        from rtaudit.schemas.control import Heartbeat

        for m in self.control.drain():
            self.state.apply(m.offset(), m.key(), m.value())
        for m in self.status.drain():
            try:
                b = Heartbeat.model_validate_json(m.value() or b"")
            except ValueError:
                continue
            if b.worker_id not in self.beats or b.at_ms >= self.beats[b.worker_id].at_ms:
                self.beats[b.worker_id] = b

    def tables(self, now_ms: int) -> list[Table]:
        live = view.live_heartbeats(self.beats.values(), now_ms)
        fleet = view.fleet_table(live, self.state, now_ms)
        subjects = Table("subject", "version", "author", "age", "summary", title="in force on audit.control")
        for cells in view.subject_rows(self.state, now_ms):
            subjects.add_row(*map(escape, cells))
        return [fleet, subjects, drift_table(live.values())]

    def close(self) -> None:
        self.control.close()
        self.status.close()


@control_app.command("status")
def status(
    watch: Annotated[bool, typer.Option("--watch", "-w", help="redraw every 2 s until Ctrl-C")] = False,
    config: ConfigOpt = None,
) -> None:
    """The fleet's workers (from their heartbeats) and the subjects in force.

    Heartbeats come from audit.status, one every 2 s; a worker silent for 5 s is stale (health "stale",
    flagged: killed or hung?), for 30 s gone. A worker that still serves another mix of versions than the
    one in force 10 s after it changed is flagged too (red row)."""
    from rich.console import Group
    from rich.live import Live

    from rtaudit.engine.clock import now_ms
    from rtaudit.topics.catalog import STATUS

    s = _connect(config, (STATUS,))
    fleet = _Fleet(s)
    try:
        fleet.refresh()
        if not watch:
            for table in fleet.tables(now_ms()):
                console.print(table)
            return
        with Live(Group(*fleet.tables(now_ms())), console=console, refresh_per_second=2) as live:
            while True:
                time.sleep(2.0)
                fleet.refresh()
                live.update(Group(*fleet.tables(now_ms())))
    except KeyboardInterrupt:
        pass
    except TimeoutError as exc:
        raise fail(str(exc)) from None
    finally:
        fleet.close()


@control_app.command("history")
def history(
    subject: Annotated[Optional[str], typer.Option("--subject", help="only this subject, e.g. rollout:text")] = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="the last N records (0: all)")] = 0,
    config: ConfigOpt = None,
) -> None:
    """Every record of audit.control in order, and whether it was accepted (re-applied from offset 0)."""
    from rtaudit.topics.catalog import CONTROL

    if subject is not None:
        kind, _, name = subject.partition(":")
        _subject(kind, name)
    s = _connect(config)
    tail = _Tail(s, CONTROL)
    try:
        records = [(m.offset(), m.timestamp()[1] if m.timestamp()[0] else None, m.key(), m.value()) for m in tail.drain()]
    except TimeoutError as exc:
        raise fail(str(exc)) from None
    finally:
        tail.close()
    table = Table("offset", "time (UTC)", "subject", "version", "expects", "author", "reason", "result",
                  title=f"{CONTROL}: {len(records)} records" + (f", {subject} only" if subject else ""))
    for row in view.history_rows(records, subject, limit):
        table.add_row(*map(escape, row.cells()), style=None if row.accepted else "red")
    console.print(table)
