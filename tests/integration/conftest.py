"""A real fleet for the integration tier: a fresh embedded tansu broker on a free port,
the topic catalogue, and one ``faust ... worker`` process per role."""

from __future__ import annotations

import socket
from collections.abc import Iterator
import pytest

from rtaudit.tools.fleet.local import Fleet
from rtaudit.workers.settings import Settings, load_settings

TENANT = "itest"
TENANT_OPEN = "itest-open"
TENANT_CLOSED = "itest-closed"
#: fusion waits this long past a deadline for in-flight partials (ms).
FUSION_GRACE_MS = 5000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, Settings]]:
    """The whole fleet, started once for the session. Tenant ``itest`` has a 300 s SLO so
    a CPU-bound OCR queue never expires requests it does not mean to; ``itest-open``
    (fail-open) and ``itest-closed`` (fail-closed) are for the expiry tests, and the
    fusion grace is long enough that an ``expired`` partial always beats the deadline tick."""
    root = tmp_path_factory.mktemp("fleet")
    config = root / "rtaudit.toml"
    config.write_text(
        f"""
state_dir = "{root / 'state'}"

fusion_grace_ms = {FUSION_GRACE_MS}

[tenants.{TENANT}]
version = "itest-1"
slo_ms = 300000
on_incomplete = "review"

[tenants.{TENANT_OPEN}]
version = "itest-open-1"
on_incomplete = "allow"

[tenants.{TENANT_CLOSED}]
version = "itest-closed-1"
on_incomplete = "review"
"""
    )
    # the port passed explicitly: an exported RTAUDIT_EMBEDDED_PORT beats the file, not an argument
    settings = load_settings(config, embedded_port=free_port())
    fleet = Fleet(settings, config=config, log_dir=root / "logs")
    fleet.start(ready_timeout_s=180)
    try:
        yield fleet, settings
    finally:
        fleet.stop()


@pytest.fixture(scope="module")
def broker_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A fresh embedded broker with the topic catalogue and no workers (for control-plane tests)."""
    from rtaudit.topics.admin import ensure_topics
    from rtaudit.topics.catalog import catalog
    from rtaudit.tools.fleet.broker import EmbeddedBroker

    settings = Settings(embedded_port=free_port(), state_dir=tmp_path_factory.mktemp("state"))
    with EmbeddedBroker(settings.embedded_port):
        ensure_topics(settings.bootstrap, catalog(settings.partitions))
        yield settings


def launch_null_text_fleet(root) -> tuple[Fleet, Settings]:  # type: ignore[no-untyped-def]
    """Router, fusion and a text worker with the null model on a fresh embedded broker, state
    and logs under ``root``; launched, not yet ready (its groups join in the background)."""
    settings = Settings(embedded_port=free_port(), state_dir=root / "state")
    fleet = Fleet(settings, roles=("router", "fusion", "text"), log_dir=root / "logs",
                  env={"RTAUDIT_STATE_DIR": str(root / "state"), "RTAUDIT_TEXT_MODEL": "null"})
    fleet.launch()
    return fleet, settings
