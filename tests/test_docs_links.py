"""Every Markdown link of README.md and docs/ leads somewhere: the file exists and its #anchor is
one of that page's headings, as GitHub turns a heading into an anchor (lower case, punctuation
dropped, spaces as dashes, a repeated heading numbered -1, -2, ...)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The folders' own READMEs too (runs/, fits/): the first page a user who opens runs/ reads.
PAGES = [ROOT / "README.md", ROOT / "runs" / "README.md", ROOT / "fits" / "README.md",
         *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(page: Path) -> str:
    """The page without its fenced code blocks, where a `](...)` is code, not a link."""
    return re.sub(r"```.*?```", "", page.read_text(), flags=re.S)


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6}\s+(.*)$", prose(page), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
    return {slug if n == 0 else f"{slug}-{n}" for slug, count in seen.items() for n in range(count + 1)}


def test_github_anchors_of_a_page():
    page = ROOT / "docs" / "fitting.md"
    assert "how-far-the-tools-laws-have-been-shown-to-predict" in anchors(page)
    assert "forms-as-cross-checks-scalinglawsforms-scalinglawscheckscross_formspy" in anchors(page)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_resolves(page):
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):          # https:, mailto:: not checked offline
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
