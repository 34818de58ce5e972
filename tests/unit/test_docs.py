"""The documentation holds together: the site builds with ``mkdocs build --strict`` (no dangling
link, no page outside the nav), the configuration reference is what the settings model renders,
the README stays a first screen whose links resolve, and every reference to a documented section
from code, settings and deploy files names a section that exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
#: files whose comments and docstrings point readers at documented sections
SOURCES = [REPO / "rtaudit.toml", REPO / "docker-compose.yml", REPO / "Makefile",
           *(p for d in ("engine", "workers", "schemas", "topics", "benchmarks", "tests", "deploy")
             for p in (REPO / d).rglob("*") if p.suffix in (".py", ".yml", ".yaml", ".toml", ".md", "") and p.is_file()
             and "artifacts" not in p.parts and "__pycache__" not in p.parts)]


def headings(path: Path) -> set[str]:
    """The ``#``-headings of a markdown file (outside code fences), as written."""
    out, fence = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and (m := re.match(r"^#{1,6}\s+(.*?)\s*$", line)):
            out.add(m.group(1))
    return out


def slugs(path: Path) -> set[str]:
    from markdown.extensions.toc import slugify

    return {slugify(h, "-") for h in headings(path)}


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    nav = (REPO / "mkdocs.yml").read_text()
    assert all(p.name in nav for p in DOCS.glob("*.md")), "a docs page missing from mkdocs.yml's nav"


@pytest.mark.parametrize("page", ["configuration.md", "metrics.md"])
def test_the_reference_pages_are_generated_from_the_registries(page: str) -> None:
    from rtaudit.workers.reference_docs import PAGES

    assert (DOCS / page).read_text() == PAGES[page](), f"docs/{page} is stale: python -m rtaudit.workers.reference_docs docs/"


def test_the_references_list_every_setting_and_metric() -> None:
    from prometheus_client import REGISTRY

    from rtaudit.workers import metrics  # noqa: F401
    from rtaudit.workers.settings import Settings

    config = (DOCS / "configuration.md").read_text()
    for name in Settings.model_fields:
        assert f"| `{name}` |" in config or f"`[{name}]`" in config, name
    page = (DOCS / "metrics.md").read_text()
    names = [f.name for c in list(REGISTRY._collector_to_names) if hasattr(c, "describe")
             for f in c.describe() if f.name.startswith("rtaudit_")]
    assert len(names) >= 20 and all(f"`{n}" in page for n in names)


def test_the_readme_is_a_first_screen_whose_links_resolve() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        assert (REPO / path).is_file(), f"README links to {path}, which does not exist"
        if anchor:
            assert anchor in slugs(REPO / path), f"README links to {target}: no such section"


@pytest.mark.parametrize("stale", ["BROKER_NOTES", "../shared/BROKER_NOTES"])
def test_nothing_points_to_notes_a_user_does_not_have(stale: str) -> None:
    offenders = [str(p.relative_to(REPO)) for p in [REPO / "README.md", *DOCS.glob("*.md"), *SOURCES]
                 if p != Path(__file__) and stale in p.read_text(errors="replace")]
    assert offenders == [], offenders


def sections(path: Path) -> list[str]:
    """What a reference may name: the headings of a page and its bold lead-ins (``**Inference threads.**``)."""
    text = path.read_text()
    return [*headings(path), *(m.strip(" .") for m in re.findall(r"\*\*([^*]+)\*\*", text))]


def test_every_reference_to_a_documented_section_exists() -> None:
    """``docs/batching.md "Batching profiles"`` in a comment names a heading (or the start of one)
    or a bold lead-in of that page; no file cites a README section (the README is a first screen;
    its sections move)."""
    missing, readme = [], []
    for path in SOURCES:
        if path == Path(__file__).resolve():
            continue
        text = re.sub(r"\s*\n\s*(?:#:?|//)?\s*", " ", path.read_text(errors="replace"))  # comments joined across lines
        for page, section in re.findall(r"docs/([\w-]+\.md)[,:]?\s+(?:section\s+)?\"([A-Z][^\"]{2,80})\"", text):
            if not (DOCS / page).is_file() or not any(s.startswith(section) for s in sections(DOCS / page)):
                missing.append(f"{path.relative_to(REPO)}: docs/{page} \"{section}\"")
        if re.search(r"README(?:\.md)?[,:]?\s+(?:section\s+)?\"[A-Z]", text):
            readme.append(str(path.relative_to(REPO)))
    assert missing == [], missing
    assert readme == [], f"cite a docs/ page, not a README section: {readme}"
