"""The fuzz harness's pure parts: accounting per kind, and the media leak search."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rtaudit.tools.fuzz.harness import Outcome, leaks, media_probes, summarize
from rtaudit.tools.fuzz.mutations import generate

ROOT = Path("/srv/fuzz-media")


def test_summary_counts_both_neither_and_missing_verdicts():
    cases = generate(5, 40, 1_700_000_000_000, ROOT, "h")
    outcomes = [Outcome() for _ in cases]
    for case, out in zip(cases, outcomes):
        if case.verdict_id is not None:
            out.verdict_ids[case.verdict_id] += 1
        out.dlq_codes.append("schema_violation")
    rows, total, failures = summarize(cases, outcomes)
    assert (total.sent, total.dlq, total.neither, total.verdict_missing) == (40, 40, 0, 0) and failures == []
    assert total.both == sum(c.verdict_id is not None for c in cases)
    # drop every answer of the first case with a readable id: it is a failure, of both kinds
    first = next(i for i, c in enumerate(cases) if c.verdict_id)
    outcomes[first] = Outcome()
    rows, total, failures = summarize(cases, outcomes)
    assert (total.neither, total.verdict_missing) == (1, 1)
    assert failures == [f"#{first} {cases[first].kind} ({cases[first].detail}): neither"]
    assert sum(r.sent for r in rows) == 40


def test_repeated_verdicts_are_counted_not_failed():
    cases = generate(5, 20, 1_700_000_000_000, ROOT, "h")
    outcomes = [Outcome(verdict_ids=Counter({c.verdict_id: 2})) if c.verdict_id else Outcome(dlq_codes=["x"]) for c in cases]
    _, total, failures = summarize(cases, outcomes)
    assert total.repeats == sum(c.verdict_id is not None for c in cases) and failures == []


def test_media_payloads_are_found_wherever_they_leak(tmp_path):
    cases = generate(9, 2000, 1_700_000_000_000, ROOT, "h")
    probes = media_probes(cases)
    assert probes and all(len(p) >= 16 for p in probes)
    payload = sorted(probes)[0]
    (tmp_path / "router-0.log").write_bytes(b"dlq role=router code=x: reason\n")
    (tmp_path / "text-0.log").write_bytes(b"oops " + payload + b"\n")
    assert leaks(probes, b'{"reasons": ["fine"]}', tmp_path) == {"text-0 log": 1}
    assert leaks(probes, b'{"reasons": ["' + payload + b'"]}', tmp_path) == {"verdicts": 1, "text-0 log": 1}


def test_the_fuzz_fleet_keeps_its_private_port_whatever_the_environment_says(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """RTAUDIT_EMBEDDED_PORT (exported for a user's own fleet) overrides a settings file; the fuzz
    run's port must win, or its requests land in that fleet (from a newcomer's run)."""
    from rtaudit.tools.fuzz.harness import private_settings, write_config

    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", "39417")
    config = write_config(tmp_path / "rtaudit.toml", 45123, tmp_path / "state", tmp_path, "null")
    assert private_settings(config, 45123).embedded_port == 45123


def test_a_private_fleet_ignores_an_exported_bootstrap_address(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from rtaudit.tools.fleet.local import Fleet
    from rtaudit.tools.fuzz.harness import private_settings, write_config

    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "users-cluster:9092")
    monkeypatch.setenv("rtaudit_bootstrap_servers", "users-cluster:9092")
    config = write_config(tmp_path / "rtaudit.toml", 45123, tmp_path / "state", tmp_path, "null")
    settings = private_settings(config, 45123)
    assert settings.bootstrap_servers is None and settings.bootstrap == "127.0.0.1:45123"
    env = Fleet(settings, config=config, roles=(), log_dir=tmp_path).worker_env(0)
    assert env["RTAUDIT_EMBEDDED_PORT"] == "45123"
    assert not [k for k in env if k.upper() in ("KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS")]
