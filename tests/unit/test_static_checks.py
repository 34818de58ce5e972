"""The linter and the type checker, run as ``make test`` and ``.ci/run`` run every test.

* ``ruff check`` on the whole repository, with the rule set of ``[tool.ruff.lint]`` in pyproject.toml.
* ``mypy`` on the installed packages ``rtaudit.engine``, ``rtaudit.schemas``, ``rtaudit.topics`` and
  ``rtaudit.workers`` with ``[tool.mypy]``: strict on ``engine/`` and the worker runtime, the default
  checks elsewhere. The repository's folders are installed under ``rtaudit.<folder>``
  (``[tool.setuptools] package-dir``), a mapping mypy cannot follow through the editable install, so the
  test lays a tree of links ``build/mypy-src/rtaudit/<folder>`` → ``<folder>`` and points mypy at it;
  error paths read ``build/mypy-src/rtaudit/engine/x.py`` for ``engine/x.py``.

Each fails with the tool's own report. Both tools come with the ``test`` extra.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MYPY_SRC = ROOT / "build" / "mypy-src"


def _tool(name: str) -> list[str]:
    if shutil.which(name, path=str(Path(sys.executable).parent)) is None:
        pytest.fail(f"{name} is not installed beside {sys.executable}: install the test extra (make setup)")
    return [sys.executable, "-m", name]


def package_links() -> list[str]:
    """Lay ``build/mypy-src/rtaudit/<folder>`` links for every top-level package of pyproject's ``package-dir``;
    returns the package names (``rtaudit.engine``, ...)."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    top = {pkg: folder for pkg, folder in setup["package-dir"].items() if pkg.count(".") == 1}
    (MYPY_SRC / "rtaudit").mkdir(parents=True, exist_ok=True)
    for pkg, folder in top.items():
        link = MYPY_SRC / "rtaudit" / pkg.split(".")[1]
        if link.is_symlink() and Path(os.readlink(link)) != ROOT / folder:
            link.unlink()
        if not link.exists():
            link.symlink_to(ROOT / folder, target_is_directory=True)
    return sorted(top)


def test_ruff_finds_nothing() -> None:
    proc = subprocess.run([*_tool("ruff"), "check", "--output-format", "concise", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"ruff check:\n{proc.stdout}{proc.stderr}"


def test_mypy_finds_nothing() -> None:
    packages = package_links()
    args = [arg for pkg in packages for arg in ("-p", pkg)]
    env = {**os.environ, "MYPYPATH": str(MYPY_SRC)}
    proc = subprocess.run([*_tool("mypy"), "--config-file", str(ROOT / "pyproject.toml"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"mypy:\n{proc.stdout}{proc.stderr}"
