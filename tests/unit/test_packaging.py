"""The installed namespace: the top-level folders install as ``rtaudit.<folder>`` (issue 13), every
package is listed, and no code reaches them by their bare names (which would import a second
copy of a module: two sets of classes, and Prometheus' duplicate-metric error for workers.metrics)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("engine", "workers", "schemas", "topics", "cli", "tools", "modelbuild")
#: a bare import or module path: ``from engine.x``, ``import workers.y``, ``"schemas.z"``, ``faust -A workers.router``,
#: ``workers.<role>``.
BARE = re.compile(r"^\s*(?:from|import) (?:engine|workers|schemas|topics|cli|tools|modelbuild)\b|(?<![\w./-])(?:engine|workers|schemas|topics|cli|tools|modelbuild)\.[a-z_{<][\w{}<>]*(?!\w*\()",
                  re.M)


def packages_on_disk() -> set[str]:
    return {"rtaudit." + ".".join(p.parent.relative_to(ROOT).parts)
            for folder in FOLDERS for p in (ROOT / folder).rglob("__init__.py")}


def test_every_package_folder_is_installed_under_the_rtaudit_namespace() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(config["packages"]) == packages_on_disk()
    assert config["package-dir"] == {f"rtaudit.{f}": f for f in FOLDERS}
    for name in sorted(packages_on_disk()):
        module = importlib.import_module(name)
        assert Path(module.__file__).resolve().is_relative_to(ROOT)  # type: ignore[arg-type]


def test_no_code_uses_the_bare_folder_names() -> None:
    offenders = []
    for folder in (*FOLDERS, "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == Path(__file__).resolve():
                continue  # this file names them on purpose
            for m in BARE.finditer(path.read_text()):
                line = path.read_text()[: m.start()].count("\n") + 1
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0).strip()}")
    assert offenders == [], "use rtaudit.<folder>...: " + "; ".join(offenders[:20])


def test_the_docs_and_deploy_files_name_the_installed_modules() -> None:
    docs = [ROOT / "README.md", ROOT / "docker-compose.yml", *(ROOT / "deploy").rglob("*"), *(ROOT / "docs").rglob("*.md")]
    offenders = [f"{p.relative_to(ROOT)}: {m.group(0).strip()}" for p in docs if p.is_file()
                 for m in BARE.finditer(p.read_text(errors="replace"))]
    assert offenders == [], offenders[:20]


#: a package named by a bare string to the import machinery: ``resources.files("workers")``.
BARE_RESOURCE = re.compile(r"(?:files|import_module|find_spec)\(\s*[\"'](?:engine|workers|schemas|topics|cli|tools|modelbuild)\b")


def test_package_resources_are_reached_through_the_namespace() -> None:
    offenders = [f"{p.relative_to(ROOT)}: {m.group(0)}" for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
                 for m in BARE_RESOURCE.finditer(p.read_text())]
    assert offenders == [], offenders


def test_package_data_loads_outside_the_repository(tmp_path: Path) -> None:
    """pytest puts the repository on ``sys.path``, where ``import workers`` would work by
    accident; an installed ``rtaudit`` run from elsewhere must find its data (the demo texts,
    the JSON Schemas, the text artifacts) through the namespace alone."""
    code = (
        "from rtaudit.tools.demo.corpus import demo_texts; assert len(demo_texts()) > 10\n"
        "from rtaudit.schemas.export import SCHEMA_DIR; assert any(SCHEMA_DIR.glob('*.schema.json'))\n"
        "from rtaudit.engine.text.heads import MANIFEST; assert MANIFEST.is_file()\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
