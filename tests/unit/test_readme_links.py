"""Every relative link of README.md leads somewhere: `make docs` checks the links of docs/ (MkDocs,
strict), but README.md is not one of its pages, so a page it names that does not exist, or a
heading that was renamed, would go unnoticed. Anchors are the heading ids MkDocs gives (the
``toc`` extension of Python-Markdown, whose ``slugify`` this uses)."""

from __future__ import annotations

import re
from pathlib import Path

from batchpilot_local.testing.paths import ROOT
from markdown.extensions.toc import slugify

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slugify(re.sub(r"[`*_]", "", heading), "-") for heading in _HEADING.findall(text)}


def _relative_links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return [link for link in _LINK.findall(text) if not re.match(r"[a-z]+:", link)]


def _broken(page: Path) -> list[str]:
    """Each relative link of ``page`` whose file or anchor does not exist, with why."""
    broken = []
    for link in _relative_links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
            broken.append(f"{link}: no heading with that anchor in {path.name}")
    return broken


def test_every_relative_link_of_the_readme_resolves() -> None:
    readme = ROOT / "README.md"
    assert len(_relative_links(readme)) > 10  # the docs table alone links a dozen pages
    assert _broken(readme) == []


def test_a_missing_page_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "deploy.md").write_text("# Deploy\n\n## The `guided` questions\n", encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text(
        "[a](docs/deploy.md#uninstall) [b](https://example.com) [c](docs/cost.md)"
        " [d](docs/deploy.md#the-guided-questions)\n",
        encoding="utf-8",
    )
    assert _broken(page) == [
        "docs/deploy.md#uninstall: no heading with that anchor in deploy.md",
        "docs/cost.md: no such file",
    ]
