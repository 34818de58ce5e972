"""`rtaudit control ...` against a real embedded broker: a rollout started from the model store and
promoted 5 → 50 → 100 %, compare-and-swap conflicts (exit 1, the version in force shown), a
priority, a policy and its tombstone, then `status` (a live heartbeat, a flagged worker) and
`history` (accepted and rejected records)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from rich.console import Console
from typer.testing import CliRunner

from rtaudit.engine.bundle import package
from rtaudit.engine.bundle_store import ModelStore
from rtaudit.engine.clock import now_ms
from rtaudit.engine.control import encode
from rtaudit.schemas.control import ControlMessage, ModelPayload, ServingStatus
from rtaudit.topics.catalog import CONTROL
from rtaudit.cli import control as cli_control
from rtaudit.cli.main import app
from rtaudit.workers.control import ControlPlane, read_state
from rtaudit.workers.kafka import producer_config
from rtaudit.workers.settings import Settings

pytestmark = pytest.mark.integration


def cli(*args: str):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, ["control", *args])
    assert "Traceback" not in result.output, result.output
    return result


def rows(output: str) -> list[list[str]]:
    """The cells of a table's data rows (lines that start with an offset)."""
    return [[c.strip() for c in line.strip("│ ").split("│")] for line in output.splitlines() if re.match(r"^│ +\d+ +│", line)]


def test_rollout_priority_policy_then_status_and_history(broker_settings: Settings, monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    s = broker_settings
    monkeypatch.chdir(tmp_path)
    for name in ("RTAUDIT_CONFIG", "KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", str(s.embedded_port))
    monkeypatch.setenv("RTAUDIT_STATE_DIR", str(s.state_dir))
    monkeypatch.setattr(cli_control, "console", Console(width=400))  # no wrapped cells
    store = ModelStore(Path(s.state_dir) / "models")
    v1, v2 = (store.put(package("text", v, {}, [], tmp_path / v, "null")) for v in ("v1", "v2"))

    # model:text v1, published a minute ago (raw, to date it); a worker that still serves v0
    old = ControlMessage(subject="model:text", version=1, expects=0, author="itest", at_ms=now_ms() - 60_000,
                         payload=ModelPayload(bundle=v1))
    producer = Producer(producer_config(s))
    producer.produce(CONTROL, *reversed(encode(old)), partition=0)  # value, key
    producer.flush(10)
    plane = ControlPlane(s, "text", heartbeat_s=0.5, status=lambda: {
        "serving": [ServingStatus(stage="text", loaded=["v0"], weights={"v0": 100.0})], "lag": 3}).start()
    try:
        assert plane.wait_caught_up(15)
        time.sleep(1.0)  # a heartbeat or two
        status = cli("status")
        assert status.exit_code == 0, status.output
        row = next(line for line in status.output.splitlines() if plane.worker_id in line)
        assert re.search(r"text v0: 100 % .* text: serves v0: 100 %, in force v1: 100 % since (6\d|[7-9]\d) s", row), status.output
        assert "model:text" in status.output and "itest" in status.output

        started = cli("rollout", "start", "text", "--candidate", "v2", "--promote-after-s", "0", "--reason", "new head")
        assert started.exit_code == 0, started.output
        assert "rollout:text version 1 accepted (replaces nothing): v1 → v2 at 5 %, precheck" in started.output
        again = cli("rollout", "start", "text", "--candidate", "v2")
        assert again.exit_code == 1 and "is active" in again.output
        stale = cli("rollout", "promote", "text", "--expect-version", "7")
        assert stale.exit_code == 1 and "version 1 is in force" in stale.output
        for weight in ("50 %, rollout", "100 %, full"):
            step = cli("rollout", "promote", "text", "--expect-version", str(read_state(s).version("rollout:text")))
            assert step.exit_code == 0 and weight in step.output, step.output
        done = cli("rollout", "promote", "text")
        assert done.exit_code == 0, done.output
        assert "model:text version 2 accepted (replaces 1): v2" in done.output
        assert "rollout:text version 4 accepted (replaces 3): v2 promoted (replaced v1; now model:text)" in done.output
        state = read_state(s)
        assert state.model("text").bundle == v2 and state.rollout("text").phase == "promoted"  # type: ignore[union-attr]
        assert cli("rollout", "rollback", "text").exit_code == 2  # nothing active any more

        prio = cli("priority", "set", "acme", "--lane", "hi", "--until", "+10m")
        assert prio.exit_code == 0 and "priority:acme version 1 accepted" in prio.output, prio.output
        conflict = cli("priority", "set", "acme", "--slo-ms", "500", "--expect-version", "0")
        assert conflict.exit_code == 1
        assert "rejected (cas_conflict)" in conflict.output and "version 1 is in force" in conflict.output
        (tmp_path / "acme.toml").write_text('on_incomplete = "block"\nslo_ms = 3000\n')
        assert cli("policy", "set", "acme", "acme.toml").exit_code == 0
        cleared = cli("policy", "clear", "acme", "--expect-version", "1")
        assert cleared.exit_code == 0 and "policy:acme cleared" in cleared.output, cleared.output
        assert read_state(s).version("policy:acme") == 0

        producer.produce(CONTROL, *reversed(encode(old)), partition=0)  # a replay: stale
        producer.flush(10)
        history = cli("history")
        assert history.exit_code == 0, history.output
        lines = history.output.splitlines()
        for text in ("start v2: new head", "step to 50 %: by operator", "promoted v2", "accepted: tombstone"):
            assert any(text in line for line in lines), (text, history.output)
        assert len(rows(history.output)) == 10  # 9 accepted (2 model, 4 rollout, priority, policy, tombstone) + the replay
        model_only = rows(cli("history", "--subject", "model:text").output)
        assert [r[0] for r in model_only] == ["0", "4", "9"], model_only
        assert model_only[0][-1] == "accepted" and model_only[2][-1].startswith("rejected: stale")
        assert [r[0] for r in rows(cli("history", "--limit", "2").output)] == ["8", "9"]

        status = cli("status")
        assert status.exit_code == 0 and "v2 promoted (replaced v1; now model:text)" in status.output
        assert "priority:acme" in status.output and "policy:acme" not in status.output  # cleared
    finally:
        plane.stop()
