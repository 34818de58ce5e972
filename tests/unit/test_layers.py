"""The layer rules of the package, checked on the source (an AST walk; nothing is imported).

Rules (docs/architecture.md, "Layers"):

* ``engine/`` imports nothing from ``rtaudit.workers`` and no Kafka client (``confluent_kafka``,
  ``faust``, ``aiokafka``, ``kafka``), at module level or inside a function, nor by
  ``importlib.import_module("...")`` with a literal name;
* ``engine/`` reads no environment variable: no ``os.environ``, ``os.getenv``, ``os.environb``,
  ``os.putenv``/``os.unsetenv``, and no ``from os import environ`` (settings come from
  :mod:`rtaudit.workers.settings`, which reads the file and the environment, and reach the
  engine as arguments or typed objects);
* ``engine/`` takes settings as typed objects: no parameter named ``settings``, ``options`` or
  ``config`` that is unannotated or annotated ``Any``;
* ``schemas/`` (the message contracts, usable alone by any producer) imports nothing from
  ``rtaudit.engine`` or ``rtaudit.workers``, and no Kafka client.

A failure lists every ``path:line`` that breaks a rule.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KAFKA_CLIENTS = ("confluent_kafka", "faust", "aiokafka", "kafka")
#: folder → (the installed package name, the import prefixes it must not use)
FORBIDDEN: dict[str, tuple[str, tuple[str, ...]]] = {
    "engine": ("rtaudit.engine", ("rtaudit.workers", *KAFKA_CLIENTS)),
    "schemas": ("rtaudit.schemas", ("rtaudit.engine", "rtaudit.workers", *KAFKA_CLIENTS)),
}
ENV_NAMES = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})
SETTINGS_PARAMS = frozenset({"settings", "options", "config"})


def _sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _package_of(path: Path, folder: str, package: str) -> str:
    """The dotted package ``path`` lives in (for relative imports)."""
    parts = path.relative_to(ROOT / folder).with_suffix("").parts
    return ".".join((package, *parts[:-1]))


def imported_modules(tree: ast.AST, package: str) -> Iterator[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in ``tree``, relative ones resolved against
    ``package``, plus ``importlib.import_module("<literal>")`` calls."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:  # ``from rtaudit import workers``
                yield node.lineno, f"{module}.{alias.name}"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno, node.args[0].value


def env_reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``(line, what)`` of every use of the process environment through :mod:`os`."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in ENV_NAMES and isinstance(node.value, ast.Name)
                and node.value.id == "os"):
            yield node.lineno, f"os.{node.attr}"
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in ENV_NAMES:
                    yield node.lineno, f"from os import {alias.name}"


def untyped_settings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``(line, parameter)`` of every ``settings``/``options``/``config`` parameter without a type, or typed ``Any``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        a = node.args
        for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
            if arg.arg not in SETTINGS_PARAMS:
                continue
            ann = arg.annotation
            if ann is None or (isinstance(ann, ast.Name) and ann.id == "Any") or (
                    isinstance(ann, ast.Attribute) and ann.attr == "Any") or (
                    isinstance(ann, ast.Constant) and ann.value == "Any"):
                yield node.lineno, f"{node.name}({arg.arg}: {ast.unparse(ann) if ann else 'no type'})"


def _is_under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _violations(folder: str) -> list[str]:
    package, forbidden = FORBIDDEN[folder]
    out: list[str] = []
    for path in _sources(folder):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        rel = path.relative_to(ROOT)
        for line, module in imported_modules(tree, _package_of(path, folder, package)):
            for prefix in forbidden:
                if _is_under(module, prefix):
                    out.append(f"{rel}:{line}: imports {module} ({folder}/ must not import {prefix})")
        if folder == "engine":
            out += [f"{rel}:{line}: reads the environment ({what})" for line, what in env_reads(tree)]
            out += [f"{rel}:{line}: takes settings untyped: {what}" for line, what in untyped_settings(tree)]
    return sorted(set(out))


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_layer_rules_hold(folder: str) -> None:
    assert _sources(folder), f"no source found under {folder}/"
    broken = _violations(folder)
    assert not broken, f"{len(broken)} layer rule violations in {folder}/:\n" + "\n".join(broken)


def _check_snippet(source: str, package: str = "rtaudit.engine.text") -> list[tuple[int, str]]:
    tree = ast.parse(source)
    return [*imported_modules(tree, package), *env_reads(tree), *untyped_settings(tree)]


def test_the_walk_sees_each_kind_of_leak() -> None:
    """The rules catch what they claim to catch (a walk that found nothing would pass vacuously)."""
    src = (
        "import os\n"
        "from os import getenv\n"
        "from ...workers.settings import load_settings\n"
        "def f(settings, options: 'Any', config: Any, ok: int):\n"
        "    import confluent_kafka\n"
        "    importlib.import_module('faust')\n"
        "    return os.environ.get('X')\n"
    )
    found = _check_snippet(src)
    modules = {m for _, m in imported_modules(ast.parse(src), "rtaudit.engine.text")}
    assert "rtaudit.workers.settings" in modules  # the relative import resolved from engine/text/
    assert {"confluent_kafka", "faust"} <= modules
    assert (2, "from os import getenv") in found and (7, "os.environ") in found
    assert {w for _, w in untyped_settings(ast.parse(src))} == {
        "f(settings: no type)", "f(options: 'Any')", "f(config: Any)"}
    typed = "def g(settings: StageOptions | None = None) -> None: ...\n"
    assert list(untyped_settings(ast.parse(typed))) == []
