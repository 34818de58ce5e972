"""Every deploy file checked against the code: the Kubernetes manifests (plain YAML loading, as
``kubectl apply -k`` would read them before kustomize's edits) and docker-compose.yml name images,
commands, environment variables, ports, probes, consumer groups, topics and metrics that exist;
the manifests pass the Kubernetes JSON schemas offline (``kubernetes-validate``, strict: unknown
fields are errors) and every YAML file passes ``yamllint``.

What this leaves untested without an API server: admission (defaulting, webhooks, quotas and
LimitRanges, PodSecurity admission), that the CRDs of podmonitor.yaml and keda-ocr.yaml are
installed (they are checked here by field only), kustomize's own rendering (its ``images:``
rewrite is checked by name), image pulls, and that the pods start, pass their probes and join
their consumer groups on a real Kafka (the integration tests cover that against the embedded broker).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.deploy_files import (
    COMPOSE, K8S, REPO, Container, compose, compose_containers, config_maps, k8s_containers, k8s_documents,
)

CONTAINERS = k8s_containers() + compose_containers()
from rtaudit.workers.roles import ROLES as WORKER_ROLES  # noqa: E402  (every role the fleet starts)
#: environment variables the containers may set besides RTAUDIT_* settings
OTHER_ENV = {"KAFKA_BOOTSTRAP_SERVERS", "HF_HUB_OFFLINE"}
#: custom resources: their schemas are not in kubernetes-validate
CRD_KINDS = {"PodMonitor", "ScaledObject", "Kustomization"}


def ids(items: list[Container]) -> list[str]:
    return [c.source for c in items]


def metrics_port(c: Container) -> int:
    return int(c.env.get("RTAUDIT_METRICS_PORT") or dockerfile_env()["RTAUDIT_METRICS_PORT"])


def dockerfile_env() -> dict[str, str]:
    text = (REPO / "deploy" / "Dockerfile").read_text().replace("\\\n", " ")
    env = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(dict(re.findall(r"(\w+)=(\S+)", line)))
    return env


def role_of(c: Container) -> str | None:
    """The worker role a container's command runs (``faust -A rtaudit.workers.<role> worker``)."""
    if c.command[:2] == ["faust", "-A"]:
        return c.command[2].rsplit(".", 1)[1]
    return None


# ------------------------------------------------------------------------------------------ images

def test_every_container_runs_the_image_deploy_dockerfile_builds() -> None:
    kustomization = next(d for _, d in k8s_documents() if d.get("kind") == "Kustomization")
    renamed = {i["name"] for i in kustomization.get("images", [])}
    for c in CONTAINERS:
        name = c.image.split(":")[0]
        assert name == "rtaudit", f"{c.source}: image {c.image}"
        assert c.source.startswith("docker-compose") or name in renamed, f"{c.source}: kustomize never sets {name}'s registry"
    for svc in compose()["services"].values():
        if "build" in svc:
            assert (REPO / svc["build"]["context"] / svc["build"]["dockerfile"]).is_file()


def test_the_kustomization_lists_files_that_exist() -> None:
    kustomization = next(d for _, d in k8s_documents() if d.get("kind") == "Kustomization")
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), resource


# ------------------------------------------------------------------------------------------ commands

@pytest.mark.parametrize("c", CONTAINERS, ids=ids(CONTAINERS))
def test_every_command_names_a_worker_app_or_an_rtaudit_command(c: Container) -> None:
    role = role_of(c)
    if role is not None:
        assert c.command == ["faust", "-A", f"rtaudit.workers.{role}", "worker", "-l", "info"], c.command
        spec = importlib.util.find_spec(f"rtaudit.workers.{role}")
        assert spec is not None and spec.origin, f"{c.source}: no module rtaudit.workers.{role}"
        tree = ast.parse(Path(spec.origin).read_text())
        assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for x in n.targets for t in ast.walk(x)
                    if isinstance(t, ast.Name)}
        assert "app" in assigned, f"rtaudit.workers.{role} defines no module-level app"
        assert role in WORKER_ROLES and c.labels.get("app.kubernetes.io/component") == role, c.source
        return
    assert c.command[0] == "rtaudit", f"{c.source}: {c.command}"
    import typer

    from rtaudit.cli.main import app

    group: Any = typer.main.get_command(app)
    for word in c.command[1:]:
        assert word in getattr(group, "commands", {}), f"{c.source}: no command {c.command}"
        group = group.commands[word]


def test_every_worker_role_is_deployed_once_in_each_file() -> None:
    k8s = sorted(r for c in k8s_containers() if (r := role_of(c)))
    composed = sorted(r for c in compose_containers() if (r := role_of(c)))
    assert k8s == composed == sorted(WORKER_ROLES)


# ------------------------------------------------------------------------------------------ environment

def commented_env(path: Path) -> set[str]:
    """``RTAUDIT_*`` names in commented-out ``NAME: value`` lines (the examples a user uncomments)."""
    return set(re.findall(r"#\s*(RTAUDIT_[A-Z0-9_]+)\s*:", path.read_text()))


def test_every_environment_variable_is_a_setting_or_a_known_variable() -> None:
    from rtaudit.workers.settings import check_environment

    names = {k for c in CONTAINERS for k in c.env} | commented_env(K8S / "configmap.yaml") | commented_env(COMPOSE)
    names |= set(dockerfile_env())
    for name in sorted(names):
        if name.startswith("RTAUDIT_"):
            check_environment({name: "1"})  # raises SettingsError naming the close match
        else:
            assert name in OTHER_ENV | {"PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PIP_DISABLE_PIP_VERSION_CHECK"}, name


@pytest.mark.parametrize("c", CONTAINERS, ids=ids(CONTAINERS))
def test_every_container_reaches_the_cluster_with_the_production_profile(c: Container) -> None:
    assert c.env["KAFKA_BOOTSTRAP_SERVERS"] and c.env["RTAUDIT_KAFKA_PROFILE"] == "production"
    if role_of(c):
        assert c.env["RTAUDIT_METRICS_HOST"] == "0.0.0.0", f"{c.source}: /metrics bound to loopback cannot be scraped"


# ------------------------------------------------------------------------------------------ ports and probes

@pytest.mark.parametrize("c", [c for c in k8s_containers() if role_of(c)], ids=ids([c for c in k8s_containers() if role_of(c)]))
def test_k8s_ports_probes_and_scrape_annotations_match_the_metrics_port(c: Container) -> None:
    port = metrics_port(c)
    ports = {p["name"]: p["containerPort"] for p in c.raw["ports"]}
    assert ports == {"metrics": port}
    for probe in ("startupProbe", "livenessProbe"):
        get = c.raw[probe]["httpGet"]
        assert get["path"] == "/metrics" and get["port"] in ports, f"{c.source} {probe}: {get}"
    doc = next(d for n, d in k8s_documents() if c.source.startswith(f"deploy/k8s/{n} ") and d.get("kind") == "Deployment")
    notes = doc["spec"]["template"]["metadata"]["annotations"]
    assert (notes["prometheus.io/port"], notes["prometheus.io/path"]) == (str(port), "/metrics")
    assert c.raw["resources"]["limits"]["memory"] and c.raw["resources"]["requests"]["memory"]


def test_podmonitor_scrapes_the_named_metrics_port_of_every_pod() -> None:
    monitor = next(d for _, d in k8s_documents() if d.get("kind") == "PodMonitor")
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    assert (endpoint["port"], endpoint["path"]) == ("metrics", "/metrics")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert all(c.labels.items() >= selector.items() for c in k8s_containers() if role_of(c))


@pytest.mark.parametrize("c", [c for c in compose_containers() if role_of(c)], ids=ids([c for c in compose_containers() if role_of(c)]))
def test_compose_healthcheck_expose_and_prometheus_match_the_metrics_port(c: Container) -> None:
    port = metrics_port(c)
    assert c.raw["expose"] == [str(port)]
    assert f"http://localhost:{port}/metrics" in " ".join(c.raw["healthcheck"]["test"])
    prometheus = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    job = next(j for j in prometheus["scrape_configs"] if j["job_name"] == "rtaudit")
    sd = job["dns_sd_configs"][0]
    assert sd["port"] == port and c.source.split()[-1] in sd["names"]


# ------------------------------------------------------------------------------------------ groups and topics

def test_keda_watches_the_ocr_group_on_its_input_topics() -> None:
    from rtaudit.topics.catalog import catalog, lane_topic
    from rtaudit.workers.runtime.lane_intake import intake_group

    scaled = next(d for _, d in k8s_documents() if d.get("kind") == "ScaledObject")
    target = scaled["spec"]["scaleTargetRef"]["name"]
    deployment = next(d for _, d in k8s_documents() if d.get("kind") == "Deployment" and d["metadata"]["name"] == target)
    role = deployment["spec"]["template"]["spec"]["containers"][0]["command"][2].rsplit(".", 1)[1]
    topics = {t.name for t in catalog()}
    bootstrap = config_maps()["rtaudit-env"]["KAFKA_BOOTSTRAP_SERVERS"]
    watched = set()
    for trigger in scaled["spec"]["triggers"]:
        meta = trigger["metadata"]
        assert meta["consumerGroup"] == intake_group(role)
        assert meta["topic"] in topics and meta["bootstrapServers"] == bootstrap
        watched.add(meta["topic"])
    assert watched == {lane_topic("image", lane) for lane in ("hi", "lo")}  # what the ocr worker consumes
    assert scaled["spec"]["maxReplicaCount"] <= min(t.partitions for t in catalog() if t.name in watched)


def test_autoscalers_target_deployments_and_stop_at_the_partition_count() -> None:
    from rtaudit.topics.catalog import DEFAULT_PARTITIONS

    deployments = {d["metadata"]["name"] for _, d in k8s_documents() if d.get("kind") == "Deployment"}
    for _, hpa in [(n, d) for n, d in k8s_documents() if d.get("kind") == "HorizontalPodAutoscaler"]:
        assert hpa["spec"]["scaleTargetRef"]["name"] in deployments
        assert hpa["spec"]["maxReplicas"] <= DEFAULT_PARTITIONS


def test_the_compose_kafka_never_auto_creates_topics() -> None:
    """Topics come from the catalogue (``rtaudit topics create``, the ``topics`` service) with their partition counts."""
    kafka = compose()["services"]["kafka"]["environment"]
    assert kafka["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    topics = compose()["services"]["topics"]
    assert topics["command"] == ["rtaudit", "topics", "create"]
    for name in WORKER_ROLES:
        assert compose()["services"][name]["depends_on"]["topics"]["condition"] == "service_completed_successfully"


# ------------------------------------------------------------------------------------------ metrics

def declared_metrics() -> dict[str, set[str]]:
    """Every sample name the workers export → its label names (``rtaudit.workers.metrics``; histograms
    add ``_bucket`` with ``le``, ``_sum``, ``_count``; counters end in ``_total``)."""
    from prometheus_client import REGISTRY

    import rtaudit.workers.metrics  # noqa: F401  (declares them)

    out: dict[str, set[str]] = {}
    for collector in list(REGISTRY._collector_to_names):  # noqa: SLF001  (the registry has no public list)
        labels = set(getattr(collector, "_labelnames", ()))
        for family in collector.describe() if hasattr(collector, "describe") else collector.collect():
            if family.type == "counter":
                out[family.name + "_total"] = labels
            elif family.type == "histogram":
                out.update({family.name + "_bucket": labels | {"le"}, family.name + "_sum": labels,
                            family.name + "_count": labels})
            else:
                out[family.name] = labels
    return out


def expressions() -> list[tuple[str, str]]:
    alerts = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yml").read_text())
    out = [("alerts.yml " + r["alert"], r["expr"]) for g in alerts["groups"] for r in g["rules"]]
    dashboards = (REPO / "deploy" / "grafana" / "dashboards").glob("*.json")
    for path in dashboards:
        out += [(path.name, m) for m in re.findall(r'"expr":\s*"((?:[^"\\]|\\.)*)"', path.read_text())]
    return out


def test_every_metric_an_alert_or_dashboard_queries_is_exported_with_those_labels() -> None:
    declared = declared_metrics()
    seen = 0
    for where, expr in expressions():
        expr = expr.replace('\\"', '"')
        for name, selector in re.findall(r"\b(rtaudit_[a-z0-9_]+)(\{[^}]*\})?", expr):
            seen += 1
            assert name in declared, f"{where}: {name} is not exported (rtaudit.workers.metrics)"
            used = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", selector))
            assert used <= declared[name], f"{where}: {name} has no label {used - declared[name]}"
        for labels in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
            names = {x.strip() for x in labels.split(",") if x.strip()}
            metrics = set(re.findall(r"\b(rtaudit_[a-z0-9_]+)", expr))
            allowed = set().union(*(declared[m] for m in metrics)) if metrics else names
            assert names <= allowed | {"le"}, f"{where}: grouped by {names - allowed}"
    assert seen >= 10


# ------------------------------------------------------------------------------------------ schemas and lint

def test_every_manifest_passes_the_kubernetes_schemas_offline() -> None:
    import kubernetes_validate  # the test extra (pyproject.toml)

    version = kubernetes_validate.latest_version()
    checked = 0
    for _name, doc in k8s_documents():
        if doc["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError naming the field
        checked += 1
    assert checked >= 10


def test_the_validator_catches_a_misspelt_field() -> None:
    import kubernetes_validate

    doc = next(d for _, d in k8s_documents() if d.get("kind") == "Deployment")
    broken = yaml.safe_load(yaml.safe_dump(doc))
    broken["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["httpGet"]["paht"] = "/metrics"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)


def test_every_yaml_file_passes_yamllint() -> None:
    from yamllint import linter
    from yamllint.config import YamlLintConfig

    config = YamlLintConfig(file=str(REPO / ".yamllint.yml"))
    files = [COMPOSE, *sorted((REPO / "deploy").rglob("*.yaml")), *sorted((REPO / "deploy").rglob("*.yml"))]
    problems = [f"{p.relative_to(REPO)}:{e.line}: {e.desc} ({e.rule})"
                for p in files for e in linter.run(p.read_text(), config, str(p)) if e.level == "error"]
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------ the image

def test_the_image_exports_the_text_encoder_at_build_time_where_workers_look() -> None:
    """A text or OCR container must not export MiniLM on first start (17.7 s, a 923 MiB peak in a
    1 GiB pod): the Dockerfile runs `rtaudit text build-encoder` after installing the package and
    before dropping root, into the RTAUDIT_CACHE the workers read at run time."""
    import typer

    from rtaudit.cli.main import app

    steps = [ln.strip() for ln in (REPO / "deploy" / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    install = next(i for i, s in enumerate(steps) if s.startswith("RUN") and "pip install \"/app[build]\"" in s)  # onnx: int8/fp16
    build = next(i for i, s in enumerate(steps) if s.startswith("RUN") and "rtaudit text build-encoder" in s)
    user = next(i for i, s in enumerate(steps) if s.startswith("USER"))
    cache = dockerfile_env().get("RTAUDIT_CACHE")
    env_at = next(i for i, s in enumerate(steps) if s.startswith("ENV") and "RTAUDIT_CACHE=" in s)
    assert install < build < user and env_at < build and cache and cache.startswith("/")
    assert "build-encoder" in typer.main.get_command(app).commands["text"].commands  # type: ignore[attr-defined]
    # a worker container never overrides it (it would look for the encoder elsewhere and export it again)
    assert all("RTAUDIT_CACHE" not in c.env for c in CONTAINERS)


def mib(quantity: str) -> float:
    """A Kubernetes memory quantity (``768Mi``, ``2Gi``) in MiB."""
    number, unit = re.fullmatch(r"(\d+(?:\.\d+)?)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return float(number) * (1024 if unit == "Gi" else 1)


@pytest.mark.parametrize("c", [c for c in k8s_containers() if role_of(c)], ids=ids([c for c in k8s_containers() if role_of(c)]))
def test_memory_requests_and_limits_cover_the_measured_figures_written_beside_them(c: Container) -> None:
    """Each worker's comment carries its measured RSS at rest and its peaks (benchmarks/role_memory.py):
    the request holds the resting process, the limit the highest peak with a quarter to spare."""
    path = K8S / c.source.split()[0].split("/")[-1]
    text = path.read_text()
    rest = [float(x) for x in re.findall(r"RSS (\d+) MiB at rest", text)]
    peaks = [float(x) for x in re.findall(r"(\d+) MiB peak", text)]
    assert rest and peaks, f"{path.name}: no measured memory figures beside the limits"
    resources = c.raw["resources"]
    assert mib(resources["requests"]["memory"]) >= rest[0]
    assert mib(resources["limits"]["memory"]) >= 1.25 * max(peaks)
