"""Settings errors say where a bad value came from; typos in RTAUDIT_* names are caught;
rtaudit.toml lists every key."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel

from rtaudit.workers.settings import Settings, SettingsError, check_environment, load_settings

REPO = Path(__file__).resolve().parents[2]
TOML = REPO / "rtaudit.toml"


def test_a_bad_environment_value_is_reported_against_its_variable(monkeypatch):
    monkeypatch.setenv("RTAUDIT_PARTITIONS", "abc")
    with pytest.raises(SettingsError) as info:
        load_settings(TOML)
    msg = str(info.value)
    assert "environment variable RTAUDIT_PARTITIONS='abc'" in msg
    assert "rtaudit.toml" not in msg


@pytest.mark.parametrize("port", ["0", "99999", "-1"])
def test_an_embedded_port_outside_1_65535_is_refused_before_any_broker_starts(monkeypatch, port):
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", port)
    with pytest.raises(SettingsError, match=rf"embedded_port \(from environment variable RTAUDIT_EMBEDDED_PORT='{port}'\)"):
        load_settings(TOML)


def test_a_misspelt_key_in_the_file_names_the_nearest_real_one(tmp_path):
    bad = tmp_path / "rtaudit.toml"
    bad.write_text('text_cascde = "off"\n[media]\nmax_byts = 5\n[batch]\nzzz = 1\n')
    with pytest.raises(SettingsError) as info:
        load_settings(bad)
    msg = str(info.value)
    assert f"text_cascde = 'off' (from {bad}): no such setting: did you mean text_cascade?" in msg
    assert f"media.max_byts = 5 (from {bad}): no such setting: did you mean media.max_bytes?" in msg
    assert f"batch.zzz = 1 (from {bad}): no such setting;" in msg or msg.endswith(f"batch.zzz = 1 (from {bad}): no such setting")


def test_a_bad_nested_environment_value_names_the_nested_variable(monkeypatch):
    monkeypatch.setenv("RTAUDIT_MEDIA__MAX_BYTES", "1")
    with pytest.raises(SettingsError, match=r"media\.max_bytes \(from environment variable RTAUDIT_MEDIA__MAX_BYTES='1'\)"):
        load_settings(TOML)


def test_a_bad_file_value_is_reported_against_the_file_with_the_value(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("partitions = 0\n")
    with pytest.raises(SettingsError, match=rf"partitions = 0 \(from {re.escape(str(bad))}\)"):
        load_settings(bad)


@pytest.mark.parametrize(("typo", "meant"), [
    ("RTAUDIT_PARTITONS", "RTAUDIT_PARTITIONS"),
    ("RTAUDIT_BATCH__PROFILES", "RTAUDIT_BATCH__PROFILE"),
    ("RTAUDIT_BOOTSTRAP_SERVER", "RTAUDIT_BOOTSTRAP_SERVERS"),
    ("RTAUDIT_SECURITY__SASL_PASWORD", "RTAUDIT_SECURITY__SASL_PASSWORD"),
])
def test_a_misspelt_environment_variable_is_an_error_naming_the_close_match(typo, meant):
    with pytest.raises(SettingsError, match=f"unknown environment variable {typo}: did you mean {meant}\\?"):
        check_environment({typo: "1"})


def test_misspelt_variable_fails_load_settings(monkeypatch):
    monkeypatch.setenv("RTAUDIT_PARTITONS", "8")
    with pytest.raises(SettingsError, match="did you mean RTAUDIT_PARTITIONS"):
        load_settings(TOML)


@pytest.mark.parametrize("name", [
    "RTAUDIT_PARTITIONS", "RTAUDIT_CONFIG", "RTAUDIT_CACHE", "RTAUDIT_BATCH__MAX_SIZE__TEXT",
    "RTAUDIT_TENANTS__ACME__SLO_MS", "RTAUDIT_DEFAULT__THRESHOLDS__HATE__BLOCK", "rtaudit_partitions",
    "RTAUDIT_SECURITY__SASL_PASSWORD_FILE", "KAFKA_BOOTSTRAP_SERVERS", "HOME",
])
def test_valid_and_foreign_variables_pass(name):
    check_environment({name: "1"})


def _keys_in(text: str) -> set[str]:
    """Dotted keys written in the TOML text, commented out or not (``# key = value`` counts)."""
    keys, table = set(), ""
    for line in text.splitlines():
        line = line.strip().removeprefix("#").strip()
        if m := re.fullmatch(r"\[([\w.]+)\]", line):
            table = m.group(1)
            keys.add(table)
        elif m := re.match(r"(\w+)\s*=", line):
            keys.add(f"{table}.{m.group(1)}" if table else m.group(1))
    return keys


def _fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    out = set()
    for name, field in model.model_fields.items():
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            out |= _fields(sub, f"{prefix}{name}.")
        else:
            out.add(f"{prefix}{name}")
    return out


def test_rtaudit_toml_lists_every_settings_key():
    keys = _keys_in(TOML.read_text())
    # tenants.<id> are examples of the [default] policy's keys
    missing = sorted(k for k in _fields(Settings) if k not in keys and not k.startswith("tenants"))
    assert not missing, f"rtaudit.toml claims to list every key but lacks {missing}"
    assert {"replication_factor", "state_dir", "inference_threads", "security.sasl_password_file"} <= keys


def test_rtaudit_toml_is_valid_and_loads():
    tomllib.loads(TOML.read_text())
    load_settings(TOML)


def test_every_rtaudit_variable_the_project_reads_passes_the_environment_check():
    """A variable that CI, the Makefile or the test harness reads (``RTAUDIT_CI_STEP_TIMEOUT_S``) must not be
    refused as a typo by the workers it starts: it once failed CI's install step when exported."""
    repo = Path(__file__).resolve().parents[2]
    texts = [(repo / p).read_text() for p in (".ci/run", "Makefile", "tests/conftest.py")]
    names = {m for t in texts for m in re.findall(r"RTAUDIT_[A-Z_]+[A-Z]", t)}
    assert "RTAUDIT_CI_STEP_TIMEOUT_S" in names
    check_environment({name: "1" for name in names})  # raises SettingsError on one it does not know
