"""The deploy files as a cluster would read them: every manifest of ``deploy/k8s`` and every
service of ``docker-compose.yml`` loaded as plain YAML, and the environment and settings file
each rtaudit container ends up with (shared by ``test_deploy_settings`` and ``test_deploy_manifests``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
COMPOSE = REPO / "docker-compose.yml"
#: where the image puts the repository (deploy/Dockerfile: WORKDIR /app, COPY . /app)
IMAGE_WORKDIR = "/app"


@dataclass
class Container:
    """One rtaudit container: where it is declared, its command, environment and mounted files."""

    source: str  # e.g. "deploy/k8s/text.yaml Deployment/rtaudit-text" or "docker-compose.yml service text"
    image: str
    command: list[str]
    env: dict[str, str]
    #: absolute path inside the container → file text (ConfigMap volumes)
    files: dict[str, str] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def settings_file(self) -> tuple[str, str] | None:
        """``(path, text)`` of the settings file this container's rtaudit reads: ``$RTAUDIT_CONFIG``
        among its mounted files, else the image's ``/app/rtaudit.toml`` (the working directory)."""
        path = self.env.get("RTAUDIT_CONFIG")
        if path is not None:
            return (path, self.files[path]) if path in self.files else None
        return f"{IMAGE_WORKDIR}/rtaudit.toml", (REPO / "rtaudit.toml").read_text()


def k8s_documents() -> list[tuple[str, dict[str, Any]]]:
    """``(file name, document)`` of every YAML document under deploy/k8s (kustomization included)."""
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [(path.name, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def config_maps() -> dict[str, dict[str, str]]:
    return {d["metadata"]["name"]: d.get("data", {}) for _, d in k8s_documents() if d.get("kind") == "ConfigMap"}


def pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The pod spec of a Deployment, Job, StatefulSet or DaemonSet (``None`` for other kinds)."""
    if doc.get("kind") in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
        return doc["spec"]["template"]["spec"]
    return None


def k8s_containers() -> list[Container]:
    maps = config_maps()
    out = []
    for name, doc in k8s_documents():
        spec = pod_spec(doc)
        if spec is None:
            continue
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec["containers"]:
            env: dict[str, str] = {}
            for ref in c.get("envFrom", []):
                env.update(maps[ref["configMapRef"]["name"]])
            env.update({e["name"]: e["value"] for e in c.get("env", []) if "value" in e})
            files = {}
            for m in c.get("volumeMounts", []):
                cm = volumes[m["name"]].get("configMap")
                if cm is not None:
                    files.update({f"{m['mountPath']}/{k}": v for k, v in maps[cm["name"]].items()})
            out.append(Container(f"deploy/k8s/{name} {doc['kind']}/{doc['metadata']['name']}", c["image"],
                                 c.get("command", []), env, files, c, doc["spec"]["template"]["metadata"].get("labels", {})))
    return out


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def compose_containers() -> list[Container]:
    """The compose services built from deploy/Dockerfile (the rtaudit image)."""
    out = []
    for name, svc in compose()["services"].items():
        if "build" not in svc:
            continue
        env = {k: str(v) for k, v in (svc.get("environment") or {}).items()}
        out.append(Container(f"docker-compose.yml service {name}", svc["image"], svc.get("command", []), env,
                             raw=svc, labels={"app.kubernetes.io/component": name}))
    return out
