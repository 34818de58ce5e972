"""Settings that cannot silently allow: a category no stage scores and a tenant whose thresholds
cover none of a stage's categories are refused (like ``rtaudit control policy set``); explicit
arguments beat the environment, which beats the settings file."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtaudit.engine.policy import IMAGE_CATEGORIES, LEXICAL_CATEGORIES, TEXT_CATEGORIES, unknown_category_message
from rtaudit.workers.settings import Settings, SettingsError, load_settings

REPO = Path(__file__).resolve().parents[2]

TYPO = "[tenants.acme.thresholds]\nofensive = { review = 0.5, block = 0.9 }\nsexual = { review = 0.45, block = 0.7 }\n"
#: what deploy/k8s/configmap.yaml held: no threshold for any text category
TEXT_UNCOVERED = "[default.thresholds]\nprofanity = { review = 0.5, block = 0.9 }\nsexual = { review = 0.45, block = 0.7 }\n"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("RTAUDIT_CONFIG", "KAFKA_BOOTSTRAP_SERVERS", "RTAUDIT_BOOTSTRAP_SERVERS", "RTAUDIT_EMBEDDED_PORT",
                 "RTAUDIT_PARTITIONS", "RTAUDIT_ALLOW_UNKNOWN_CATEGORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rtaudit.toml"
    path.write_text(text)
    return path


def test_a_misspelt_category_in_the_settings_file_is_refused_with_the_policy_set_message(tmp_path: Path) -> None:
    path = write(tmp_path, TYPO)
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    msg = str(info.value)
    assert f"tenants.acme.thresholds (from {path})" in msg
    # the same sentence `policy set` prints, with the settings file's escape hatch
    assert unknown_category_message("X", ["ofensive"], "Y").split(": ", 1)[1].removesuffix("Y") in msg
    assert "allow_unknown_category = true" in msg and "RTAUDIT_ALLOW_UNKNOWN_CATEGORY=1" in msg


def test_a_misspelt_category_set_by_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RTAUDIT_DEFAULT__THRESHOLDS__OFENSIVE__REVIEW", "0.5")
    monkeypatch.setenv("RTAUDIT_DEFAULT__THRESHOLDS__OFENSIVE__BLOCK", "0.9")
    with pytest.raises(SettingsError, match="default.thresholds .*no stage scores ofensive"):
        load_settings(REPO / "rtaudit.toml")


def test_the_escape_hatch_lets_an_unknown_category_through(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert "ofensive" in load_settings(write(tmp_path, "allow_unknown_category = true\n" + TYPO)).tenants["acme"].thresholds
    monkeypatch.setenv("RTAUDIT_ALLOW_UNKNOWN_CATEGORY", "1")
    assert "ofensive" in load_settings(write(tmp_path, TYPO)).tenants["acme"].thresholds


def test_a_tenant_covering_none_of_the_text_categories_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as info:
        load_settings(write(tmp_path, TEXT_UNCOVERED))
    msg = str(info.value)
    assert "default.thresholds" in msg and "no threshold for any category of the ocr and text stages" in msg
    assert "offensive, hate" in msg and "allow_unknown_category" in msg


def test_a_tenant_covering_no_image_category_is_refused(tmp_path: Path) -> None:
    text_only = "[tenants.t.thresholds]\nhate = { review = 0.5, block = 0.8 }\n"
    with pytest.raises(SettingsError, match=r"tenants\.t\.thresholds .*the image stage \(image scores sexual, suggestive\)"):
        load_settings(write(tmp_path, text_only))


def test_the_text_stage_categories_follow_the_text_model(tmp_path: Path) -> None:
    """The lexical text model scores ``offensive`` alone: ``hate`` does not cover its text stage."""
    hate_only = "[default.thresholds]\nhate = { review = 0.5, block = 0.8 }\nsexual = { review = 0.45, block = 0.7 }\n"
    assert load_settings(write(tmp_path, hate_only)).text_model == "minilm"
    with pytest.raises(SettingsError, match=r"the text stage \(text scores offensive\)"):
        load_settings(write(tmp_path, 'text_model = "lexical"\n' + hate_only))


def test_the_repository_defaults_and_settings_file_pass() -> None:
    assert Settings().default.thresholds
    acme = load_settings(REPO / "rtaudit.toml").tenants["acme"]
    assert acme.decide({"offensive": 0.85}, complete=True) == "block"


def test_the_stage_categories_agree_with_the_models() -> None:
    from rtaudit.engine.models.lexical import REPORTED_AS
    from rtaudit.engine.models.null import NULL_SCORES
    from rtaudit.engine.models.nudity import CATEGORIES as NUDITY
    from rtaudit.modelbuild.text.data import CATEGORIES as TEXT

    assert (TEXT_CATEGORIES, IMAGE_CATEGORIES, LEXICAL_CATEGORIES) == (TEXT, NUDITY, (REPORTED_AS,))
    assert tuple(NULL_SCORES) == TEXT_CATEGORIES


# ------------------------------------------------------------------------------------------ precedence

def test_explicit_arguments_beat_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``export RTAUDIT_EMBEDDED_PORT=24117`` (the README's shell tip) no longer moves a test's broker."""
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", "24117")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "env-kafka:9092")
    s = Settings(embedded_port=30001, bootstrap_servers="arg-kafka:9092")
    assert (s.embedded_port, s.bootstrap_servers) == (30001, "arg-kafka:9092")
    assert (Settings().embedded_port, Settings().bootstrap_servers) == (24117, "env-kafka:9092")


def test_the_environment_beats_the_settings_file_and_explicit_overrides_beat_both(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = write(tmp_path, "embedded_port = 30002\npartitions = 6\n[tenants.acme]\nslo_ms = 2000\nlane = \"hi\"\n")
    monkeypatch.setenv("RTAUDIT_EMBEDDED_PORT", "24117")
    monkeypatch.setenv("RTAUDIT_TENANTS__ACME__SLO_MS", "3000")
    s = load_settings(path)
    assert (s.embedded_port, s.partitions) == (24117, 6)
    # tables merge key by key: the environment's slo_ms, the file's lane
    assert (s.tenants["acme"].slo_ms, s.tenants["acme"].lane) == (3000, "hi")
    assert load_settings(path, embedded_port=30003).embedded_port == 30003
    monkeypatch.delenv("RTAUDIT_EMBEDDED_PORT")
    assert load_settings(path).embedded_port == 30002
    assert Settings().embedded_port == 19092  # code default: no file read without load_settings


def test_a_bad_value_still_names_the_variable_it_came_from(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = write(tmp_path, "partitions = 4\n")
    monkeypatch.setenv("RTAUDIT_PARTITIONS", "0")
    with pytest.raises(SettingsError, match=r"partitions \(from environment variable RTAUDIT_PARTITIONS='0'\)"):
        load_settings(path)
