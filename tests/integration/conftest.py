"""A real fleet for the integration tier: a fresh embedded tansu broker on a free port,
the topic catalogue, and one ``faust ... worker`` process per role."""

from __future__ import annotations

import socket
from collections.abc import Iterator
import pytest

from workers.fleet import Fleet
from workers.settings import Settings, load_settings

TENANT = "itest"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Fleet, Settings]]:
    """The whole fleet, started once for the session. Tenant ``itest`` has a 300 s SLO so
    a CPU-bound OCR queue never expires requests here (expiry has its own unit tests)."""
    root = tmp_path_factory.mktemp("fleet")
    config = root / "rtaudit.toml"
    config.write_text(
        f"""
embedded_port = {free_port()}
state_dir = "{root / 'state'}"

[tenants.{TENANT}]
version = "itest-1"
slo_ms = 300000
on_incomplete = "review"
"""
    )
    settings = load_settings(config)
    fleet = Fleet(settings, config=config, log_dir=root / "logs")
    fleet.start(ready_timeout_s=180)
    try:
        yield fleet, settings
    finally:
        fleet.stop()
