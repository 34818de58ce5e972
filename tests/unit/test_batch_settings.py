"""Batching profiles and their overrides, as every worker reads them at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtaudit.workers.batch_settings import PROFILES
from rtaudit.workers.settings import Settings, SettingsError, load_settings

REPO = Path(__file__).resolve().parents[2]


def test_default_is_balanced_with_the_15_ms_window():
    s = Settings()
    assert s.batch.profile == "balanced"
    text = s.batch.config("text")
    assert (text.window_ms, text.max_size, text.lo_share) == (15.0, 64, 0.2)
    # lags are in batches of the stage's max size
    assert (text.lag_high, s.batch.config("ocr").lag_high) == (4 * 64, 4 * 2)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_gives_a_valid_config_per_stage(name):
    s = Settings(batch={"profile": name})
    for stage in ("text", "image", "ocr"):
        c = s.batch.config(stage)
        assert c.max_size == PROFILES[name].max_size[stage]
        assert 1 <= c.size_floor <= c.max_size and c.window_ms <= c.window_ceiling_ms


def test_profile_from_env_and_explicit_overrides_win(monkeypatch):
    monkeypatch.setenv("RTAUDIT_BATCH__PROFILE", "latency")
    monkeypatch.setenv("RTAUDIT_BATCH__WINDOW_MS", "5")
    monkeypatch.setenv("RTAUDIT_BATCH__MAX_SIZE", '{"text": 32}')
    s = load_settings(REPO / "rtaudit.toml")  # the file says "balanced": the environment wins
    text, image = s.batch.config("text"), s.batch.config("image")
    assert (text.window_ms, text.max_size) == (5.0, 32)
    assert image.max_size == PROFILES["latency"].max_size["image"]  # per-stage override keeps the others
    assert text.lo_share == PROFILES["latency"].lo_share


def test_override_below_the_profile_minimum_drags_it_down():
    c = Settings(batch={"profile": "throughput", "max_size": {"text": 8}}).batch.config("text")
    assert (c.max_size, c.min_size) == (8, 8)


def test_bad_values_are_named(monkeypatch, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[batch]\nprofile = "fastest"\n')
    with pytest.raises(SettingsError, match="fastest"):
        load_settings(bad)
    bad.write_text("[batch]\nmax_size = { text = 0 }\n")
    with pytest.raises(SettingsError, match="max_size must be >= 1"):
        load_settings(bad)


def test_inference_threads_leave_a_core_unless_set(monkeypatch):
    import rtaudit.workers.settings as settings_mod

    monkeypatch.setattr(settings_mod, "usable_cores", lambda: 8)
    assert Settings().model_threads() == 7
    monkeypatch.setattr(settings_mod, "usable_cores", lambda: 1)
    assert Settings().model_threads() == 1  # never 0: that would mean "onnxruntime decides" again
    monkeypatch.setenv("RTAUDIT_INFERENCE_THREADS", "3")
    assert load_settings().model_threads() == 3


@pytest.mark.parametrize("toml, message", [
    ("[batch]\nmax_size = { txt = 4 }\n", "stage 'txt', which has no batcher: did you mean 'text'"),
    ("[batch]\nmax_size = { text = 8 }\nmin_size = { text = 32 }\n", "batch.min_size.text = 32 is above batch.max_size.text = 8"),
    ("[batch]\nwindow_ms = 100\nmax_window_ms = 5\n", "batch.window_ms = 100 is above batch.max_window_ms = 5"),
    ("[av]\nmin_duration_s = 10\nmax_duration_s = 1\n", "av.min_duration_s = 10 is not below av.max_duration_s = 1"),
    ('[tenants."bad tenant!"]\nslo_ms = 500\n', "not a tenant id a request can carry"),
])
def test_settings_that_would_be_ignored_or_clamped_silently_are_refused(tmp_path, toml, message):
    """Found by a fresh user: each of these was accepted and then ignored, clamped, or refused every input."""
    path = tmp_path / "rtaudit.toml"
    path.write_text(toml)
    with pytest.raises(SettingsError, match=message):
        load_settings(path)


def test_one_explicit_window_still_follows_the_profile():
    """Only two explicit, contradictory values are refused: a max window below the profile's window still clamps."""
    assert Settings(batch={"max_window_ms": 5}).batch.config("text").window_ceiling_ms >= 5
    assert Settings(tenants={"acme.eu-1_x": {}}).tenants
