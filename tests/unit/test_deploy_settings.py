"""What ships to a cluster decides like the repository: each rtaudit container of the Kubernetes
manifests and of docker-compose.yml, with its own environment and settings file, decides every
tenant's requests as the repository's ``rtaudit.toml`` does, on a grid of score vectors."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.deploy_files import REPO, Container, compose_containers, k8s_containers
from rtaudit.engine.policy import KNOWN_CATEGORIES
from rtaudit.workers.settings import Settings, load_settings

#: scores around every threshold the repository sets (0.4-1.0), and both ends
GRID = (0.0, 0.29, 0.3, 0.39, 0.4, 0.45, 0.5, 0.55, 0.6, 0.69, 0.7, 0.79, 0.8, 0.85, 0.89, 0.9, 0.94, 0.95, 0.99, 1.0)
#: the issue's example (the stale ConfigMap allowed it) and a few mixed vectors
MIXED = [
    {"offensive": 1.0, "hate": 0.99, "targeted_insult": 1.0},
    {"offensive": 0.55, "sexual": 0.5},
    {"violence": 0.92, "self-harm": 0.99},
    {"sexual": 0.3, "suggestive": 0.65, "hate": 0.2},
]


def vectors() -> list[dict[str, float]]:
    return [{c: s} for c, s in itertools.product(KNOWN_CATEGORIES, GRID)] + MIXED


def settings_of(container: Container, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    """``load_settings()`` as the container's rtaudit calls it: its environment alone (the test
    process's RTAUDIT_* cleared), its settings file written where ``RTAUDIT_CONFIG`` points."""
    for key in list(os.environ):
        if key.upper().startswith("RTAUDIT_") or key.upper() == "KAFKA_BOOTSTRAP_SERVERS":
            monkeypatch.delenv(key)
    found = container.settings_file
    assert found is not None, f"{container.source}: RTAUDIT_CONFIG={container.env.get('RTAUDIT_CONFIG')} is not mounted"
    path, text = found
    local = tmp_path / Path(path).name
    local.write_text(text)
    for key, value in container.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("RTAUDIT_CONFIG", str(local))
    monkeypatch.chdir(tmp_path)
    return load_settings()


def repository_settings(monkeypatch: pytest.MonkeyPatch) -> Settings:
    for key in list(os.environ):
        if key.upper().startswith("RTAUDIT_") or key.upper() == "KAFKA_BOOTSTRAP_SERVERS":
            monkeypatch.delenv(key)
    return load_settings(REPO / "rtaudit.toml")


CONTAINERS = k8s_containers() + compose_containers()


@pytest.mark.parametrize("container", CONTAINERS, ids=[c.source for c in CONTAINERS])
def test_each_container_decides_like_the_repository(container: Container, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    repo = repository_settings(monkeypatch)
    deployed = settings_of(container, monkeypatch, tmp_path)
    tenants = sorted({*repo.tenants, *deployed.tenants, "any-other-tenant"})
    differ = []
    for tenant, scores, complete in itertools.product(tenants, vectors(), (True, False)):
        want = repo.policies.for_tenant(tenant).decide(scores, complete=complete)
        got = deployed.policies.for_tenant(tenant).decide(scores, complete=complete)
        if got != want:
            differ.append(f"{tenant} {scores} complete={complete}: {got}, repository {want}")
    assert not differ, f"{container.source} decides {len(differ)} cases unlike rtaudit.toml, e.g. {differ[:3]}"
    # and the rest of the policy (SLO, lane, quota, fail modes) and batching and media limits alike
    assert deployed.policies == repo.policies
    assert (deployed.batch, deployed.media, deployed.partitions) == (repo.batch, repo.media, repo.partitions)
    assert deployed.profile == "production" and deployed.bootstrap_servers


def test_the_configmap_carries_rtaudit_toml_verbatim() -> None:
    check = subprocess.run([sys.executable, str(REPO / "deploy" / "tools" / "sync_configmap.py"), "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_a_configmap_without_text_thresholds_would_be_caught(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The check itself: the ConfigMap this test replaced (profanity, sexual, suggestive) is refused at load."""
    from rtaudit.workers.settings import SettingsError

    stale = next(c for c in k8s_containers() if "rtaudit-text" in c.source)
    path = stale.env["RTAUDIT_CONFIG"]
    stale.files[path] = ('[default.thresholds]\nprofanity = { review = 0.5, block = 0.9 }\n'
                         'sexual = { review = 0.45, block = 0.7 }\nsuggestive = { review = 0.6, block = 1.01 }\n')
    with pytest.raises(SettingsError, match="no threshold for any category of the ocr and text stages"):
        settings_of(stale, monkeypatch, tmp_path)
