"""Fixtures and hooks shared by both test tiers.

* **Hypothesis profiles**: ``ci`` (derandomized, no example database, failing examples
  printed as a reproduction blob) is loaded when the ``CI`` environment variable is set, so a
  CI run is reproducible; ``dev`` (random exploration, the local ``.hypothesis/`` database
  replays what it found) otherwise. ``HYPOTHESIS_PROFILE=<name>`` picks one explicitly.
* **Evaluation data**: tests that measure quality on the shared evaluation data take the
  ``data_dir`` fixture. On a bare clone (no ``../shared/data`` beside the repository) they
  skip, and the terminal summary says how many did not run, which, and where to put the
  data. With ``RTAUDIT_REQUIRE_SHARED_DATA=1`` (the full CI run) a missing directory is an
  error instead of a skip. Every other test, the fleet's core guarantees included, uses
  inputs the project makes itself and runs on a bare clone.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

#: ../shared/data beside the repository (read in place, never copied into the project).
DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"
#: the start of every skip reason the ``data_dir`` fixture gives (the summary hook counts these).
DATA_SKIP_REASON = "shared evaluation data not found"
REQUIRE_DATA_ENV = "RTAUDIT_REQUIRE_SHARED_DATA"

hypothesis_settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
hypothesis_settings.register_profile("dev", print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``../shared/data``: the evaluation data (datasets, image corpora). Skips the test when
    it is absent, or fails it when ``RTAUDIT_REQUIRE_SHARED_DATA=1``."""
    if not DATA_DIR.is_dir():
        message = f"{DATA_SKIP_REASON} at {DATA_DIR}"
        if os.environ.get(REQUIRE_DATA_ENV) == "1":
            pytest.fail(f"{message} ({REQUIRE_DATA_ENV}=1)", pytrace=False)
        pytest.skip(message)
    return DATA_DIR


def _fetched_data(root: Path, missing: list, reason: str, data_env: str, require_env: str) -> Path:  # type: ignore[type-arg]
    """``root`` when nothing is ``missing``; else skip with ``reason`` (counted aloud in the summary),
    or fail when ``require_env`` is ``1``."""
    if missing:
        message = f"{reason}: {missing[0]} (set {data_env})"
        if os.environ.get(require_env) == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return root


#: the start of every skip reason of the ``safety_data_dir`` fixture (counted by the summary hook too).
SAFETY_SKIP_REASON = "safety evaluation data not found"


@pytest.fixture(scope="session")
def safety_data_dir() -> Path:
    """The threat and self-harm sets (``$RTAUDIT_SAFETY_DATA``, default ``~/.cache/rtaudit/data``; not in
    ``../shared/data``: docs/text-moderation.md says where each file comes from). Skips the test when
    they are absent (counted aloud in the summary), or fails it when ``RTAUDIT_REQUIRE_SAFETY_DATA=1``."""
    from rtaudit.modelbuild.text import data as D

    from rtaudit.workers.settings import Settings

    root = D.safety_data_dir(Settings().safety_data)  # $RTAUDIT_SAFETY_DATA
    missing = [p for p in D.required_safety_files(root) if not p.is_file()]
    return _fetched_data(root, missing, SAFETY_SKIP_REASON, D.SAFETY_ENV, "RTAUDIT_REQUIRE_SAFETY_DATA")


#: the start of every skip reason of the ``multilingual_data_dir`` fixture (counted by the summary hook too).
MULTILINGUAL_SKIP_REASON = "multilingual evaluation data not found"


@pytest.fixture(scope="session")
def multilingual_data_dir() -> Path:
    """The per-language abuse sets (``$RTAUDIT_MULTILINGUAL_DATA``, default ``~/.cache/rtaudit/multilingual``;
    docs/text-moderation.md, 'Other languages', says where each file comes from). Skips the test when
    they are absent (counted aloud in the summary), or fails it when ``RTAUDIT_REQUIRE_MULTILINGUAL_DATA=1``."""
    from rtaudit.modelbuild.text import multilingual_data as MD

    from rtaudit.workers.settings import Settings

    root = MD.default_data_dir(Settings().multilingual_data)  # $RTAUDIT_MULTILINGUAL_DATA
    return _fetched_data(root, MD.missing(root), MULTILINGUAL_SKIP_REASON, MD.DATA_ENV, "RTAUDIT_REQUIRE_MULTILINGUAL_DATA")


@pytest.fixture(scope="session")
def romanized_data_dir() -> Path:
    """The romanized-script sets (:data:`rtaudit.modelbuild.text.romanized_data.SOURCES`, under the same directory as
    the per-language sets; docs/text-moderation.md, 'Romanized scripts'). Skips the test when one is absent (the
    multilingual skip reason: counted aloud in the summary), or fails it when ``RTAUDIT_REQUIRE_MULTILINGUAL_DATA=1``."""
    from rtaudit.modelbuild.text import multilingual_data as MD
    from rtaudit.modelbuild.text import romanized_data

    from rtaudit.workers.settings import Settings

    root = MD.default_data_dir(Settings().multilingual_data)  # $RTAUDIT_MULTILINGUAL_DATA
    return _fetched_data(root, romanized_data.missing(root), MULTILINGUAL_SKIP_REASON, MD.DATA_ENV,
                         "RTAUDIT_REQUIRE_MULTILINGUAL_DATA")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


#: every kind of evaluation data a test may skip for, counted aloud in the summary: (skip reason,
#: what the summary says is missing, where to get it). ``.ci/run`` accepts a skip whose reason holds
#: "evaluation data not found" and nothing else.
EVALUATION_DATA = (
    (SAFETY_SKIP_REASON, "threat/self-harm evaluation tests not run: safety data not found",
     "see docs/text-moderation.md ('Data and splits') and set RTAUDIT_SAFETY_DATA"),
    (MULTILINGUAL_SKIP_REASON, "per-language evaluation tests not run: multilingual data not found",
     "see docs/text-moderation.md ('Other languages') and set RTAUDIT_MULTILINGUAL_DATA"),
    (DATA_SKIP_REASON, "evaluation tests not run: ../shared/data not found",
     f"put the shared data at {DATA_DIR} to run them"),
)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    """One loud line (and the list) per kind of evaluation data the skipped tests wanted."""
    for reason, what, where in EVALUATION_DATA:
        ids = sorted({r.nodeid for r in terminalreporter.stats.get("skipped", []) if reason in _skip_reason(r)})
        if not ids:
            continue
        terminalreporter.write_sep("=", "evaluation data", yellow=True)
        terminalreporter.write_line(f"{len(ids)} {what}; {where}", yellow=True, bold=True)
        for nodeid in ids:
            terminalreporter.write_line(f"  {nodeid}")
