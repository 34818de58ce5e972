"""The alert rules (``deploy/prometheus/alerts.yml``) pass ``promtool check rules``, and the joint
latency × drift matrix fires as ``engine/drift.py``'s :func:`alert_level` says
(``promtool test rules deploy/prometheus/alerts.test.yml``: series in, alerts out).

promtool comes with Prometheus (`make setup` unpacks Debian's into .venv/bin); without it these tests skip
and say so."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rtaudit.engine.drift import TICKET_DRIFT, TICKET_P99_S, alert_level

PROM = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
#: on PATH, or where `make setup` unpacks it (.venv/bin, beside this interpreter)
PROMTOOL = shutil.which("promtool") or shutil.which("promtool", path=str(Path(sys.executable).parent))
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian: apt-get install prometheus)")


@needs_promtool
def test_promtool_accepts_the_rules() -> None:
    out = subprocess.run([PROMTOOL, "check", "rules", str(PROM / "alerts.yml")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


@needs_promtool
def test_the_drift_matrix_fires_in_the_right_cells() -> None:
    out = subprocess.run([PROMTOOL, "test", "rules", "alerts.test.yml"], cwd=PROM, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_rules_use_the_engines_thresholds() -> None:
    rules = {r["alert"]: r for g in yaml.safe_load((PROM / "alerts.yml").read_text())["groups"] for r in g["rules"]}
    page, ticket = rules["RtauditDriftWithLatencyGlitch"]["expr"], rules["RtauditDriftWithLatencyWobble"]["expr"]
    assert f">= {TICKET_DRIFT[1]}" in page and f"> {TICKET_P99_S[1]:g}" in page
    assert f">= {TICKET_DRIFT[0]} < {TICKET_DRIFT[1]}" in ticket and f">= {TICKET_P99_S[0]} <= {TICKET_P99_S[1]:g}" in ticket
    assert rules["RtauditDriftWithLatencyGlitch"]["labels"]["action"] == "trip_breaker"
    # the series alerts.test.yml feeds: (P99 s, drift) -> the cell the engine names
    assert alert_level(4.97, 0.5) == "page" and alert_level(1.99, 0.3) == "ticket"
    assert alert_level(4.97, 0.05) is None and alert_level(0.495, 0.45) is None
